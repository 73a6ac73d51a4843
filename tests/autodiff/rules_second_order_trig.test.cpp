#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "gradient_checks.hpp"

// Second derivatives of the trigonometric and activation functions: Hessian-vector products,
// reverse over reverse and forward over reverse, against central differences of the tape's
// gradients. Split from rules_second_order_unary to keep each file's compile time short.

using test::check_second_unary;

TEST_CASE("second order: trigonometric and activation functions") {
  check_second_unary("sin", [](const auto& x) { return fx::sin(x); });
  check_second_unary("cos", [](const auto& x) { return fx::cos(x); });
  check_second_unary("tan", [](const auto& x) { return fx::tan(x); }, -1, 1);
  check_second_unary("tanh", [](const auto& x) { return fx::tanh(x); });
  check_second_unary("sigmoid", [](const auto& x) { return fx::sigmoid(x); });
  check_second_unary("softplus", [](const auto& x) { return fx::softplus(x); });
  check_second_unary("erf", [](const auto& x) { return fx::erf(x); });
}
