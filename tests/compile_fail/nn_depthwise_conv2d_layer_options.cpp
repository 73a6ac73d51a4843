// expect-error: fluxion::nn::depthwise_conv2d takes fluxion::nn::depthwise_conv2d_options, with Keras's names
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { const fluxion::nn::layer_options o{.use_bias = false}; fluxion::nn::depthwise_conv2d<3> layer{o}; (void)layer; }
