// expect-error: fluxion::conv2d: the input and the filters have different element types
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x(fluxion::shape{1, 3, 3, 1}); fluxion::tensor<double> w(fluxion::shape{1, 1, 1, 1}); auto y = fluxion::conv2d(x, w); (void)y; }
