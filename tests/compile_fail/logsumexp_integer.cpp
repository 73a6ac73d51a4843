// expect-error: fluxion::reduce_logsumexp: the operand must be float or double
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<int> a = {1}; auto r = fluxion::reduce_logsumexp(a); (void)r; }
