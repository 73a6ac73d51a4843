// expect-error: fluxion::nn::separable_conv2d: a stride and a dilation both above 1 are not supported
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::separable_conv2d<4, 3, fluxion::nn::valid, 2, 2> layer; (void)layer; }
