// expect-error: fluxion::testing::check_gradients works in double
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>  // check_gradients.hpp alone lacks the cpu evaluator
#include <fluxion/testing/check_gradients.hpp>
int main() {
  fluxion::tensor<float> x = {1.f};
  auto r = fluxion::testing::check_gradients([](const auto& v) { return v * v; }, x);
  (void)r;
}
