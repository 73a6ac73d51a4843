// expect-error: fluxion::linear_recurrence: a and b have different element types; cast one \(fx::cast<T>\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> a = {1.f}; fluxion::tensor<double> b = {1.0}; auto h = fluxion::linear_recurrence(a, b); (void)h; }
