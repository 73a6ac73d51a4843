// expect-error: fluxion::nn::depthwise_conv2d: the input's element type differs from the layer's
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::depthwise_conv2d<3, fluxion::nn::same, 1, 1, 1, double> layer; auto y = layer(fluxion::zeros<float>({2, 5, 5, 3})); (void)y; }
