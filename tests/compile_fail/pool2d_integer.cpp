// expect-error: fluxion::max_pool2d, avg_pool2d: the element type must be float or double
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<int> x(fluxion::shape{1, 4, 4, 1}); auto y = fluxion::max_pool2d(x, 2, 2); (void)y; }
