// expect-error: fluxion::nn::max_pool1d, avg_pool1d: with valid padding the pool window must fit inside the input
#include <fluxion/fluxion.hpp>
int main() {
  auto net = fluxion::nn::sequential(fluxion::nn::input<3, 2>{}, fluxion::nn::max_pool1d<4>{});
  (void)net;
}
