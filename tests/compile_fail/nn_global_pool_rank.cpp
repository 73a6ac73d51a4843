// expect-error: ("global_avg_pool2d"}.*"input rank"}, 1,.*"rank"}, 3>|check_extents<false, .*, 1, .*, 3>::value).*global_avg_pool2d, global_max_pool2d take \(height, width, channels\)
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// A global 2-D pooling fed a flat vector per example.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<784>{}, nn::global_avg_pool2d{}, nn::dense<10>{});
  (void)net;
}
