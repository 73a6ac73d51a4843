// expect-error: fluxion: an expression mixes devices
// Adding a cuda tensor to a cpu tensor must not compile: move one operand with fluxion::to first.
#include <fluxion/tensor.hpp>

int main() {
  fluxion::tensor<float, fluxion::cuda> g;
  fluxion::tensor<float> c;
  auto r = g + c;
  (void)r;
}
