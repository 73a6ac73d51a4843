// The compile cost of nn::compiled_step (issue 13), measured by scripts/measure-compile-time.sh:
// the MLP and the 2-conv CNN of bench/nn.bench.cpp, one training step each on random data, built
// with FLUXION_COMPILED_STEP=1 (nn::compile_step) or 0 (a gradient tape and apply_gradients).
#include <cstdio>

#include <fluxion/fluxion.hpp>

#ifndef FLUXION_COMPILED_STEP
#define FLUXION_COMPILED_STEP 1
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

template <class Model>
float train(Model& net, const fx::tensor<float>& x, const fx::tensor<std::int32_t>& y) {
  fx::optim::adam opt{1e-3};
  auto loss = [](const auto& logits, const auto& labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
#if FLUXION_COMPILED_STEP
  auto step = nn::compile_step(net, opt, loss);
  return step(x, y).item();
#else
  fx::gradient_tape tape;
  fx::tensor<float> l = loss(net(x, true), y);
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(l, vars), vars);
  return l.item();
#endif
}

int main() {
  fx::random::generator gen{1};
  auto mlp = nn::sequential(gen, nn::input<784>{}, nn::dense<256>{}, nn::relu{}, nn::dense<256>{}, nn::relu{},
                            nn::dense<10>{});
  auto cnn = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{},
                            nn::max_pool2d<2>{}, nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::flatten{}, nn::dense<1024>{}, nn::relu{}, nn::dense<10>{});
  const auto y = fx::random::uniform<std::int32_t>({8}, gen, 0, 10);
  const float a = train(mlp, fx::random::uniform<float>({8, 784}, gen), y);
  const float b = train(cnn, fx::random::uniform<float>({8, 28, 28, 1}, gen), y);
  std::printf("%g %g\n", a, b);
}
