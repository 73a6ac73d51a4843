#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "gradient_checks.hpp"

// Second derivatives of unary ops (exponentials, logarithms, powers; the trigonometric and
// activation functions are in rules_second_order_trig): Hessian-vector products, reverse over
// reverse and forward over reverse, against central differences of the tape's gradients.
// Split from the other second-order tests to keep each file's compile time short.

using test::check_second_unary;

TEST_CASE("second order: exponentials, logarithms and powers") {
  check_second_unary("negate", [](const auto& x) { return -x; });
  check_second_unary("exp", [](const auto& x) { return fx::exp(x); });
  check_second_unary("log", [](const auto& x) { return fx::log(x); }, 0.5, 3);
  check_second_unary("log1p", [](const auto& x) { return fx::log1p(x); }, 0.5, 3);
  check_second_unary("expm1", [](const auto& x) { return fx::expm1(x); });
  check_second_unary("sqrt", [](const auto& x) { return fx::sqrt(x); }, 0.5, 3);
  check_second_unary("rsqrt", [](const auto& x) { return fx::rsqrt(x); }, 0.5, 3);
  check_second_unary("square", [](const auto& x) { return fx::square(x); });
}

TEST_CASE("second order: piecewise-linear ops have a zero second derivative away from their kinks") {
  for (const fx::shape& s : {fx::shape{}, fx::shape{2, 3}}) {
    CAPTURE(fx::to_string(s));
    test::check_second("abs", [](const auto& x) { return fx::abs(x); }, {}, test::both_signs(s, 3, 0.1, 2));
    test::check_second("relu", [](const auto& x) { return fx::relu(x) * x; }, {}, test::both_signs(s, 4, 0.1, 2));
  }
}
