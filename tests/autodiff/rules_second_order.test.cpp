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

TEST_CASE("second order: gather, gather_nd and scatter_nd, with repeated indices") {
  // Until stop 60 gather's adjoint was a kernel no tape recorded: with the nonlinearity after the
  // gather, Hv was 0 (square) or a third of the right value (a product of two gathers).
  const auto flat = random_tensor<double>({6}, 6, 0.5, 2);
  const fx::tensor<std::int32_t> ids = {5, 0, 5};
  check_second("gather, squared after", [&](const auto& p) { return fx::square(fx::gather(p, ids)); }, flat);
  check_second("gather, a product of two", [&](const auto& p) { return fx::gather(p * p, ids) * fx::gather(p, ids); }, flat);
  const auto m = random_tensor<double>({3, 4}, 7, 0.5, 2);
  check_second("gather along axis 1", [&](const auto& p) { return fx::exp(fx::gather(p, fx::tensor<std::int32_t>{3, 0, 3}, 1)); }, m);
  const auto a = random_tensor<double>({3, 2}, 4, 0.5, 2);
  const fx::tensor<std::int32_t> at = {{2, 1}, {0, 0}, {2, 1}};
  check_second("gather_nd", [&](const auto& p) { return fx::gather_nd(p * p, at) * fx::gather_nd(p, at); }, a);
  const auto u = random_tensor<double>({3}, 5, 0.5, 2);
  check_second("scatter_nd", [&](const auto& p) { return fx::square(fx::scatter_nd(at, p * p, fx::shape{3, 2})); }, u);
  check_second("tensor_scatter_nd_update",
               [&](const auto& p) { return fx::square(fx::tensor_scatter_nd_update(a * fx::reduce_sum(p), at, p * p)); }, u);
}

TEST_CASE("second order: cumprod and linear_recurrence") {
  const auto x_r2 = random_tensor<double>({2, 3, 4}, 31, -1.5, 1.5);
  const auto a_r2 = random_tensor<double>({2, 3, 4}, 32, -1.2, 1.2);
  check_second("cumprod", [](const auto& v) { return fx::cumprod(v, 1); }, x_r2);
  check_second("cumprod, exclusive and reversed, squared after",
               [](const auto& v) { return fx::square(fx::cumprod(v, 2, {.exclusive = true, .reverse = true})); }, x_r2);
  check_second("linear_recurrence in a and b", [](const auto& a, const auto& b) {
    return fx::linear_recurrence(a, b, 2) * fx::linear_recurrence(a, b, 1, {.reverse = true});
  }, a_r2, x_r2);
  check_second("linear_recurrence from an initial state", [](const auto& a, const auto& h) {
    return fx::square(fx::linear_recurrence(a, a, h * h, 1, {.exclusive = true}));
  }, a_r2, random_tensor<double>({2, 4}, 33));
}

TEST_CASE("second order: einsum over three operands and a diagonal") {
  // Through the pairs' matmuls, transposes and the diagonal's gather.
  const auto m = random_tensor<double>({3, 3}, 20), v = random_tensor<double>({3}, 21);
  check_second("bilinear form", [](const auto& p, const auto& q) { return fx::einsum("i,ij,j->", q, p * p, q); }, m, v);
  check_second("diagonal", [](const auto& p) { return fx::exp(fx::einsum("ii->i", p * p)); }, m);
}
