// expect-error: fluxion::nn::max_pool1d, avg_pool1d: the padding is fluxion::nn::valid or fluxion::nn::same
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::max_pool1d<2, 2, fluxion::nn::causal> pool; (void)pool; }
