// expect-error: fluxion::linear_recurrence: a and b live on different devices
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> a; fluxion::tensor<float> b = {1.f}; auto h = fluxion::linear_recurrence(a, b); (void)h; }
