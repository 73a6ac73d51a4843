// expect-error: fluxion::nn::conv1d: with valid padding the kernel must fit inside the input
#include <fluxion/fluxion.hpp>
int main() {
  // 2 steps of a kernel of 3, dilated by 2: a span of 5.
  auto net = fluxion::nn::sequential(fluxion::nn::input<4, 2>{}, fluxion::nn::conv1d<4, 3, fluxion::nn::valid, 1, 2>{});
  (void)net;
}
