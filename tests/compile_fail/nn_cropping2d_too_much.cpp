// expect-error: fluxion::nn::cropping2d<CropH, CropW>: the cropping leaves nothing of the input
#include <fluxion/fluxion.hpp>
int main() { auto net = fluxion::nn::sequential(fluxion::nn::input<4, 9, 1>{}, fluxion::nn::cropping2d<2>{}); (void)net; }
