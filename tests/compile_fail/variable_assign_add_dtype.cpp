// expect-error: fluxion::variable::assign_add: the update.s element type differs from the variable.s
// not-expected: variable::assign:|tensor<T>:|error:.*error:|errors generated
// One error, naming assign_add (before stop 73: assign's message, after it tensor's under clang).
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; v.assign_add(fluxion::tensor<double>{1.0}); }
