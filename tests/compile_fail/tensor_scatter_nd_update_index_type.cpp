// expect-error: fluxion::tensor_scatter_nd_update: indices must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f, 2.f}; fluxion::tensor<float> i = {{0.f}}; fluxion::tensor<float> u = {1.f}; auto r = fluxion::tensor_scatter_nd_update(x, i, u); (void)r; }
