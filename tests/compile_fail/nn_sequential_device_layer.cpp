// expect-error: fluxion::nn::sequential: a layer of this model runs on the cpu only so far
// A recomputed segment in a model declared on the GPU: nn::recompute has no device path yet.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<8>::on<fluxion::cuda>{}, nn::recompute<nn::dense<4>>{}, nn::dense<2>{});
  (void)net;
}
