// expect-error: fluxion::nn::conv2d_transpose: the input must be \(height, width, channels\) per example
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<49>{}, fluxion::nn::conv2d_transpose<4, 3>{}); (void)net; }
