// expect-error: fluxion::linear_recurrence: the operands must be a number type \(cast a bool tensor first\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<bool> a = {true}; auto h = fluxion::linear_recurrence(a, a); (void)h; }
