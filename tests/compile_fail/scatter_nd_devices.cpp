// expect-error: fluxion::scatter_nd: indices and updates live on different devices
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> u = {1.f}; fluxion::tensor<std::int32_t, fluxion::cuda> i; auto r = fluxion::scatter_nd(i, u, fluxion::shape{2}); (void)r; }
