// expect-error: fluxion::scatter_nd: indices must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> u = {1.f}; fluxion::tensor<bool> i = {{true}}; auto r = fluxion::scatter_nd(i, u, fluxion::shape{2}); (void)r; }
