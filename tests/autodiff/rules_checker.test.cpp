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

TEST_CASE("rules: the checker reports a wrong gradient") {
  // A function whose tape gradient is deliberately wrong: custom backward returns 2 * true value.
  auto wrong = fx::custom_gradient([](const auto& x) {
    return std::pair{x * x, [x](const auto& dy) { return dy * x * 4.0; }};
  });
  auto r = check_gradients([&](const auto& x) { return wrong(x); }, test::random_tensor<double>({3}, 1, 0.5, 1));
  CHECK(!r.ok);
  CHECK(r.report.find("worst element") != std::string::npos);
}
