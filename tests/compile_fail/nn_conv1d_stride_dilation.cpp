// expect-error: fluxion::nn::conv1d: a stride and a dilation both above 1 are not supported
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::conv1d<4, 3, fluxion::nn::same, 2, 2> layer; (void)layer; }
