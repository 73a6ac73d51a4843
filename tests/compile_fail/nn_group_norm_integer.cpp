// expect-error: fluxion::nn::group_norm<Groups, T>: T must be a floating-point type
#include <fluxion/fluxion.hpp>
int main() { fluxion::nn::group_norm<2, int> gn; (void)gn; }
