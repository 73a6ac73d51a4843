#include "gradient_checks.hpp"

// Unary ops against central finite differences, reverse and forward mode, in double, at shapes
// (), (5) and (2, 3). Ops with a kink at 0 (abs, relu) are checked on both signs, at least 0.1
// from it.

using test::check_unary;

TEST_CASE("rules: unary ops") {
  check_unary("negate", [](const auto& x) { return -x; });
  check_unary("exp", [](const auto& x) { return fx::exp(x); });
  check_unary("log", [](const auto& x) { return fx::log(x); }, 0.5, 3);
  check_unary("log1p", [](const auto& x) { return fx::log1p(x); }, 0.5, 3);
  check_unary("expm1", [](const auto& x) { return fx::expm1(x); });
  check_unary("sqrt", [](const auto& x) { return fx::sqrt(x); }, 0.5, 3);
  check_unary("rsqrt", [](const auto& x) { return fx::rsqrt(x); }, 0.5, 3);
  check_unary("square", [](const auto& x) { return fx::square(x); });
  check_unary("sin", [](const auto& x) { return fx::sin(x); });
  check_unary("cos", [](const auto& x) { return fx::cos(x); });
  check_unary("tan", [](const auto& x) { return fx::tan(x); }, -1, 1);
  check_unary("tanh", [](const auto& x) { return fx::tanh(x); });
  check_unary("sigmoid", [](const auto& x) { return fx::sigmoid(x); });
  check_unary("softplus", [](const auto& x) { return fx::softplus(x); });
  check_unary("erf", [](const auto& x) { return fx::erf(x); });
}

TEST_CASE("rules: abs and relu on both signs") {
  check_unary("abs", [](const auto& x) { return fx::abs(x); }, 0.1, 2, {}, true);
  check_unary("relu", [](const auto& x) { return fx::relu(x); }, 0.1, 2, {}, true);
}

TEST_CASE("rules: ops without a derivative have zero gradients and tangents") {
  check_unary("floor", [](const auto& x) { return fx::floor(x) * x; }, 1.1, 1.9);
  check_unary("sign", [](const auto& x) { return fx::sign(x) * fx::exp(x); }, 0.1, 2, {}, true);
  // No operand of the product has a derivative: its tangent, zeros times a scalar, has none of
  // the order a tangent's type carries, which once made the compiler recurse without end.
  check_unary("round times a scalar", [](const auto& x) { return fx::round(x) * 2.0; }, 0.6, 1.4);
}

TEST_CASE("rules: cast") {
  // Through float: finite differences need a step float resolves.
  check_unary("cast", [](const auto& x) { return fx::cast<double>(fx::cast<float>(x) * 2.f); }, -2, 2,
              {.step = 1e-2, .rtol = 1e-4, .atol = 1e-5});
}
