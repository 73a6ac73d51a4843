// expect-error: fluxion::tensor_scatter_nd_update: tensor and updates need the same element type
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f, 2.f}; fluxion::tensor<std::int32_t> i = {{0}}; fluxion::tensor<double> u = {1.0}; auto r = fluxion::tensor_scatter_nd_update(x, i, u); (void)r; }
