// expect-error: fluxion::take_along_axis: indices must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = fluxion::take_along_axis(x, fluxion::tensor<float>{0.f}, 0); (void)r; }
