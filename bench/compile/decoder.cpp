// The compile cost of stop 42's decoder layers, measured by scripts/measure-compile-time.sh: a
// small convolutional autoencoder, encoder conv2d down, decoder with nn::upsampling2d,
// nn::zero_padding2d, nn::cropping2d and nn::conv2d_transpose (FLUXION_DECODER_LAYERS=1, the
// default), or the same model with conv2d (same padding) in the place of each of them (0), one
// tape-based training step on random images. The difference is what the layers cost a program.
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_DECODER_LAYERS
#define FLUXION_DECODER_LAYERS 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<16, 3, nn::same, 2>{}, nn::relu{},
                            nn::conv2d<32, 3, nn::same, 2>{}, nn::relu{},
#if FLUXION_DECODER_LAYERS
                            nn::upsampling2d<2>{}, nn::zero_padding2d<1>{}, nn::cropping2d<1>{},
                            nn::conv2d_transpose<16, 3, nn::same, 2>{},
#else
                            nn::conv2d<16, 3, nn::same>{}, nn::conv2d<16, 3, nn::same>{}, nn::conv2d<16, 3, nn::same>{},
                            nn::conv2d<16, 3, nn::same>{},
#endif
                            nn::relu{}, nn::flatten{}, nn::dense<10>{});
  fx::optim::adam opt{1e-3};
  const fx::tensor<float> x = fx::random::uniform<float>({8, 28, 28, 1}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  std::printf("loss %g\n", static_cast<double>(loss.item()));
}
