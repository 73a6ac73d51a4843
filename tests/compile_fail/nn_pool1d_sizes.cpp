// expect-error: fluxion::nn::max_pool1d, avg_pool1d: the pool size and stride must be positive
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::avg_pool1d<0> pool; (void)pool; }
