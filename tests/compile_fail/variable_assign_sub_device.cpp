// expect-error: fluxion::variable::assign_sub: the update lives on another device
// not-expected: variable::assign:|tensor<T, Device>:|error:.*error:|errors generated
// One error, naming assign_sub.
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; fluxion::tensor<float, fluxion::cuda> g; v.assign_sub(g); }
