// expect-error: fluxion::nn: a layer's second template argument is its element type \(float or double\), not an activation
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::dense<16, fluxion::nn::relu> layer; (void)layer; }
