// expect-error: fluxion::nn::conv1d<Filters, Kernel, Padding, Stride, Dilation>: every size must be positive
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::conv1d<4, 0> layer; (void)layer; }
