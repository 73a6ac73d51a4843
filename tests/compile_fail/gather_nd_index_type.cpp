// expect-error: fluxion::gather_nd: indices must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<float> i = {{0.f}}; auto r = fluxion::gather_nd(x, i); (void)r; }
