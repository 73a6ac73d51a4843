// expect-error: fluxion::take_along_axis: a and its indices live on different devices
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; fluxion::tensor<std::int32_t, fluxion::cuda> i; auto r = fluxion::take_along_axis(x, i, 0); (void)r; }
