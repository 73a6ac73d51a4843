// expect-error: fluxion::tensor\(t, \{dims...\}\) is not a reshape the tape can see; write fluxion::reshape\(t, \{dims...\}\)
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<float> x = {1.f, 2.f}; fluxion::tensor<float> y(x, {2, 1}); (void)y; }
