#include "gradient_checks.hpp"

using fx::testing::check_gradients;

TEST_CASE("rules: the checker reports a wrong gradient") {
  // A function whose tape gradient is deliberately wrong: custom backward returns 2 * true value.
  auto wrong = fx::custom_gradient([](const auto& x) {
    return std::pair{x * x, [x](const auto& dy) { return dy * x * 4.0; }};
  });
  auto r = check_gradients([&](const auto& x) { return wrong(x); }, test::random_tensor<double>({3}, 1, 0.5, 1));
  CHECK(!r.ok);
  CHECK(r.report.find("reverse mode, argument 0 of shape (3,): worst element") != std::string::npos);
  // forward mode differentiates the function itself (custom_gradient.hpp), which is right
  CHECK(r.report.find("forward mode") == std::string::npos);
}
