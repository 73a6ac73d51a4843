// The two MNIST models of the reference texts, written with fluxion's model layer, each run
// forward and backward on one batch and trained a few steps on it with Adam:
//
//   - the seed's MNIST_HighLevel (a Keras Model subclass): reshape to 28x28x1, conv 32 5x5 same,
//     pool, conv 64 5x5 same, pool, reshape to (49, 64), transpose to (64, 49), LSTM, dense;
//   - the TF tutorial's 2-conv network (a Sequential): conv 32 5x5 relu, pool, conv 64 5x5 relu,
//     pool, flatten, dense 1024 relu, dropout 0.4, dense 10.
//
// Every per-example shape is checked when this file compiles: change reshape<49, 64> to
// reshape<49, 60> and the compiler names the layer and both element counts. The images are random
// (training on Fashion-MNIST is examples/fashion_mnist.cpp's story), so the point is the shapes,
// the variables, the gradients, and a loss that falls on the batch it is fitted to.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <iostream>

namespace fx = fluxion;
namespace nn = fluxion::nn;

/// MNIST_HighLevel, as in the seed: the sublayers are members, listed once in FLUXION_LAYERS.
struct mnist_high_level : nn::model<mnist_high_level> {
  nn::sequential_t<nn::input<784>, nn::reshape<28, 28, 1>, nn::conv2d<32, 5, nn::same>, nn::max_pool2d<2, 2, nn::same>,
                   nn::conv2d<64, 5, nn::same>, nn::max_pool2d<2, 2, nn::same>, nn::reshape<49, 64>,
                   nn::permute<2, 1>, nn::lstm<128>>
      features;
  nn::dense<10> classifier;
  FLUXION_LAYERS(features, classifier)

  fx::tensor<float> call(const fx::tensor<float>& images, bool training = false) {
    return classifier(features(images, training));
  }
};

/// Trains `model` for `steps` Adam steps on one batch; returns the first and last losses.
template <class Model>
std::pair<float, float> fit_batch(Model& model, const fx::tensor<float>& x, const fx::tensor<std::int32_t>& y, int steps) {
  fx::optim::adam opt{1e-3};
  float first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(x, /*training=*/true), y);
    auto vars = model.trainable_variables();
    auto grads = tape.gradient(loss, vars);
    opt.apply_gradients(grads, vars);
    last = loss.item();
    if (step == 0) first = last;
  }
  return {first, last};
}

int main() {
  fx::random::generator gen{2026};
  const fx::index_t batch = 16;
  const fx::tensor<float> images = fx::random::uniform<float>({batch, 784}, gen);
  const fx::tensor<std::int32_t> labels = fx::random::uniform<std::int32_t>({batch}, gen, 0, 10);

  mnist_high_level seed_model;
  const fx::tensor<float> logits = seed_model(images);
  std::cout << "MNIST_HighLevel: logits " << fx::to_string(logits.shape()) << ", " << seed_model.trainable_variables().size()
            << " variables, " << seed_model.count_params() << " parameters\n";
  for (auto* v : seed_model.trainable_variables()) std::cout << "  " << v->name() << " " << fx::to_string(v->shape()) << "\n";
  const auto [seed_first, seed_last] = fit_batch(seed_model, images, labels, 10);
  std::cout << "MNIST_HighLevel: loss " << seed_first << " -> " << seed_last << " after 10 Adam steps\n";

  auto cnn = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{}, nn::flatten{},
                            nn::dense<1024>{}, nn::relu{}, nn::dropout{0.4, 7}, nn::dense<10>{});
  std::cout << cnn.summary();
  const fx::tensor<float> images_nhwc = fx::reshape(images, {batch, 28, 28, 1});
  const auto [cnn_first, cnn_last] = fit_batch(cnn, images_nhwc, labels, 10);
  std::cout << "2-conv CNN: loss " << cnn_first << " -> " << cnn_last << " after 10 Adam steps\n";

  const bool ok = std::isfinite(seed_last) && std::isfinite(cnn_last) && seed_last < seed_first && cnn_last < cnn_first;
  std::cout << (ok ? "both losses fell\n" : "a loss did NOT fall\n");
  return ok ? 0 : 1;
}
