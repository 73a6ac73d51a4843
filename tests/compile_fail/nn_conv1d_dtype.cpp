// expect-error: fluxion::nn::conv1d: the input.s element type differs from the layer.s
// not-expected: error:.*error:|errors generated
// A double batch into a float layer: the layer's message, and no other.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::conv1d<4, 3> layer;
  auto y = layer(fluxion::zeros<double>({1, 8, 2}));
  (void)y;
}
