// expect-error: fluxion::losses: sample_weight is on another device than the logits or predictions
// Weights on the GPU for a loss of cpu logits.
#include <cstdint>

#include <fluxion/losses.hpp>

int main() {
  fluxion::tensor<float> logits(fluxion::shape{2, 3});
  fluxion::tensor<std::int32_t> labels(fluxion::shape{2});
  fluxion::tensor<float, fluxion::cuda> weights(fluxion::shape{2});
  auto loss = fluxion::losses::sparse_softmax_cross_entropy(logits, labels, weights);
  (void)loss;
}
