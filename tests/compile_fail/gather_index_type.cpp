// expect-error: fluxion::gather: indices must be int32 or int64
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = fluxion::gather(x, fluxion::tensor<float>{0.f}); (void)r; }
