// expect-error: fluxion::einsum: the operands live on different devices; move one with fluxion::to<Device>
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> a = {1.f}; fluxion::tensor<float, fluxion::cuda> b; auto c = fluxion::einsum("i,i", a, b); (void)c; }
