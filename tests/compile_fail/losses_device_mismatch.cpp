// expect-error: fluxion::losses::sparse_softmax_cross_entropy: the logits and the labels are on different devices
#include <fluxion/tensor.hpp>
#include <fluxion/losses.hpp>
int main() { fluxion::tensor<float, fluxion::cuda> logits; fluxion::tensor<int> labels; auto l = fluxion::losses::sparse_softmax_cross_entropy(logits, labels); (void)l; }
