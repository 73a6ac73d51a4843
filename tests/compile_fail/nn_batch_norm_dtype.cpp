// expect-error: fluxion::nn::batch_norm: the input's element type differs from the layer's
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::batch_norm<-1, double> bn; auto y = bn(fluxion::zeros<float>({2, 3}), true); (void)y; }
