// expect-error: fluxion::nn::batch_norm<Axis>: the channel axis is outside the input's axes
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<4>{}, fluxion::nn::batch_norm<2>{}); (void)net; }
