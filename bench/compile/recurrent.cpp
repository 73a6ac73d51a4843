// The compile cost of the recurrent layers, measured by scripts/measure-compile-time.sh: Keras's
// text classifier (embedding, a recurrent layer of 32 units, dense) with nn::gru
// (FLUXION_RECURRENT_GRU=1, the default) or nn::lstm (0), one tape-based training step on random
// token ids. The rows with and without fluxion's prebuilt kernels show what each layer costs a
// program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_RECURRENT_GRU
#define FLUXION_RECURRENT_GRU 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
#if FLUXION_RECURRENT_GRU
  using recurrent = nn::gru<32>;
#else
  using recurrent = nn::lstm<32>;
#endif
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 20>{}, nn::embedding<1000, 16>{}, recurrent{},
                            nn::dense<2>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<std::int32_t> x = fx::random::uniform<std::int32_t>({8, 20}, gen, 0, 1000);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 2);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
