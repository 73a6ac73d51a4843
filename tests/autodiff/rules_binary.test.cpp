#include "../test_util.hpp"

#include <fluxion/testing/check_gradients.hpp>

// Every differentiable op against central finite differences, in double, at several shapes
// including broadcasting.

namespace {

using fx::testing::check_gradients;

template <class F>
void check_unary(const char* name, F f, double lo = -2, double hi = 2, fx::testing::check_options opt = {}) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{5}, fx::shape{2, 3}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(s));
    auto x = test::random_tensor<double>(s, 3, lo, hi);
    auto r = check_gradients(f, opt, x);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

template <class F>
void check_binary(const char* name, F f, double lo = -2, double hi = 2) {
  struct Case {
    fx::shape a, b;
  };
  for (auto c : {Case{{4}, {4}}, Case{{2, 3}, {3}}, Case{{3, 1}, {1, 4}}, Case{{}, {2, 2}}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(c.a));
    CAPTURE(fx::to_string(c.b));
    auto a = test::random_tensor<double>(c.a, 5, lo, hi);
    auto b = test::random_tensor<double>(c.b, 6, lo, hi);
    auto r = check_gradients(f, a, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

}  // namespace

TEST_CASE("rules: binary ops with broadcasting") {
  check_binary("add", [](const auto& a, const auto& b) { return a + b; });
  check_binary("subtract", [](const auto& a, const auto& b) { return a - b; });
  check_binary("multiply", [](const auto& a, const auto& b) { return a * b; });
  check_binary("divide", [](const auto& a, const auto& b) { return a / b; }, 0.5, 2);
  check_binary("pow", [](const auto& a, const auto& b) { return fx::pow(a, b); }, 0.5, 2);
  check_binary("maximum", [](const auto& a, const auto& b) { return fx::maximum(a, b); });
  check_binary("minimum", [](const auto& a, const auto& b) { return fx::minimum(a, b); });
  check_binary("where", [](const auto& a, const auto& b) { return fx::where(a > 0.0, a * b, b); });
  check_binary("scalars", [](const auto& a, const auto& b) { return 2.0 * a - b / 3.0 + 1.0; });
}
