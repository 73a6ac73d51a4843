// expect-error: fluxion::variable::assign: the expression.s element type differs from the variable.s
// not-expected: tensor<T>:|error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; v.assign(fluxion::tensor<double>{1.0}); }
