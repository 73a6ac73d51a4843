// expect-error: fluxion::variable::assign: the expression lives on another device
// not-expected: tensor<T, Device>:|error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; fluxion::tensor<float, fluxion::cuda> g; v.assign(g); }
