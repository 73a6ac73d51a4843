// expect-error: fluxion::depthwise_conv2d: the input and the filters are on different devices
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x(fluxion::shape{1, 3, 3, 1}); fluxion::tensor<float, fluxion::cuda> w; auto y = fluxion::depthwise_conv2d(x, w); (void)y; }
