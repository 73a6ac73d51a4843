// expect-error: fluxion::nn::group_norm<Groups>: Groups must be positive, or -1 for one group per channel
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::group_norm<0> gn; (void)gn; }
