// expect-error: fluxion::nn::max_pool1d, avg_pool1d: the input must be \(steps, channels\) per example
#include <fluxion/fluxion.hpp>
int main() {
  auto net = fluxion::nn::sequential(fluxion::nn::input<16>{}, fluxion::nn::max_pool1d<2>{});
  (void)net;
}
