// expect-error: fluxion::nn::sequential: a layer of this model runs on the cpu only so far
// Reversible blocks in a model declared on the GPU: reversible_sequence has no device path yet.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
using branch = nn::sequential_t<nn::input<4, 4, 2>, nn::conv2d<2, 3, nn::same>>;
int main() {
  auto net = nn::sequential(nn::input<4, 4, 4>::on<fluxion::cuda>{}, nn::reversible_sequence<branch, branch>{},
                            nn::flatten{}, nn::dense<2>{});
  (void)net;
}
