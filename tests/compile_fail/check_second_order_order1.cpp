// expect-error: fluxion::testing::check_second_order: define FLUXION_MAX_DERIVATIVE_ORDER to 2 or more
// not-expected: error:.*error:|errors generated
// The default derivative order, 1, has no second derivatives to check.
#include <fluxion/tensor.hpp>
#include <fluxion/testing/check_gradients.hpp>
int main() {
  fluxion::tensor<double> x = {1.0};
  auto r = fluxion::testing::check_second_order([](const auto& v) { return v * v; }, x);
  (void)r;
}
