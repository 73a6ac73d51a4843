// expect-error: this device has no sort kernels; include its header \(for fluxion::cuda, <fluxion/cuda.hpp>\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> x; auto order = fluxion::argsort(x); (void)order; }
