// expect-error: fluxion::nn::layer_norm: the input's element type differs from the layer's
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::layer_norm<double> ln; auto y = ln(fluxion::zeros<float>({2, 3})); (void)y; }
