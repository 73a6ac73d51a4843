// expect-error: the expression.s element type differs from T; convert it with fluxion::cast
// not-expected: delegates to itself|error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<double> d = {1.0}; fluxion::tensor<float> f = d * 2.0; (void)f; }
