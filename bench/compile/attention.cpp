// The compile cost of nn::multi_head_attention, measured by scripts/measure-compile-time.sh: a
// small Transformer-style text classifier (embedding, causal self-attention, layer norm, global
// average pooling, dense) with the attention (FLUXION_ATTENTION=1, the default) or without it (0),
// one tape-based training step on random token ids. The difference is what the layer costs.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_ATTENTION
#define FLUXION_ATTENTION 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 20>{}, nn::embedding<1000, 32>{},
#if FLUXION_ATTENTION
                            nn::multi_head_attention<4, 8>{nn::causal_mask},
#endif
                            nn::layer_norm{}, nn::global_avg_pool1d{}, nn::dense<2>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<std::int32_t> x = fx::random::uniform<std::int32_t>({8, 20}, gen, 0, 1000);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 2);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
