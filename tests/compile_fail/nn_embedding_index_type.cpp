// expect-error: fluxion::nn::embedding: the indices must be int32 or int64
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<4>{}, fluxion::nn::embedding<10, 3>{}); auto y = net(fluxion::zeros<float>({2, 4})); (void)y; }
