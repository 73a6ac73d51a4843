// expect-error: fluxion::nn::conv2d_transpose: a stride and a dilation both above 1 are not supported
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::conv2d_transpose<4, 3, fluxion::nn::valid, 2, 2> layer; (void)layer; }
