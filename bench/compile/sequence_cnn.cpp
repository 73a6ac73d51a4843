// The compile cost of nn::conv1d and the 1-D pools, measured by scripts/measure-compile-time.sh: a
// causal, dilated 1-D CNN over (64 steps, 4 channels) (FLUXION_CONV1D=1, the default), or the same
// depth of conv2d and 2-D pooling over those values viewed as an 8 x 8 image (0), one tape-based
// training step on random data. The difference between the two rows is what conv1d costs a program
// over conv2d, which it runs on.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_CONV1D
#define FLUXION_CONV1D 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<64, 4>{},
#if FLUXION_CONV1D
                            nn::conv1d<16, 3, nn::causal>{}, nn::relu{}, nn::conv1d<16, 3, nn::causal, 1, 2>{}, nn::relu{},
                            nn::max_pool1d<2>{}, nn::global_avg_pool1d{},
#else
                            nn::reshape<8, 8, 4>{}, nn::conv2d<16, 3, nn::same>{}, nn::relu{},
                            nn::conv2d<16, 3, nn::same, 1, 2>{}, nn::relu{}, nn::max_pool2d<2>{}, nn::global_avg_pool2d{},
#endif
                            nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({8, 64, 4}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
