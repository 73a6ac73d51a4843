// expect-error: fluxion::nn::multi_head_attention: the input must be \(time, features\) per example
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<10>{}, fluxion::nn::multi_head_attention<2, 4>{}); (void)net; }
