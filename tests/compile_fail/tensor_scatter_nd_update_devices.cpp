// expect-error: fluxion::tensor_scatter_nd_update: tensor, indices and updates live on different devices
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f, 2.f}; fluxion::tensor<std::int32_t, fluxion::cuda> i; fluxion::tensor<float> u = {1.f}; auto r = fluxion::tensor_scatter_nd_update(x, i, u); (void)r; }
