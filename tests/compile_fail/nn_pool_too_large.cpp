// expect-error: ("max_pool2d"}.*"input height"}, 1,.*"pool height"}, 2>|check_extents<false, .*, 1, .*, 2>::value).*fluxion::nn::max_pool2d, avg_pool2d: with valid padding the pool window must fit inside the input
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// Pooling 2x2 windows after the image has shrunk to 1x1.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<2, 2, 1>{}, nn::max_pool2d<2>{}, nn::max_pool2d<2>{});
  (void)net;
}
