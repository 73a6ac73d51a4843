// expect-error: fluxion::nn::separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier>: every size must be positive
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::separable_conv2d<4, 0> layer; (void)layer; }
