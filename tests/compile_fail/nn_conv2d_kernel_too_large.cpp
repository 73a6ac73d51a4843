// expect-error: ("conv2d"}.*"input height"}, 3,.*"kernel height \(dilated\)"}, 5>|check_extents<false, .*, 3, .*, 5>::value).*fluxion::nn::conv2d: with valid padding the kernel must fit inside the input
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// A 5x5 valid convolution of a 3x3 input: the error names the layer and both extents.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<3, 3, 1>{}, nn::conv2d<4, 5>{});
  (void)net;
}
