// expect-error: fluxion::to_xtensor: the tensor lives on the GPU; copy it to the host
#include <fluxion/tensor/xtensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> g; fluxion::to_xtensor(g); }
