// expect-error: fluxion::gather_nd: params and indices live on different devices
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<std::int32_t, fluxion::cuda> i; auto r = fluxion::gather_nd(x, i); (void)r; }
