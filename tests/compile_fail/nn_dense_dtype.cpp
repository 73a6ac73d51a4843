// expect-error: fluxion::nn::dense: the input.s element type differs from the layer.s
// not-expected: error:.*error:|errors generated
// A double batch into a float layer: the layer's message, and no other.
#include <fluxion/nn.hpp>
int main() {
  fluxion::nn::dense<4> layer;
  auto y = layer(fluxion::zeros<double>({2, 3}));
  (void)y;
}
