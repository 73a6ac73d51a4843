#include "../test_util.hpp"

#include <fluxion/tensor/creation.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

// argsort, sort, top_k and take_along_axis against std::stable_sort over each lane, with ties and
// NaN; reverse, tile and repeat against index arithmetic; norm against loops; their errors.

namespace {

/// The stable order of each lane of x along `axis` (NaN above every number), by std::stable_sort.
std::vector<std::int32_t> naive_argsort(const std::vector<double>& x, const fx::shape& s, int axis, bool descending) {
  fx::index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const fx::index_t n = s[axis];
  std::vector<std::int32_t> out(x.size());
  for (fx::index_t o = 0; o < outer; ++o)
    for (fx::index_t i = 0; i < inner; ++i) {
      auto at = [&](fx::index_t j) { return x[static_cast<std::size_t>((o * n + j) * inner + i)]; };
      auto rank = [](double v) { return std::isnan(v) ? std::numeric_limits<double>::infinity() : v; };
      std::vector<std::int32_t> order(static_cast<std::size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) {
        const double va = at(a), vb = at(b);
        if (std::isnan(va) || std::isnan(vb)) return descending ? std::isnan(va) && !std::isnan(vb) : std::isnan(vb) && !std::isnan(va);
        return descending ? rank(va) > rank(vb) : rank(va) < rank(vb);
      });
      for (fx::index_t j = 0; j < n; ++j) out[static_cast<std::size_t>((o * n + j) * inner + i)] = order[static_cast<std::size_t>(j)];
    }
  return out;
}

}  // namespace

TEST_CASE("argsort and sort: every axis, both directions, ties and NaN, against std::stable_sort") {
  const fx::shape s{4, 5, 6};
  // Few distinct values, so lanes have ties, and a few NaN.
  auto xv = fx::tensor<double>(fx::floor(test::random_tensor<double>(s, 1, 0, 4))).to_vector();
  xv[(1 * 5 + 2) * 6 + 3] = std::nan("");
  xv[0] = std::nan("");
  xv[xv.size() - 1] = -std::numeric_limits<double>::infinity();
  const auto x = fx::from_vector(xv, s);
  for (int axis = 0; axis < 3; ++axis)
    for (auto direction : {fx::ascending, fx::descending}) {
      CAPTURE(axis);
      const bool descending = direction == fx::descending;
      CAPTURE(descending);
      fx::tensor<std::int32_t> order = fx::argsort(x, axis, direction);
      const auto want = naive_argsort(xv, s, axis, descending);
      CHECK(order.to_vector() == want);
      fx::tensor<double> sorted = fx::sort(x, axis, direction);
      fx::tensor<double> picked = fx::take_along_axis(x, order, axis);
      const auto sv = sorted.to_vector(), pv = picked.to_vector();
      for (std::size_t k = 0; k < sv.size(); ++k) {
        CHECK((sv[k] == pv[k] || (std::isnan(sv[k]) && std::isnan(pv[k]))));
      }
    }
  fx::tensor<float> f = {3, 1, 2};
  CHECK(fx::tensor<float>(fx::sort(f)).to_vector() == std::vector<float>{1, 2, 3});
  CHECK(fx::argsort(fx::tensor<int>{{5, 5, 1}}, -1, fx::descending).to_vector() == std::vector<std::int32_t>{0, 1, 2});
  CHECK(fx::argsort(f * 2.f).to_vector() == std::vector<std::int32_t>{1, 2, 0});  // of an expression
}

TEST_CASE("top_k: the k largest of each row, ties to the lower position, NaN first") {
  fx::tensor<float> x = {{1, 4, 4, 2, 0}, {7, std::nanf(""), 3, 7, 9}};
  auto [values, indices] = fx::top_k(x, 3);
  CHECK(indices.shape() == fx::shape{2, 3});
  CHECK(indices.to_vector() == std::vector<std::int32_t>{1, 2, 3, 1, 4, 0});
  const auto v = values.to_vector();
  CHECK(v[0] == 4);
  CHECK(v[1] == 4);
  CHECK(v[2] == 2);
  CHECK(std::isnan(v[3]));
  CHECK(v[4] == 9);
  CHECK(v[5] == 7);
  // Against a full descending argsort of a larger operand, for every k.
  const auto big = test::random_tensor<double>({3, 4, 33}, 2);
  const auto full = fx::argsort(big, -1, fx::descending).to_vector();
  for (fx::index_t k : {0, 1, 5, 32, 33}) {
    CAPTURE(k);
    auto [tv, ti] = fx::top_k(big, k);
    CHECK(ti.shape() == fx::shape{3, 4, k});
    const auto got = ti.to_vector();
    for (fx::index_t row = 0; row < 12; ++row)
      for (fx::index_t j = 0; j < k; ++j) CHECK(got[static_cast<std::size_t>(row * k + j)] == full[static_cast<std::size_t>(row * 33 + j)]);
    const auto bv = big.to_vector(), gv = tv.to_vector();
    for (fx::index_t row = 0; row < 12; ++row)
      for (fx::index_t j = 0; j < k; ++j)
        CHECK(gv[static_cast<std::size_t>(row * k + j)] == bv[static_cast<std::size_t>(row * 33 + got[static_cast<std::size_t>(row * k + j)])]);
  }
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::top_k(x, 6); },
                                                "top_k: k = 6 is not in [0, 5], the extent of the last axis of shape (2, 5)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::top_k(fx::tensor<float>(2.f)); }, "top_k: the operand is a scalar");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::argsort(fx::tensor<float>(2.f)); }, "argsort: the operand is a scalar");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::sort(x, 2); }, "sort: axis 2 is out of range");
}

/// The first k of each row of x (rows of n) in sorted order by fx::detail::sorted_positions (top_k's
/// kernel, both directions), against naive_argsort.
template <class T>
void check_first_k(const std::vector<double>& xv, fx::index_t rows, fx::index_t n, fx::index_t k, bool descending) {
  CAPTURE(n);
  CAPTURE(k);
  CAPTURE(descending);
  std::vector<T> cast(xv.begin(), xv.end());
  const fx::tensor<T> x = fx::from_vector(cast, fx::shape{rows, n});
  const auto got = fx::detail::sorted_positions(x, 1, k, descending, "test").to_vector();
  const auto want = naive_argsort(std::vector<double>(cast.begin(), cast.end()), fx::shape{rows, n}, 1, descending);
  for (fx::index_t r = 0; r < rows; ++r)
    for (fx::index_t j = 0; j < k; ++j)
      CHECK(got[static_cast<std::size_t>(r * k + j)] == want[static_cast<std::size_t>(r * n + j)]);
}

TEST_CASE("top_k's few largest (k at most n / 8): lanes read in vectors and in place, against a stable sort") {
  // Lengths that are and are not whole vectors (16 floats or 8 doubles with AVX-512), k on either
  // side of a vector's width, and lanes of random values, of many ties, in order, in reverse order,
  // all equal, and with infinities; the NaN lane is offered one value at a time (no vector pass).
  for (fx::index_t n : {16, 17, 64, 100, 136, 1003}) {
    for (fx::index_t k : {1, 2, 7, 8, 9, 16, 17}) {
      if (k * 8 > n) continue;
      const fx::index_t rows = 7;
      auto xv = test::random_tensor<double>({rows, n}, static_cast<std::uint64_t>(n * 31 + k), -1, 1).to_vector();
      for (fx::index_t j = 0; j < n; ++j) {
        xv[static_cast<std::size_t>(1 * n + j)] = std::floor(xv[static_cast<std::size_t>(1 * n + j)] * 2);  // 4 values
        xv[static_cast<std::size_t>(2 * n + j)] = static_cast<double>(j);
        xv[static_cast<std::size_t>(3 * n + j)] = static_cast<double>(n - j);
        xv[static_cast<std::size_t>(4 * n + j)] = 0.5;
      }
      xv[static_cast<std::size_t>(5 * n + n / 2)] = std::numeric_limits<double>::infinity();
      xv[static_cast<std::size_t>(5 * n + n - 1)] = -std::numeric_limits<double>::infinity();
      xv[static_cast<std::size_t>(6 * n + n / 3)] = std::nan("");
      for (bool descending : {true, false}) {
        check_first_k<float>(xv, rows, n, k, descending);
        check_first_k<double>(xv, rows, n, k, descending);
      }
    }
  }
  // The values of top_k are the operand's at the positions, in a contiguous row of 1000.
  const auto row = test::random_tensor<float>({2, 1000}, 9);
  auto [values, indices] = fx::top_k(row, 10);
  const auto rv = row.to_vector(), vv = values.to_vector();
  const auto iv = indices.to_vector();
  for (std::size_t j = 0; j < vv.size(); ++j) CHECK(vv[j] == rv[(j / 10) * 1000 + static_cast<std::size_t>(iv[j])]);
}

TEST_CASE("take_along_axis: reads the given positions of each lane; bad indices name their position") {
  fx::tensor<double> x = {{10, 11, 12}, {20, 21, 22}};
  fx::tensor<std::int64_t> i = {{2, 2, 0, 1}, {0, 1, 1, 1}};
  fx::tensor<double> y = fx::take_along_axis(x, i, 1);
  CHECK(y.to_vector() == std::vector<double>{12, 12, 10, 11, 20, 21, 21, 21});
  fx::tensor<std::int32_t> rows = {{1, 0, 1}};
  fx::tensor<double> z = fx::take_along_axis(x, rows, 0);
  CHECK(z.to_vector() == std::vector<double>{20, 11, 22});
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::take_along_axis(x, fx::tensor<std::int32_t>{{0, 3}, {1, 1}}, 1); },
                                            "take_along_axis: indices[0, 1] = 3 is not in [0, 3) (axis 1 of shape (2, 3))");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::take_along_axis(x, fx::tensor<std::int32_t>{{0, -1}, {1, 1}}, 1); },
                                            "take_along_axis: indices[0, 1] = -1 is not in [0, 3)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::take_along_axis(x, fx::tensor<std::int32_t>{{0, 1}}, 1); },
                                           "take_along_axis: indices of shape (1, 2) do not fit a of shape (2, 3) along axis 1");
}

TEST_CASE("reverse, tile and repeat against index arithmetic") {
  const auto x = test::random_tensor<double>({2, 3, 4}, 3);
  fx::tensor<double> r = fx::reverse(x, {0, -1});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) CHECK(r(a, b, c) == x(1 - a, b, 3 - c));
  fx::tensor<double> one_axis = fx::reverse(x, 1);
  CHECK(one_axis(1, 0, 2) == x(1, 2, 2));
  fx::tensor<double> none_reversed = fx::reverse(x, {});  // braces are the list of axes, even empty
  CHECK(none_reversed.to_vector() == x.to_vector());
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::reverse(x, {1, -2}); }, "reverse: axis -2 is repeated");

  fx::tensor<double> t = fx::tile(x, {2, 1, 3});
  CHECK(t.shape() == fx::shape{4, 3, 12});
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 12; ++c) CHECK(t(a, b, c) == x(a % 2, b, c % 4));
  fx::tensor<double> t0 = fx::tile(x, {1, 0, 1});
  CHECK(t0.shape() == fx::shape{2, 0, 4});
  fx::tensor<double> te = fx::tile(x + 1.0, {1, 1, 2});  // of an expression
  CHECK(te(1, 2, 7) == x(1, 2, 3) + 1.0);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::tile(x, {2, 2}); },
                                                "tile: 2 multiples given for shape (2, 3, 4), which has 3 axes");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::tile(x, {1, -1, 1}); }, "tile: multiples[1] = -1 is negative");

  fx::tensor<double> p = fx::repeat(x, 3, 1);
  CHECK(p.shape() == fx::shape{2, 9, 4});
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 9; ++b)
      for (int c = 0; c < 4; ++c) CHECK(p(a, b, c) == x(a, b / 3, c));
  fx::tensor<double> q = fx::repeat(x, {2, 0, 1}, -2);
  CHECK(q.shape() == fx::shape{2, 3, 4});
  const int source[] = {0, 0, 2};
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) CHECK(q(a, b, c) == x(a, source[b], c));
  fx::tensor<double> q1 = fx::repeat(x, std::vector<fx::index_t>{2}, 2);
  CHECK(q1.to_vector() == fx::tensor<double>(fx::repeat(x, 2, 2)).to_vector());
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::repeat(x, {1, 2}, 1); },
                                                "repeat: 2 repeats given for axis 1 of shape (2, 3, 4), which needs 1 or 3");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::repeat(x, -1, 1); }, "repeat: repeats = -1 is negative");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::repeat(x, {1, -2, 1}, 1); }, "repeat: repeats[1] = -2 is negative");
}

TEST_CASE("norm: 1, 2, p and infinity over every element and over axes, against loops") {
  const auto x = test::random_tensor<double>({3, 4}, 4);
  const auto v = x.to_vector();
  double l1 = 0, l2 = 0, l3 = 0, inf = 0;
  for (double e : v) l1 += std::abs(e), l2 += e * e, l3 += std::pow(std::abs(e), 3), inf = std::max(inf, std::abs(e));
  CHECK(fx::norm(x).item() == doctest::Approx(std::sqrt(l2)));
  CHECK(fx::norm(x, 1).item() == doctest::Approx(l1));
  CHECK(fx::norm(x, 3).item() == doctest::Approx(std::cbrt(l3)));
  CHECK(fx::norm(x, INFINITY).item() == doctest::Approx(inf));
  CHECK(fx::norm(x, 2, {0, 1}).item() == doctest::Approx(std::sqrt(l2)));  // Frobenius
  fx::tensor<double> rows = fx::norm(x, 2, 1, fx::keepdims);
  CHECK(rows.shape() == fx::shape{3, 1});
  for (int i = 0; i < 3; ++i) {
    double s = 0;
    for (int j = 0; j < 4; ++j) s += x(i, j) * x(i, j);
    CHECK(rows(i, 0) == doctest::Approx(std::sqrt(s)));
  }
  CHECK(fx::norm(fx::tensor<float>(fx::shape{0}), INFINITY).item() == 0.f);
  CHECK(fx::norm(fx::tensor<float>(fx::shape{0})).item() == 0.f);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::norm(x, 0); }, "norm: ord = 0.000000 must be positive");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::norm(x, 1, {0, 1}); },
                                                "norm: ord = 1.000000 over two axes is a matrix norm in TensorFlow");
}
