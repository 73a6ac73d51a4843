// expect-error: fluxion::nn::conv1d<Filters, Kernel, Padding>: the padding is fluxion::nn::valid, fluxion::nn::same or fluxion::nn::causal
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::conv1d<4, 3, 1> layer; (void)layer; }
