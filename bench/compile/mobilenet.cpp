// The compile cost of nn::depthwise_conv2d and nn::separable_conv2d (stop 67), measured by
// scripts/measure-compile-time.sh: a small MobileNet-style CNN, conv2d then depthwise and
// separable blocks (FLUXION_DEPTHWISE=1, the default), or the same model with conv2d (same padding
// and stride) in the place of each of them (0), one tape-based training step on random images,
// header-only and with prebuilt kernels. The difference is what the layers cost a program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_DEPTHWISE
#define FLUXION_DEPTHWISE 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<32, 32, 3>{}, nn::conv2d<16, 3, nn::same, 2>{}, nn::relu6{},
#if FLUXION_DEPTHWISE
                            nn::depthwise_conv2d<3, nn::same>{}, nn::relu6{}, nn::conv2d<32, 1>{}, nn::relu6{},
                            nn::depthwise_conv2d<3, nn::same, 2>{}, nn::relu6{},
                            nn::separable_conv2d<64, 3, nn::same>{}, nn::relu6{},
#else
                            nn::conv2d<16, 3, nn::same>{}, nn::relu6{}, nn::conv2d<32, 1>{}, nn::relu6{},
                            nn::conv2d<32, 3, nn::same, 2>{}, nn::relu6{}, nn::conv2d<64, 3, nn::same>{}, nn::relu6{},
#endif
                            nn::global_avg_pool2d{}, nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({8, 32, 32, 3}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
