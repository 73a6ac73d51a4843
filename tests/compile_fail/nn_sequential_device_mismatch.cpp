// expect-error: fluxion::nn::sequential: the input is on another device than the model
// A cpu batch fed to a model declared on the GPU.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<3>::on<fluxion::cuda>{}, nn::dense<2>{});
  fluxion::tensor<float> x(fluxion::shape{1, 3});
  auto y = net(x);
  (void)y;
}
