// expect-error: this device has no lane kernels \(cumsum, cumprod, sort\); include its header \(for fluxion::cuda, <fluxion/cuda.hpp>\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> x; fluxion::tensor<float, fluxion::cuda> y = fluxion::cumsum(x); (void)y; }
