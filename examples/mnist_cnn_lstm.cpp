// Trains the reference text's MNIST_HighLevel (conv 32 5x5 same, pool, conv 64 5x5 same, pool, the
// 7x7x64 feature map read as 64 steps of 49 values by an LSTM of 128 units, dense 10), with loss and
// accuracy summaries every 10 steps as in the reference, on Fashion-MNIST (Debian packages no MNIST;
// --data points at any directory of the four MNIST-format files).
//
//   build/examples/mnist_cnn_lstm [--epochs N] [--steps N] [--data DIR]
//   tensorboard --logdir build/examples/runs
#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>
#include <fluxion/tensorboard.hpp>

#include "mnist_high_level.hpp"

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

namespace fx = fluxion;

int main(int argc, char** argv) {
  int epochs = 2;
  std::int64_t steps = -1;
  std::string data_dir;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--epochs") epochs = std::stoi(argv[++i]);
    else if (i + 1 < argc && arg == "--steps") steps = std::stoll(argv[++i]);
    else if (i + 1 < argc && arg == "--data") data_dir = argv[++i];
    else {
      std::cerr << "usage: mnist_cnn_lstm [--epochs N] [--steps N] [--data DIR]\n";
      return 2;
    }
  }
  try {
    auto train = fx::datasets::fashion_mnist("train", data_dir).shuffle(60000, /*seed=*/7).batch(64).prefetch(2);
    auto test = fx::datasets::fashion_mnist("test", data_dir).batch(1000).prefetch(2);
    mnist_high_level model;
    fx::optim::adam opt{1e-3};
    auto loss = [](const auto& logits, const auto& labels) {
      return fx::losses::sparse_softmax_cross_entropy(logits, labels);
    };
    fx::summary_writer log{"runs/mnist_cnn_lstm"};
    fx::tensorboard_callback summaries{log, /*every_steps=*/10, &opt};  // loss and accuracy every 10 steps
    fx::fit(model, opt, loss, train, {.epochs = epochs, .steps_per_epoch = steps, .callbacks = {&summaries}});
    std::cout << model.trainable_variables().size() << " variables, " << model.count_params() << " parameters\n";
    fx::metrics::sparse_categorical_accuracy accuracy;
    for (auto [images, labels] : test) accuracy.update(labels, model(images));
    std::cout << "test accuracy: " << accuracy.result() << " (" << accuracy.count() << " images)\n";
    log.scalar("test_accuracy", accuracy.result(), opt.iterations());
    return 0;
  } catch (const fx::error& e) {
    std::cerr << "mnist_cnn_lstm: " << e.what() << "\n";
    return 1;
  }
}
