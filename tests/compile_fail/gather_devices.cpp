// expect-error: fluxion::gather: params and indices live on different devices
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<int, fluxion::cuda> i; auto r = fluxion::gather(x, i); (void)r; }
