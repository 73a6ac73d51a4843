// expect-error: fluxion::one_hot: indices must be integers
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f}; auto r = fluxion::one_hot(x, 3); (void)r; }
