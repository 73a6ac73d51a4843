// expect-error: ("reshape"}.*"elements per example"}, 784,.*"elements of the target shape"}, 729>|check_extents<false, .*, 784, .*, 729>::value).*fluxion::nn::reshape: the target shape must hold as many elements as each input example
// (g++ names the layer in check_extents' arguments; clang 14 prints them as character codes.)
// 784 elements per example into a 27x27x1 shape.
#include <fluxion/nn.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<784>{}, nn::reshape<27, 27, 1>{});
  (void)net;
}
