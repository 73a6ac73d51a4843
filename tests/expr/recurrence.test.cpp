#include "../test_util.hpp"

// cumprod and linear_recurrence against a naive loop over every axis of a rank-3 operand, with
// each flag, for every element type; TensorFlow's documented cumprod examples; their errors.

namespace {

/// h[t] = a[t] * h[t - 1] + b[t] (b empty: 0) along `axis` from h[-1] = initial, by a loop over
/// (outer, j, inner), or from lane_initial[lane] where given; exclusive gives h[t - 1] at t.
template <class T>
std::vector<T> naive_recurrence(const std::vector<T>& a, const std::vector<T>& b, const fx::shape& s, int axis,
                                bool exclusive, bool reverse, T initial, const std::vector<T>& lane_initial = {}) {
  fx::index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const fx::index_t n = s[axis];
  std::vector<T> y(a.size());
  for (fx::index_t o = 0; o < outer; ++o)
    for (fx::index_t i = 0; i < inner; ++i) {
      T h = lane_initial.empty() ? initial : lane_initial[static_cast<std::size_t>(o * inner + i)];
      for (fx::index_t step = 0; step < n; ++step) {
        const fx::index_t j = reverse ? n - 1 - step : step;
        const auto at = static_cast<std::size_t>((o * n + j) * inner + i);
        const T next = b.empty() ? T(a[at] * h) : T(a[at] * h + b[at]);
        y[at] = exclusive ? h : next;
        h = next;
      }
    }
  return y;
}

template <class T>
void check_close(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if constexpr (std::is_floating_point_v<T>) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
    else CHECK(got[i] == want[i]);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("cumprod: every axis and flag against a naive loop", T, float, double, std::int32_t, std::int64_t) {
  const fx::shape s{3, 4, 5};
  // Values near 1 in magnitude (products of up to 5 stay small), with zeros and negatives.
  fx::tensor<T> x = fx::cast<T>(fx::round(test::random_tensor<double>(s, 1, -2.4, 2.4)));
  const auto xv = x.to_vector();
  for (int axis = -3; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        fx::tensor<T> y = fx::cumprod(x, axis, {.exclusive = exclusive, .reverse = reverse});
        CHECK(y.shape() == s);
        // Small integers: exact products in every type.
        CHECK(y.to_vector() == naive_recurrence<T>(xv, {}, s, axis < 0 ? axis + 3 : axis, exclusive, reverse, T(1)));
      }
}

TEST_CASE("cumprod: TensorFlow's examples, of an expression, long lanes, empty extents") {
  const fx::tensor<double> abc = {2, 3, 5};
  CHECK(fx::tensor<double>(fx::cumprod(abc)).to_vector() == std::vector<double>{2, 6, 30});
  CHECK(fx::tensor<double>(fx::cumprod(abc, 0, {.exclusive = true})).to_vector() == std::vector<double>{1, 2, 6});
  CHECK(fx::tensor<double>(fx::cumprod(abc, 0, {.reverse = true})).to_vector() == std::vector<double>{30, 15, 5});
  CHECK(fx::tensor<double>(fx::cumprod(abc, 0, {.exclusive = true, .reverse = true})).to_vector() ==
        std::vector<double>{15, 5, 1});
  CHECK(fx::tensor<double>(fx::cumprod(abc * 2.0)).to_vector() == std::vector<double>{4, 24, 240});
  // A variable is an operand as a tensor is.
  fx::variable<double> v(abc);
  CHECK(fx::tensor<double>(fx::cumprod(v, -1)).to_vector() == std::vector<double>{2, 6, 30});
  // Lanes longer than a task's share, and many lanes a row apart: the thread pool's split changes nothing.
  const auto big = test::random_tensor<double>({3, 70000}, 2, 0.99, 1.01);
  check_close(fx::tensor<double>(fx::cumprod(big, 1)).to_vector(),
              naive_recurrence<double>(big.to_vector(), {}, big.shape(), 1, false, false, 1.0));
  const auto wide = test::random_tensor<double>({2, 3, 20000}, 3, 0.5, 1.5);
  CHECK(fx::tensor<double>(fx::cumprod(wide, 1, {.reverse = true})).to_vector() ==
        naive_recurrence<double>(wide.to_vector(), {}, wide.shape(), 1, false, true, 1.0));
  // Many rows, in each direction.
  const auto rows = test::random_tensor<double>({37, 300}, 4, 0.5, 1.5);
  const auto offsets = test::random_tensor<double>({37, 300}, 5);
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      CHECK(fx::tensor<double>(fx::cumprod(rows, 1, {.exclusive = exclusive, .reverse = reverse})).to_vector() ==
            naive_recurrence<double>(rows.to_vector(), {}, rows.shape(), 1, exclusive, reverse, 1.0));
      check_close(fx::tensor<double>(fx::linear_recurrence(rows, offsets, 1, {.exclusive = exclusive, .reverse = reverse}))
                      .to_vector(),
                  naive_recurrence<double>(rows.to_vector(), offsets.to_vector(), rows.shape(), 1, exclusive, reverse, 0.0));
    }
  CHECK(fx::tensor<float>(fx::cumprod(fx::tensor<float>(fx::shape{2, 0}), 1)).shape() == fx::shape{2, 0});
  CHECK(fx::tensor<float>(fx::cumprod(fx::tensor<float>(fx::shape{0, 3}), 1)).shape() == fx::shape{0, 3});
}

TEST_CASE_TEMPLATE("linear_recurrence: every axis and flag against a naive loop", T, float, double, std::int64_t) {
  const fx::shape s{3, 4, 5};
  fx::tensor<T> a = fx::cast<T>(fx::round(test::random_tensor<double>(s, 4, -1.4, 1.4)));
  fx::tensor<T> b = fx::cast<T>(fx::round(test::random_tensor<double>(s, 5, -9, 9)));
  for (int axis = 0; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        fx::tensor<T> h = fx::linear_recurrence(a, b, axis, {.exclusive = exclusive, .reverse = reverse});
        CHECK(h.to_vector() == naive_recurrence<T>(a.to_vector(), b.to_vector(), s, axis, exclusive, reverse, T(0)));
      }
}

TEST_CASE("linear_recurrence: discounted returns, a broadcast coefficient, an exponential moving average") {
  // Returns of two episodes of 4 rewards at gamma 0.5: g[t] = r[t] + 0.5 g[t + 1].
  const fx::tensor<double> r = {{1, 0, 0, 8}, {2, 2, 2, 2}};
  fx::tensor<double> g = fx::linear_recurrence(0.5, r, 1, {.reverse = true});
  CHECK(g.to_vector() == std::vector<double>{2, 2, 4, 8, 3.75, 3.5, 3, 2});
  // One coefficient per lane, broadcast along the axis: (2, 1) against (2, 4).
  fx::tensor<double> per_lane = fx::linear_recurrence(fx::tensor<double>{{0.5}, {1.0}}, r, 1, {.reverse = true});
  CHECK(per_lane.to_vector() == std::vector<double>{2, 2, 4, 8, 8, 6, 4, 2});
  // An exponential moving average m[t] = 0.75 m[t - 1] + 0.25 x[t], started at x[0] by adding 0.75 x[0] to b[0].
  const fx::tensor<double> x = {4, 8, 0, 4};
  fx::tensor<double> b = x * 0.25 + fx::tensor<double>{3, 0, 0, 0};
  fx::tensor<double> m = fx::linear_recurrence(0.75, b, 0);
  CHECK(m.to_vector() == std::vector<double>{4, 5, 3.75, 3.8125});
  // Of expressions, and exclusive: h[t - 1].
  fx::tensor<double> e = fx::linear_recurrence(fx::tensor<double>{2, 2, 2} * 1.0, fx::tensor<double>{1, 1, 1} + 0.0, 0,
                                               {.exclusive = true});
  CHECK(e.to_vector() == std::vector<double>{0, 1, 3});
}

TEST_CASE_TEMPLATE("linear_recurrence from an initial state: every axis and flag against a naive loop", T, float, double,
                   std::int64_t) {
  const fx::shape s{3, 4, 5};
  fx::tensor<T> a = fx::cast<T>(fx::round(test::random_tensor<double>(s, 4, -1.4, 1.4)));
  fx::tensor<T> b = fx::cast<T>(fx::round(test::random_tensor<double>(s, 5, -9, 9)));
  for (int axis = 0; axis < 3; ++axis) {
    fx::shape lanes;
    for (int d = 0; d < 3; ++d)
      if (d != axis) lanes.push_back(s[d]);
    const fx::tensor<T> h0 = fx::cast<T>(fx::round(test::random_tensor<double>(lanes, 6 + static_cast<unsigned>(axis), -5, 5)));
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        const fx::linear_recurrence_options o{.exclusive = exclusive, .reverse = reverse};
        fx::tensor<T> h = fx::linear_recurrence(a, b, h0, axis, o);
        CHECK(h.to_vector() == naive_recurrence<T>(a.to_vector(), b.to_vector(), s, axis, exclusive, reverse, T(0), h0.to_vector()));
        // A scalar coefficient, and a state that broadcasts (one value for every lane).
        fx::tensor<T> c = fx::linear_recurrence(T(2), b, fx::tensor<T>(T(3)), axis, o);
        CHECK(c.to_vector() == naive_recurrence<T>(std::vector<T>(static_cast<std::size_t>(s.size()), T(2)), b.to_vector(), s,
                                                   axis, exclusive, reverse, T(3)));
      }
  }
}

TEST_CASE("linear_recurrence from an initial state: chunks carried over, a broadcast coefficient, empty axes") {
  // A sequence of 6 steps in two chunks of 3, the first's last state starting the second: the whole run's values.
  const auto a = test::random_tensor<double>({2, 6, 3}, 7, 0.5, 1.0), b = test::random_tensor<double>({2, 6, 3}, 8);
  const auto h0 = test::random_tensor<double>({2, 3}, 9);
  fx::tensor<double> whole = fx::linear_recurrence(a, b, h0, 1);
  auto chunk = [](const fx::tensor<double>& t, fx::index_t first) { return fx::tensor<double>(fx::slice(t, {0, first, 0}, {2, 3, 3})); };
  fx::tensor<double> h1 = fx::linear_recurrence(chunk(a, 0), chunk(b, 0), h0, 1);
  fx::tensor<double> carried = fx::squeeze(fx::slice(h1, {0, 2, 0}, {2, 1, 3}), {1});
  fx::tensor<double> h2 = fx::linear_recurrence(chunk(a, 3), chunk(b, 3), carried, 1);
  fx::tensor<double> joined = fx::concat<double, fx::cpu>({h1, h2}, 1);
  REQUIRE(joined.shape() == whole.shape());
  for (fx::index_t i = 0; i < whole.size(); ++i) CHECK(joined.data()[i] == doctest::Approx(whole.data()[i]).epsilon(1e-12));
  // Returns bootstrapped from a value estimate after the last reward: g[3] = r[3] + 0.5 v.
  const fx::tensor<double> r = {{1, 0, 0, 8}, {2, 2, 2, 2}};
  fx::tensor<double> g = fx::linear_recurrence(0.5, r, fx::tensor<double>{16, 0}, 1, {.reverse = true});
  CHECK(g.to_vector() == std::vector<double>{3, 4, 8, 16, 3.75, 3.5, 3, 2});
  // One coefficient per lane broadcast along the axis, and an expression for the state.
  fx::tensor<double> per_lane = fx::linear_recurrence(fx::tensor<double>{{0.5}, {1.0}}, r, fx::tensor<double>{16, 0} * 1.0, 1,
                                                      {.reverse = true});
  CHECK(per_lane.to_vector() == std::vector<double>{3, 4, 8, 16, 8, 6, 4, 2});
  // An empty axis: an empty result of b's shape.
  fx::tensor<double> empty = fx::linear_recurrence(0.5, fx::tensor<double>(fx::broadcast_to(fx::tensor<double>(0.0), {2, 0})), fx::tensor<double>{1, 2}, 1);
  CHECK(empty.shape() == fx::shape{2, 0});
}

TEST_CASE("cumprod and linear_recurrence: errors name the op and the values") {
  fx::tensor<float> x = {{1, 2}, {3, 4}};
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::cumprod(x, 2); }, "cumprod: axis 2 is out of range [-2, 2) for rank 2");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::cumprod(fx::tensor<float>(1.f)); },
                                                "cumprod: the operand is a scalar; it needs an axis to run along");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::cumprod(fx::tensor<float>::none()); }, "cumprod: an operand is none");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::linear_recurrence(x, x, -3); },
                                            "linear_recurrence: axis -3 is out of range [-2, 2) for rank 2");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::linear_recurrence(fx::tensor<float>{1, 2, 3}, x, 1); },
      "linear_recurrence: the coefficients a of shape (3,) do not broadcast to the shape of b, (2, 2)");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::linear_recurrence(x, fx::tensor<float>{1, 2}, 0); },
      "linear_recurrence: the coefficients a of shape (2, 2) do not broadcast to the shape of b, (2,)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::linear_recurrence(0.5f, fx::tensor<float>(2.f)); },
                                                "linear_recurrence: the operand is a scalar");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::linear_recurrence(x, fx::tensor<float>::none()); },
                                                "linear_recurrence: an operand is none");
  // The initial state's shape: b's without the axis, or one that broadcasts to it.
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::linear_recurrence(x, x, fx::tensor<float>{1, 2, 3}, 1); },
      "linear_recurrence: the initial state of shape (3,) does not broadcast to (2,), the shape of b (2, 2) without axis 1");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::linear_recurrence(0.5f, test::random_tensor<float>({2, 3, 4}, 1), x, -1); },
      "linear_recurrence: the initial state of shape (2, 2) does not broadcast to (2, 3), the shape of b (2, 3, 4) without axis 2");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::linear_recurrence(x, x, fx::tensor<float>::none(), 1); },
                                                "linear_recurrence: an operand is none");
}
