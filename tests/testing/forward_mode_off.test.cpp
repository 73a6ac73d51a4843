// check_gradients in a program built without forward mode (FLUXION_FORWARD_MODE 0, the default):
// reverse mode is still checked, and a check that asks for forward mode fails and says why instead
// of silently checking less.
#undef FLUXION_MAX_DERIVATIVE_ORDER
#define FLUXION_MAX_DERIVATIVE_ORDER 1  // cmake/tests.cmake leaves autodiff out of non-autodiff tests
#include <fluxion/fluxion.hpp>  // first, with forward mode off
#include <fluxion/testing/check_gradients.hpp>

#include <doctest/doctest.h>

namespace fx = fluxion;

static_assert(!fx::forward_mode_enabled);

TEST_CASE("check_gradients without forward mode: reverse mode passes, forward mode is reported missing") {
  const fx::tensor<double> x = {0.5, -1.0, 2.0};
  auto f = [](const auto& a) { return fx::sin(a) * a; };

  fx::testing::check_options reverse_only;
  reverse_only.forward = false;
  const auto ok = fx::testing::check_gradients(f, reverse_only, x);
  CHECK_MESSAGE(ok.ok, ok.report);

  const auto missing = fx::testing::check_gradients(f, x);
  CHECK_FALSE(missing.ok);
  CHECK(missing.report.find("FLUXION_FORWARD_MODE is 0") != std::string::npos);
}
