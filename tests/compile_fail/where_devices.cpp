// expect-error: mixes devices|fluxion::where: the condition and the values live on different devices
#include <fluxion/tensor.hpp>
int main() { fluxion::tensor<bool> c = {true}; fluxion::tensor<float, fluxion::cuda> g; auto r = fluxion::where(c, g, g); (void)r; }
