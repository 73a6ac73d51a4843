// expect-error: fluxion::cast<To>: To must be float, double, int32_t, int64_t or bool
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = fluxion::cast<char>(x); (void)r; }
