// expect-error: the remainder is defined for integer tensors only
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = x % 2.f; (void)r; }
