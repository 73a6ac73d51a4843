// expect-error: fluxion::nn::dense: the input is on another device than the layer's variables
// A cpu batch fed to a dense layer whose variables live on the GPU.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::dense<4, float, fluxion::cuda> fc;
  fluxion::tensor<float> x(fluxion::shape{2, 3});
  auto y = fc(x);
  (void)y;
}
