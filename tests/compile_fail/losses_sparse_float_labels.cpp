// expect-error: sparse_softmax_cross_entropy: labels must be int32 or int64 class indices
// not-expected: error:.*error:|errors generated
#include <fluxion/losses.hpp>
int main() {
  const fluxion::tensor<float> logits = {{1.f, 2.f}, {3.f, 4.f}};
  const fluxion::tensor<float> labels = {0.f, 1.f};
  auto loss = fluxion::losses::sparse_softmax_cross_entropy(logits, labels);
  (void)loss;
}
