// expect-error: fluxion::nn::batch_norm<Axis>: axis 0 is the batch axis
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::batch_norm<0> bn; (void)bn; }
