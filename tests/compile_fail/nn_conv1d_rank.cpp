// expect-error: fluxion::nn::conv1d: the input must be \(steps, channels\) per example
#include <fluxion/fluxion.hpp>
int main() {
  auto net = fluxion::nn::sequential(fluxion::nn::input<28, 28, 1>{}, fluxion::nn::conv1d<4, 3>{});
  (void)net;
}
