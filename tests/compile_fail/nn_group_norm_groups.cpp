// expect-error: ("group_norm"}.*"channels"}, 6,.*"groups"}, 4>|check_extents<false, .*, 6, .*, 4>::value).*fluxion::nn::group_norm<Groups>: the groups must divide the channels
#include <fluxion/fluxion.hpp>
int main() {
  auto net = fluxion::nn::sequential(fluxion::nn::input<8, 8, 3>{}, fluxion::nn::conv2d<6, 3>{}, fluxion::nn::group_norm<4>{});
  (void)net;
}
