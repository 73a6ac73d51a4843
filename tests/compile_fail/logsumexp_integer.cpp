// expect-error: fluxion::reduce_logsumexp: the operand must be float or double
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<int> a = {1}; auto r = fluxion::reduce_logsumexp(a); (void)r; }
