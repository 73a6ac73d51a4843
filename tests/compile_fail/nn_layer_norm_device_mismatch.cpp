// expect-error: fluxion::nn::layer_norm: the input is on another device than the layer's variables
// A cpu batch fed to a layer normalization whose variables live on the GPU.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::layer_norm<float, fluxion::cuda> norm;
  fluxion::tensor<float> x(fluxion::shape{2, 3});
  auto y = norm(x);
  (void)y;
}
