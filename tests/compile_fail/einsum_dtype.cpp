// expect-error: fluxion::einsum: the operands have different element types; convert one with fluxion::cast<T>
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> a = {1.f}; fluxion::tensor<double> b = {1.0}; auto c = fluxion::einsum("i,i,i", a, a, b); (void)c; }
