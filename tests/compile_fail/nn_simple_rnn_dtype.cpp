// expect-error: fluxion::nn::simple_rnn: the input's element type differs from the layer's
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::simple_rnn<4, false, double> rnn; auto y = rnn(fluxion::zeros<float>({2, 3, 5})); (void)y; }
