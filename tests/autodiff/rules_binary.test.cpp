#include "gradient_checks.hpp"

// Binary ops against central finite differences, reverse and forward mode, in double, at equal
// shapes and with broadcasting of either operand and of scalars.

using test::check_binary;

TEST_CASE("rules: arithmetic with broadcasting") {
  check_binary("add", [](const auto& a, const auto& b) { return a + b; });
  check_binary("subtract", [](const auto& a, const auto& b) { return a - b; });
  check_binary("multiply", [](const auto& a, const auto& b) { return a * b; });
  check_binary("divide", [](const auto& a, const auto& b) { return a / b; }, 0.5, 2);
  check_binary("pow", [](const auto& a, const auto& b) { return fx::pow(a, b); }, 0.5, 2);
}

TEST_CASE("rules: maximum, minimum and where with broadcasting") {
  check_binary("maximum", [](const auto& a, const auto& b) { return fx::maximum(a, b); });
  check_binary("minimum", [](const auto& a, const auto& b) { return fx::minimum(a, b); });
  check_binary("where", [](const auto& a, const auto& b) { return fx::where(a > 0.0, a * b, b); });
}

TEST_CASE("rules: scalars inside statements") {
  check_binary("scalars", [](const auto& a, const auto& b) { return 2.0 * a - b / 3.0 + 1.0; });
}
