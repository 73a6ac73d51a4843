// expect-error: fluxion::where: the condition and the values live on different device
// not-expected: mixes devices|error:.*error:|errors generated
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<bool> c = {true}; fluxion::tensor<float, fluxion::cuda> g; auto r = fluxion::where(c, g, g); (void)r; }
