// expect-error: fluxion::to_xtensor: the expression lives on the GPU; copy it to the host
#include <fluxion/tensor/xtensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> g; auto x = fluxion::to_xtensor(g * 2.f); (void)x; }
