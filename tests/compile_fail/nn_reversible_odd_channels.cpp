// expect-error: ("reversible"}.*"input channels"}, 7,|check_extents<false, .*, 7, .*>::value).*fluxion::nn::reversible_sequence: the input's channel \(last\) extent must be even
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// A reversible block on 7 channels: they cannot be split into two halves.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
using half = nn::sequential_t<nn::input<4, 4, 3>, nn::conv2d<3, 3, nn::same>>;
int main() {
  auto net = nn::sequential(nn::input<4, 4, 7>{}, nn::reversible<half, half>{}, nn::flatten{}, nn::dense<2>{});
  (void)net;
}
