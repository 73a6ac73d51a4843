// expect-error: fluxion::nn::reversible_sequence<F, G>: F and G are on different devices
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
using f_branch = nn::sequential_t<nn::input<4, 4, 2>::on<fluxion::cuda>, nn::conv2d<2, 3, nn::same>>;
using g_branch = nn::sequential_t<nn::input<4, 4, 2>, nn::conv2d<2, 3, nn::same>>;
int main() {
  nn::reversible_sequence<f_branch, g_branch> blocks;
  (void)blocks;
}
