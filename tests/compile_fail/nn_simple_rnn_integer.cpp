// expect-error: fluxion::nn::simple_rnn<Units, ReturnSequences, T>: T must be a floating-point type
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::simple_rnn<4, false, int> rnn; (void)rnn; }
