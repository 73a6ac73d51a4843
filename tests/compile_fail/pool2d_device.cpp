// expect-error: fluxion: this device has no kernels for conv2d and pooling; include its header
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> x; auto y = fluxion::avg_pool2d(x, 2, 2); (void)y.eval(); }
