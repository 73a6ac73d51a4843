// expect-error: fluxion::depthwise_conv2d: the element type must be float or double
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<int> x(fluxion::shape{1, 3, 3, 1}), w(fluxion::shape{1, 1, 1, 1}); auto y = fluxion::depthwise_conv2d(x, w); (void)y; }
