// expect-error: fluxion::nn::bidirectional<Layer>: Layer must be a recurrent layer
// not-expected: error:.*error:|errors generated
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::bidirectional<fluxion::nn::dense<4>> layer; (void)layer; }
