// expect-error: the expression lives on another device; move it with fluxion::to
// not-expected: delegates to itself|error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> g; fluxion::tensor<float> c = g; (void)c; }
