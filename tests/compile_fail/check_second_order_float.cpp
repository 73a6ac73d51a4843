// expect-error: fluxion::testing::check_second_order works in double
// not-expected: error:.*error:|errors generated
#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include <fluxion/tensor.hpp>
#include <fluxion/testing/check_gradients.hpp>
int main() {
  fluxion::tensor<float> x = {1.f};
  auto r = fluxion::testing::check_second_order([](const auto& v) { return v * v; }, x);
  (void)r;
}
