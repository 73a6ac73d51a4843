// expect-error: fluxion::nn::simple_rnn: the input must be \(time, features\) per example
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<10>{}, fluxion::nn::simple_rnn<4>{}); (void)net; }
