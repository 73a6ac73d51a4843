// expect-error: fluxion::nn: upsampling2d, zero_padding2d and cropping2d take \(height, width, channels\) per example
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<49>{}, fluxion::nn::upsampling2d<2>{}); (void)net; }
