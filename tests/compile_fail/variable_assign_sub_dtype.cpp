// expect-error: fluxion::variable::assign_sub: the update.s element type differs from the variable.s
// not-expected: variable::assign:|tensor<T>:|error:.*error:|errors generated
// One error, naming assign_sub (before stop 73: assign's message, after it tensor's under clang).
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; v.assign_sub(fluxion::tensor<double>{1.0}); }
