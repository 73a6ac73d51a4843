// expect-error: fluxion::nn::separable_conv2d: the input is on another device than the layer's variables
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::separable_conv2d<4, 3, fluxion::nn::same> layer; fluxion::tensor<float, fluxion::cuda> x; auto y = layer(x); (void)y; }
