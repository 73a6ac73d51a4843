// expect-error: fluxion::nn::group_norm: the input.s element type differs from the layer.s
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::group_norm<2, double> gn; auto y = gn(fluxion::zeros<float>({2, 4})); (void)y; }
