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

TEST_CASE("rules: unary ops") {
  check_unary("negate", [](const auto& x) { return -x; });
  check_unary("exp", [](const auto& x) { return fx::exp(x); });
  check_unary("log", [](const auto& x) { return fx::log(x); }, 0.5, 3);
  check_unary("log1p", [](const auto& x) { return fx::log1p(x); }, 0.5, 3);
  check_unary("expm1", [](const auto& x) { return fx::expm1(x); });
  check_unary("sqrt", [](const auto& x) { return fx::sqrt(x); }, 0.5, 3);
  check_unary("rsqrt", [](const auto& x) { return fx::rsqrt(x); }, 0.5, 3);
  check_unary("square", [](const auto& x) { return fx::square(x); });
  check_unary("abs", [](const auto& x) { return fx::abs(x); }, 0.1, 2);
  check_unary("sin", [](const auto& x) { return fx::sin(x); });
  check_unary("cos", [](const auto& x) { return fx::cos(x); });
  check_unary("tan", [](const auto& x) { return fx::tan(x); }, -1, 1);
  check_unary("tanh", [](const auto& x) { return fx::tanh(x); });
  check_unary("sigmoid", [](const auto& x) { return fx::sigmoid(x); });
  check_unary("relu", [](const auto& x) { return fx::relu(x); }, 0.1, 2);
  check_unary("softplus", [](const auto& x) { return fx::softplus(x); });
  check_unary("erf", [](const auto& x) { return fx::erf(x); });
  // Through float: finite differences need a step float resolves.
  check_unary("cast", [](const auto& x) { return fx::cast<double>(fx::cast<float>(x) * 2.f); }, -2, 2,
              {.step = 1e-2, .rtol = 1e-4, .atol = 1e-5});
}
