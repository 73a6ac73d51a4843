// expect-error: an expression mixes devices \(fluxion::cpu and fluxion::cuda\)
// Adding a cuda tensor to a cpu tensor must not compile: move one operand with fluxion::to first.
#include <fluxion/tensor.hpp>

int main() {
  fluxion::tensor<float, fluxion::cuda> g;
  fluxion::tensor<float> c;
  auto r = g + c;
  (void)r;
}
