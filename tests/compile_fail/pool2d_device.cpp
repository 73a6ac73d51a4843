// expect-error: fluxion::max_pool2d, avg_pool2d: pooling runs on the cpu device only
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> x; auto y = fluxion::avg_pool2d(x, 2, 2); (void)y; }
