// Compile-time benchmark (issue 10): the MLP training program a new user writes with fluxion's
// public API of today: variables, a gradient tape, matmul, relu, softmax cross-entropy through
// logsumexp, and SGD by assign_sub. Its LibTorch twin is mlp_train_torch.cpp; both read
// Fashion-MNIST through zlib the same way. scripts/measure-compile-time.sh compiles both.
//   mlp_train [directory of the IDX .gz files] [epochs]
#include <fluxion/fluxion.hpp>
#include "read_idx.hpp"

#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fx = fluxion;

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 1;
  const auto pixels = read_idx(dir + "/train-images-idx3-ubyte.gz", 16);
  const auto labels = read_idx(dir + "/train-labels-idx1-ubyte.gz", 8);
  const fx::index_t n = static_cast<fx::index_t>(labels.size()), batch = 64;

  std::vector<float> images(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) images[i] = pixels[i] / 255.f;
  std::vector<std::int32_t> classes(labels.begin(), labels.end());

  fx::random::generator gen{42};
  auto glorot = [&](fx::index_t in, fx::index_t out) {
    const float limit = std::sqrt(6.f / static_cast<float>(in + out));
    return fx::random::uniform<float>({in, out}, gen, -limit, limit);
  };
  fx::variable<float> w1{glorot(784, 256), "w1"}, b1{fx::zeros<float>({256}), "b1"};
  fx::variable<float> w2{glorot(256, 256), "w2"}, b2{fx::zeros<float>({256}), "b2"};
  fx::variable<float> w3{glorot(256, 10), "w3"}, b3{fx::zeros<float>({10}), "b3"};
  std::vector<fx::variable<float>*> params{&w1, &b1, &w2, &b2, &w3, &b3};
  const float learning_rate = 0.05f;

  auto logits_of = [&](const fx::tensor<float>& x) {
    fx::tensor<float> h1 = fx::relu(fx::matmul(x, w1) + b1);
    fx::tensor<float> h2 = fx::relu(fx::matmul(h1, w2) + b2);
    return fx::tensor<float>(fx::matmul(h2, w3) + b3);
  };

  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    fx::index_t steps = 0;
    for (fx::index_t start = 0; start + batch <= n; start += batch, ++steps) {
      std::vector<float> xb(images.begin() + start * 784, images.begin() + (start + batch) * 784);
      std::vector<std::int32_t> yb(classes.begin() + start, classes.begin() + start + batch);
      const fx::tensor<float> x = fx::from_vector(std::move(xb), {batch, 784});
      const fx::tensor<std::int32_t> y = fx::from_vector(std::move(yb), {batch});

      fx::gradient_tape tape;
      const fx::tensor<float> logits = logits_of(x);
      // softmax cross-entropy: logsumexp(logits) - logits[label], averaged over the batch
      const fx::tensor<float> loss =
          fx::reduce_mean(fx::reduce_logsumexp(logits, {1}) - fx::reduce_sum(logits * fx::one_hot<float>(y, 10), {1}));
      const auto grads = tape.gradient(loss, params);
      for (std::size_t i = 0; i < params.size(); ++i) params[i]->assign_sub(learning_rate * grads[i]);
      total += loss.item();
    }
    std::cout << "epoch " << epoch << ": mean loss " << total / static_cast<double>(steps) << "\n";
  }

  // Accuracy on the last 10000 training images.
  const fx::index_t m = 10000;
  std::vector<float> xt(images.end() - m * 784, images.end());
  const fx::tensor<float> logits = logits_of(fx::from_vector(std::move(xt), {m, 784}));
  const fx::tensor<std::int64_t> predicted = fx::argmax(logits, 1);
  fx::index_t correct = 0;
  const auto p = predicted.to_vector();
  for (fx::index_t i = 0; i < m; ++i) correct += p[i] == classes[n - m + i];
  std::cout << "accuracy " << static_cast<double>(correct) / m << "\n";
  return 0;
}
