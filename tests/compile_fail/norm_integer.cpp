// expect-error: fluxion::norm: the operand must be float or double
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<int> a = {3, 4}; auto n = fluxion::norm(a); (void)n; }
