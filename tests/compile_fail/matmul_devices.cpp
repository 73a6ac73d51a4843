// expect-error: fluxion::matmul: the operands live on different devices
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> a = {{1.f}}; fluxion::tensor<float, fluxion::cuda> b; auto r = fluxion::matmul(a, b); (void)r; }
