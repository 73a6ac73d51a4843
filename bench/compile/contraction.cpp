// The compile cost of stop 63's ops, measured by scripts/measure-compile-time.sh: an MLP's training
// step whose loss adds a bilinear form and a trace written with fx::einsum (three operands, a
// repeated label), a moving average of the logits from an initial state (fx::linear_recurrence with
// h0) and each example's logits picked at its own positions (fx::gather_nd with batch_dims 1)
// (FLUXION_CONTRACTION=1, the default), or the same step with sparse_softmax_cross_entropy alone
// (0). The difference between the two rows is what the ops cost. FLUXION_CONTRACTION=2 (stop 81)
// is the step with stop 81's fx::linalg ops in their place: the trace of the Gram matrix, its lower
// band and its diagonal replaced, what they cost against 0.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_CONTRACTION
#define FLUXION_CONTRACTION 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<32>{}, nn::dense<64>{}, nn::relu{}, nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({16, 32}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({16}, gen, 0, 10);
  auto vars = net.trainable_variables();
  fx::gradient_tape tape;
  const fx::tensor<float> logits = net(x, true);
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(logits, y);
#if FLUXION_CONTRACTION == 2
  const fx::tensor<float> gram = fx::matmul(logits, logits, fx::transpose_a);
  const fx::tensor<float> trace = fx::linalg::trace(gram);
  const fx::tensor<float> banded = fx::linalg::band_part(gram, 1, 0);
  const fx::tensor<float> replaced = fx::linalg::set_diag(gram, fx::zeros<float>({10}));
  loss = loss + 1e-4f * trace + 1e-4f * fx::reduce_mean(banded * replaced);
#elif FLUXION_CONTRACTION
  const fx::tensor<float> metric = fx::random::uniform<float>({10, 10}, gen);
  const fx::tensor<float> bilinear = fx::einsum("bi,ij,bj->", logits, metric, logits);
  const fx::tensor<float> trace = fx::einsum("ii", fx::tensor<float>(fx::matmul(logits, logits, fx::transpose_a)));
  const fx::tensor<float> h0 = fx::random::uniform<float>({10}, gen);
  const fx::tensor<float> average = fx::linear_recurrence(0.9f, logits * 0.1f, h0, 0);
  const fx::tensor<std::int32_t> positions = fx::random::uniform<std::int32_t>({16, 3, 1}, gen, 0, 10);
  const fx::tensor<float> picked = fx::gather_nd(logits, positions, 1);
  loss = loss + 1e-4f * (bilinear + trace) + 1e-3f * fx::reduce_mean(fx::square(average)) + 1e-3f * fx::reduce_mean(picked);
#endif
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
