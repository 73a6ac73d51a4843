#include "../test_util.hpp"

// cumsum against a naive loop over every axis of a rank-3 operand, with each of its flags, for
// every element type; its errors.

namespace {

/// cumsum of x (shape s, row-major) along `axis` by a loop over (outer, j, inner), summed in T.
template <class T>
std::vector<T> naive_cumsum(const std::vector<T>& x, const fx::shape& s, int axis, bool exclusive, bool reverse) {
  fx::index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const fx::index_t n = s[axis];
  std::vector<T> y(x.size());
  for (fx::index_t o = 0; o < outer; ++o)
    for (fx::index_t i = 0; i < inner; ++i) {
      T sum = 0;
      for (fx::index_t step = 0; step < n; ++step) {
        const fx::index_t j = reverse ? n - 1 - step : step;
        const auto at = static_cast<std::size_t>((o * n + j) * inner + i);
        if (exclusive) y[at] = sum, sum += x[at];
        else sum += x[at], y[at] = sum;
      }
    }
  return y;
}

}  // namespace

TEST_CASE_TEMPLATE("cumsum: every axis and flag against a naive loop", T, float, double, std::int32_t, std::int64_t) {
  const fx::shape s{3, 4, 5};
  fx::tensor<T> x = fx::cast<T>(test::random_tensor<double>(s, 1, -9, 9));
  const auto xv = x.to_vector();
  for (int axis = -3; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        fx::tensor<T> y = fx::cumsum(x, axis, {.exclusive = exclusive, .reverse = reverse});
        CHECK(y.shape() == s);
        // The same additions in the same order: equal in every type.
        CHECK(y.to_vector() == naive_cumsum(xv, s, axis < 0 ? axis + 3 : axis, exclusive, reverse));
      }
}

TEST_CASE("cumsum: of an expression, of bool, long lanes, empty axes and values") {
  fx::tensor<double> x = {1, 2, 3, 4};
  fx::tensor<double> y = fx::cumsum(x * 2.0);
  CHECK(y.to_vector() == std::vector<double>{2, 6, 12, 20});
  fx::tensor<double> tf_example = fx::cumsum(fx::tensor<double>{2, 4, 6, 8}, 0, {.exclusive = true, .reverse = true});
  CHECK(tf_example.to_vector() == std::vector<double>{18, 14, 8, 0});  // TensorFlow's documented example
  fx::tensor<std::int32_t> counts = fx::cumsum(fx::tensor<bool>{true, false, true, true});
  CHECK(counts.to_vector() == std::vector<std::int32_t>{1, 1, 2, 3});
  // Lanes longer than a task's share, many lanes: the thread pool's split changes nothing.
  const auto big = test::random_tensor<double>({3, 70000}, 2);
  fx::tensor<double> c = fx::cumsum(big, 1);
  CHECK(c.to_vector() == naive_cumsum(big.to_vector(), big.shape(), 1, false, false));
  const auto wide = test::random_tensor<double>({2, 3, 20000}, 3);
  fx::tensor<double> cw = fx::cumsum(wide, 1, {.reverse = true});
  CHECK(cw.to_vector() == naive_cumsum(wide.to_vector(), wide.shape(), 1, false, true));
  // Many rows, in each direction.
  const auto rows = test::random_tensor<double>({37, 300}, 4);
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      fx::tensor<double> r = fx::cumsum(rows, -1, {.exclusive = exclusive, .reverse = reverse});
      CHECK(r.to_vector() == naive_cumsum(rows.to_vector(), rows.shape(), 1, exclusive, reverse));
    }
  fx::tensor<float> empty = fx::cumsum(fx::tensor<float>(fx::shape{2, 0}), 1);
  CHECK(empty.shape() == fx::shape{2, 0});
  fx::tensor<float> empty_lanes = fx::cumsum(fx::tensor<float>(fx::shape{0, 3}), 1);
  CHECK(empty_lanes.shape() == fx::shape{0, 3});
}

TEST_CASE("cumsum: errors name the op and the values") {
  fx::tensor<float> x = {{1, 2}, {3, 4}};
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::cumsum(x, 2); }, "cumsum: axis 2 is out of range [-2, 2) for rank 2");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::cumsum(fx::tensor<float>(1.f)); },
                                                "cumsum: the operand is a scalar");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::cumsum(fx::tensor<float>::none()); }, "cumsum: an operand is none");
}
