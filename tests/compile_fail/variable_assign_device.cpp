// expect-error: fluxion::variable::assign: the expression lives on another device
#include <fluxion/tensor.hpp>
int main() { fluxion::variable<float> v{fluxion::tensor<float>{1.f}}; fluxion::tensor<float, fluxion::cuda> g; v.assign(g); }
