// The compile cost of stop 60's indexing ops, measured by scripts/measure-compile-time.sh: an MLP's
// training step whose loss picks each example's logit of its label with fx::gather_nd and adds a
// margin over the max logit of each group of examples (fx::unsorted_segment_max)
// (FLUXION_INDEXING_ND=1, the default), or the same step with sparse_softmax_cross_entropy alone
// (0). The difference between the two rows is what the ops cost a program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_INDEXING_ND
#define FLUXION_INDEXING_ND 1
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
#if FLUXION_INDEXING_ND
  const fx::tensor<std::int32_t> rows = fx::arange<std::int32_t>(16);
  const fx::tensor<std::int32_t> pairs = fx::stack({rows, y}, 1);                                 // (16, 2)
  const fx::tensor<float> picked = fx::gather_nd(logits, pairs);                                  // (16,)
  const fx::tensor<std::int32_t> groups = rows / 4;
  const fx::tensor<float> best = fx::unsorted_segment_max(fx::reduce_max(logits, 1), groups, 4);  // (4,)
  loss = loss + 1e-3f * fx::reduce_mean(fx::relu(fx::gather(best, groups, 0) - picked));
#endif
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
