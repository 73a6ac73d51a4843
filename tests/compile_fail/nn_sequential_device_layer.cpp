// expect-error: fluxion::nn::sequential: a layer of this model runs on the cpu only so far
// A convolution in a model declared on the GPU: conv2d has no device path yet.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<8, 8, 1>::on<fluxion::cuda>{}, nn::conv2d<4, 3>{}, nn::flatten{}, nn::dense<2>{});
  (void)net;
}
