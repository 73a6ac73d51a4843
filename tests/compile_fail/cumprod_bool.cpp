// expect-error: fluxion::cumprod: the operand must be a number type \(cast a bool tensor first\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<bool> x = {true, false}; auto p = fluxion::cumprod(x); (void)p; }
