// expect-error: fluxion::nn::depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier>: every size must be positive
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::depthwise_conv2d<0> layer; (void)layer; }
