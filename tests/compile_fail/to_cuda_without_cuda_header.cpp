// expect-error: fluxion::to: moving a tensor to or from fluxion::cuda needs #include <fluxion/cuda.hpp>
// fx::to is in <fluxion/tensor.hpp> for every device (stop 53), but fx::cuda's memory is defined by
// <fluxion/cuda.hpp>: without it, moving a tensor there is this static_assert, not an incomplete type.
#include <fluxion/tensor.hpp>
int main() {
  const fluxion::tensor<float> x = {1.f, 2.f};
  auto g = fluxion::to<fluxion::cuda>(x);
  (void)g;
}
