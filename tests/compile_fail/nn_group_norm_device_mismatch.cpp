// expect-error: fluxion::nn::group_norm: the input is on another device than the layer's variables
// A cpu batch fed to a group normalization whose variables live on the GPU.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::group_norm<2, float, fluxion::cuda> norm;
  fluxion::tensor<float> x(fluxion::shape{2, 4});
  auto y = norm(x);
  (void)y;
}
