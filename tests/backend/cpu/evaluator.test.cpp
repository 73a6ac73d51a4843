#include "../../test_util.hpp"

#include <cmath>
#include <limits>

// The CPU evaluator runs where(compare(a, b), x, y) (every kinked derivative: relu, abs, max,
// clip) with SIMD selects. These check it against a scalar loop: every comparison, NaN on either
// side, tails around the vector width, a broadcast bias (the relu backward of a dense or conv
// layer) and a strided (transposed) operand, which take the contiguous, flat and row paths.

namespace {

template <class T, class Cmp, class F>
void check_where(Cmp cmp, F ref, const std::string& name) {
  CAPTURE(name);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (fx::index_t n : {1, 7, 16, 17, 33, 100, 40000}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({n}, 3), b = test::random_tensor<T>({n}, 4), x = test::random_tensor<T>({n}, 5);
    a.mutable_data()[0] = nan;
    if (n > 2) b.mutable_data()[2] = nan;
    if (n > 3) b.mutable_data()[3] = a(3);  // equal operands
    fx::tensor<T> r = fx::where(cmp(a + b, b), x, T(0));
    for (fx::index_t i = 0; i < n; ++i) {
      const T s = a(i) + b(i);
      const T want = ref(s, b(i)) ? x(i) : T(0);
      CHECK_MESSAGE((r(i) == want || (std::isnan(r(i)) && std::isnan(want))), "element " << i);
    }
  }
}

}  // namespace

TEST_CASE_TEMPLATE("evaluator: where(compare(a, b), x, y) agrees with a scalar loop, NaN included", T, float, double) {
  check_where<T>([](const auto& a, const auto& b) { return a > b; }, [](T a, T b) { return a > b; }, "greater");
  check_where<T>([](const auto& a, const auto& b) { return a >= b; }, [](T a, T b) { return a >= b; }, "greater_equal");
  check_where<T>([](const auto& a, const auto& b) { return a < b; }, [](T a, T b) { return a < b; }, "less");
  check_where<T>([](const auto& a, const auto& b) { return a <= b; }, [](T a, T b) { return a <= b; }, "less_equal");
  check_where<T>([](const auto& a, const auto& b) { return a == b; }, [](T a, T b) { return a == b; }, "equal");
  check_where<T>([](const auto& a, const auto& b) { return a != b; }, [](T a, T b) { return a != b; }, "not_equal");
}

TEST_CASE_TEMPLATE("evaluator: relu's backward with a broadcast bias and a strided gradient", T, float, double) {
  // (batch, rows, cols, channels) + (channels): the pattern of a conv layer's relu backward.
  for (fx::index_t c : {3, 16, 32, 37}) {
    CAPTURE(c);
    const fx::shape s{4, 5, 6, c};
    auto z = test::random_tensor<T>(s, 7), bias = test::random_tensor<T>({c}, 8), dy = test::random_tensor<T>(s, 9);
    fx::tensor<T> r = fx::where(z + bias > T(0), dy, T(0));
    for (fx::index_t i = 0; i < s.size(); ++i) {
      const T want = z.data()[i] + bias(i % c) > T(0) ? dy.data()[i] : T(0);
      CHECK(r.data()[i] == want);
    }
    // A transposed operand: not contiguous, so the row path gathers it.
    auto m = test::random_tensor<T>({c, 9}, 10), g = test::random_tensor<T>({9, c}, 11);
    fx::tensor<T> mt = fx::where(fx::transpose(m) > g, g, fx::transpose(m));
    for (fx::index_t i = 0; i < 9; ++i)
      for (fx::index_t j = 0; j < c; ++j) CHECK(mt(i, j) == (m(j, i) > g(i, j) ? g(i, j) : m(j, i)));
  }
}
