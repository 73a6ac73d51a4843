#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "gradient_checks.hpp"

// Second derivatives of reductions: Hessian-vector products, reverse over reverse and forward
// over reverse, against central differences of the tape's gradients. Split from
// rules_second_order to keep each file's compile time short.

using test::check_second;
using test::random_tensor;

TEST_CASE("second order: reductions") {
  const auto x = random_tensor<double>({3, 4}, 3);
  check_second("reduce_sum", [](const auto& v) { return fx::reduce_sum(fx::square(v), {1}); }, x);
  check_second("reduce_mean", [](const auto& v) { return fx::reduce_mean(v * v * v, {0}, true); }, x);
  check_second("reduce_logsumexp", [](const auto& v) { return fx::reduce_logsumexp(v, {1}); }, x);
}
