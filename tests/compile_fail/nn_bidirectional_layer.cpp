// expect-error: fluxion::nn::bidirectional<Layer>: Layer must be a recurrent layer
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::bidirectional<fluxion::nn::dense<4>> layer; (void)layer; }
