// The compile cost of stop 61's ops, measured by scripts/measure-compile-time.sh: an MLP's training
// step whose loss adds a policy-gradient term with discounted returns (fx::linear_recurrence), a
// survival product over the classes (fx::cumprod) and logits with each label's entry replaced by a
// margin (fx::tensor_scatter_nd_update) (FLUXION_RECURRENCE=1, the default), or the same step with
// sparse_softmax_cross_entropy alone (0). The difference between the two rows is what the ops cost.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_RECURRENCE
#define FLUXION_RECURRENCE 1
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
#if FLUXION_RECURRENCE
  const fx::tensor<float> rewards = fx::random::uniform<float>({16}, gen);
  const fx::tensor<float> returns = fx::linear_recurrence(0.99f, rewards, 0, {.reverse = true});
  const fx::tensor<float> survival = fx::cumprod(fx::sigmoid(logits), 1);
  const fx::tensor<std::int32_t> pairs = fx::stack({fx::arange<std::int32_t>(16), y}, 1);
  const fx::tensor<float> margined = fx::tensor_scatter_nd_update(logits, pairs, fx::gather_nd(logits, pairs) - 1.f);
  loss = loss + 1e-3f * fx::reduce_mean(returns * fx::reduce_sum(survival, 1)) +
         1e-3f * fx::losses::sparse_softmax_cross_entropy(margined, y);
#endif
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
