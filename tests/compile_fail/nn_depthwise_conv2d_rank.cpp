// expect-error: ("depthwise_conv2d"}.*"input rank"}, 1,.*"rank"}, 3>|check_extents<false, .*, 1, .*, 3>::value).*fluxion::nn::depthwise_conv2d: the input must be \(height, width, channels\) per example
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// depthwise_conv2d after flatten: the input has rank 1 per example.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<28, 28, 1>{}, nn::flatten{}, nn::depthwise_conv2d<3, fluxion::nn::same>{});
  (void)net;
}
