// The compile cost of nn::group_norm and nn::instance_norm, measured by
// scripts/measure-compile-time.sh: a small CNN with a group normalization after its first
// convolution and an instance normalization after its second (FLUXION_GROUP_NORM=1, the default),
// or batch_norm in both places (0), one tape-based training step on random data. The difference
// between the two rows is what the layers cost a program beyond batch_norm.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_GROUP_NORM
#define FLUXION_GROUP_NORM 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<16, 3, nn::same>{},
#if FLUXION_GROUP_NORM
                            nn::group_norm<4>{},
#else
                            nn::batch_norm<>{},
#endif
                            nn::relu{}, nn::max_pool2d<2>{}, nn::conv2d<32, 3, nn::same>{},
#if FLUXION_GROUP_NORM
                            nn::instance_norm<>{},
#else
                            nn::batch_norm<>{},
#endif
                            nn::relu{}, nn::max_pool2d<2>{}, nn::flatten{}, nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({8, 28, 28, 1}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
