// expect-error: fluxion::nn::sequential: a layer of this model runs on the cpu only so far
// A batch norm in a model declared on the GPU: batch_norm has no device path yet.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<8>::on<fluxion::cuda>{}, nn::dense<4>{}, nn::batch_norm<>{}, nn::dense<2>{});
  (void)net;
}
