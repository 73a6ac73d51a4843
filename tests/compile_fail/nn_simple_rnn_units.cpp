// expect-error: fluxion::nn::simple_rnn<Units>: Units must be positive
// The recurrent layers' shared checks (FLUXION_RECURRENT_LAYER, nn/recurrent.hpp), here for a SimpleRNN.
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::simple_rnn<0> rnn; (void)rnn; }
