// expect-error: fluxion::softmax: the operand must be float or double
// not-expected: error:.*error:|errors generated
#include <fluxion/nn/activations.hpp>
int main() { fluxion::tensor<int> a = {1, 2}; auto r = fluxion::softmax(a); (void)r; }
