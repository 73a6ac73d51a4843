// expect-error: fluxion::matmul: the operands have different element types
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> a = {{1.f}}; fluxion::tensor<double> b = {{1.0}}; auto r = fluxion::matmul(a, b); (void)r; }
