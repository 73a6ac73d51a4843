// The compile cost of the ordering ops (stop 59), measured by scripts/measure-compile-time.sh: an
// MLP's training step whose loss adds an L2 penalty through fx::norm and a listwise term through
// fx::sort and fx::cumsum, and whose report reads fx::top_k (FLUXION_ORDERING=1, the default), or
// the same step with the penalty as reduce_sum(square), no listwise term and argmax (0). The
// difference between the two rows is what the ops cost a program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_ORDERING
#define FLUXION_ORDERING 1
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
#if FLUXION_ORDERING
  const fx::tensor<float> penalty = fx::norm(vars[0]->value(), 2);
  const fx::tensor<float> ranked = fx::cumsum(fx::sort(fx::softmax(logits), -1, fx::descending), 1);
  loss = loss + 1e-4f * penalty - 1e-3f * fx::reduce_mean(ranked);
#else
  const fx::tensor<float> penalty = fx::reduce_sum(fx::square(vars[0]->value()));
  loss = loss + 1e-4f * penalty;
#endif
  opt.apply_gradients(tape.gradient(loss, vars), vars);
#if FLUXION_ORDERING
  const auto top = fx::top_k(logits, 3);
  std::printf("loss %g, top class of the first example %d\n", static_cast<double>(loss.item()),
              static_cast<int>(top.indices.to_vector()[0]));
#else
  std::printf("loss %g, top class of the first example %d\n", static_cast<double>(loss.item()),
              static_cast<int>(fx::tensor<std::int64_t>(fx::argmax(logits, 1)).to_vector()[0]));
#endif
}
