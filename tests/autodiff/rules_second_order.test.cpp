#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "gradient_checks.hpp"

// Second derivatives of binary ops: Hessian-vector products, reverse over reverse and forward
// over reverse, against central differences of the tape's gradients
// (fx::testing::check_second_order). The other ops are in rules_second_order_unary, _trig,
// _reduce and _matmul (split to keep each file's compile time short).

using test::check_second;
using test::random_tensor;

TEST_CASE("second order: multiply, divide and pow, with broadcasting") {
  const auto a = random_tensor<double>({2, 3}, 1, 0.5, 2), b = random_tensor<double>({3}, 2, 0.5, 2);
  check_second("multiply", [](const auto& p, const auto& q) { return p * q * p; }, a, b);
  check_second("divide", [](const auto& p, const auto& q) { return p / q; }, a, b);
  check_second("pow", [](const auto& p, const auto& q) { return fx::pow(p, q); }, a, b);
}

TEST_CASE("second order: gradients accumulated under an outer tape stay differentiable") {
  // Under an outer tape, the sum of a leaf's gradient terms is recorded instead of updated in place.
  fx::tensor<double> x = {0.5, -1.5};
  fx::gradient_tape outer;
  outer.watch(x);
  fx::tensor<double> g;
  {
    fx::gradient_tape inner;
    inner.watch(x);
    fx::tensor<double> y = fx::square(x) * x + fx::sin(x);  // x read three times
    g = inner.gradient(y, x);                                // 3x^2 + cos(x)
  }
  for (int i = 0; i < 2; ++i) CHECK(g(i) == doctest::Approx(3 * x(i) * x(i) + std::cos(x(i))));
  auto h = outer.gradient(g, x);  // 6x - sin(x)
  for (int i = 0; i < 2; ++i) CHECK(h(i) == doctest::Approx(6 * x(i) - std::sin(x(i))));
}

TEST_CASE("second order: cumsum, norm and sort") {
  const auto a = random_tensor<double>({2, 3}, 3, 0.5, 2);
  check_second("cumsum", [](const auto& p) { return fx::cumsum(p * p, 1, {.reverse = true}) * p; }, a);
  check_second("norm", [](const auto& p) { return fx::norm(p, 2, 1); }, a);
  check_second("norm 3", [](const auto& p) { return fx::norm(p, 3); }, a);
  const fx::tensor<double> distinct = {{0.3, -1.2, 2.5}, {0.9, -0.4, 1.7}};
  check_second("sort", [](const auto& p) { return fx::sort(p * p * p, 1); }, distinct);
}
