// The compile cost of the global pooling layers, measured by scripts/measure-compile-time.sh: an
// all-convolutional CNN whose head is nn::global_avg_pool2d (FLUXION_GLOBAL_POOL=1, the default)
// or the same reduction written as avg_pool2d<7> + flatten (0), one tape-based training step on
// random data. The difference between the two rows is what the layer costs a program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_GLOBAL_POOL
#define FLUXION_GLOBAL_POOL 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<16, 3, nn::same>{}, nn::relu{},
                            nn::max_pool2d<2>{}, nn::conv2d<32, 3, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
#if FLUXION_GLOBAL_POOL
                            nn::global_avg_pool2d{},
#else
                            nn::avg_pool2d<7>{}, nn::flatten{},
#endif
                            nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({8, 28, 28, 1}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
