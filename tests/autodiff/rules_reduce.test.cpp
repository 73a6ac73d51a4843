#include "gradient_checks.hpp"

// Reductions against central finite differences, reverse and forward mode, over every set of axes
// of a matrix, with and without keepdims.

using fx::testing::check_gradients;

TEST_CASE("rules: reductions") {
  auto x = test::random_tensor<double>({3, 4}, 7, 0.5, 2);
  for (const fx::axes& ax : {fx::axes{}, fx::axes{0}, fx::axes{1}, fx::axes{0, 1}}) {
    for (bool keep : {false, true}) {
      CAPTURE(keep);
      auto r1 = check_gradients([&](const auto& v) { return fx::reduce_sum(v * v, ax, keep); }, x);
      CHECK_MESSAGE(r1.ok, r1.report);
      auto r2 = check_gradients([&](const auto& v) { return fx::reduce_mean(fx::sin(v), ax, keep); }, x);
      CHECK_MESSAGE(r2.ok, r2.report);
      auto r3 = check_gradients([&](const auto& v) { return fx::reduce_max(v, ax, keep); }, x);
      CHECK_MESSAGE(r3.ok, r3.report);
      auto r4 = check_gradients([&](const auto& v) { return fx::reduce_min(v, ax, keep); }, x);
      CHECK_MESSAGE(r4.ok, r4.report);
      auto r5 = check_gradients([&](const auto& v) { return fx::reduce_prod(v, ax, keep); }, x);
      CHECK_MESSAGE(r5.ok, r5.report);
      auto r6 = check_gradients([&](const auto& v) { return fx::reduce_logsumexp(v, ax, keep); }, x);
      CHECK_MESSAGE(r6.ok, r6.report);
    }
  }
}
