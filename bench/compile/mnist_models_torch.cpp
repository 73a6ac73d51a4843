// Compile-time twin of examples/mnist_models.cpp in LibTorch (issue 11): the seed's MNIST_HighLevel
// (conv, pool, conv, pool, transpose, LSTM, dense) and the TF tutorial's 2-conv network, each
// trained 10 Adam steps on one random batch. scripts/measure-compile-time.sh compiles both files.
#include <torch/torch.h>

#include <cmath>
#include <iostream>

struct mnist_high_level : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 5).padding(2)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(32, 64, 5).padding(2)};
  torch::nn::LSTM lstm{torch::nn::LSTMOptions(49, 128).batch_first(true)};
  torch::nn::Linear dense{128, 10};
  mnist_high_level() {
    register_module("conv1", conv1), register_module("conv2", conv2);
    register_module("lstm", lstm), register_module("dense", dense);
  }
  torch::Tensor forward(const torch::Tensor& images) {
    auto x = images.reshape({-1, 1, 28, 28});
    x = torch::max_pool2d(conv1(x), 2);
    x = torch::max_pool2d(conv2(x), 2);
    auto seq = x.flatten(2);  // (batch, 64, 49)
    auto out = std::get<0>(lstm(seq));
    return dense(out.select(1, out.size(1) - 1));
  }
};

struct cnn : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 32, 5).padding(2)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(32, 64, 5).padding(2)};
  torch::nn::Linear fc1{7 * 7 * 64, 1024}, fc2{1024, 10};
  torch::nn::Dropout dropout{0.4};
  cnn() {
    register_module("conv1", conv1), register_module("conv2", conv2);
    register_module("fc1", fc1), register_module("fc2", fc2), register_module("dropout", dropout);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2(h)), 2);
    return fc2(dropout(torch::relu(fc1(h.flatten(1)))));
  }
};

template <class Model>
std::pair<float, float> fit_batch(Model& model, const torch::Tensor& x, const torch::Tensor& y, int steps) {
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-3));
  float first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(model.forward(x), y);
    loss.backward();
    opt.step();
    last = loss.template item<float>();
    if (step == 0) first = last;
  }
  return {first, last};
}

int main() {
  torch::manual_seed(2026);
  const std::int64_t batch = 16;
  const auto images = torch::rand({batch, 784});
  const auto labels = torch::randint(0, 10, {batch}, torch::kInt64);

  mnist_high_level seed_model;
  std::cout << "MNIST_HighLevel: logits " << seed_model.forward(images).sizes() << "\n";
  for (const auto& p : seed_model.named_parameters()) std::cout << "  " << p.key() << " " << p.value().sizes() << "\n";
  const auto [seed_first, seed_last] = fit_batch(seed_model, images, labels, 10);
  std::cout << "MNIST_HighLevel: loss " << seed_first << " -> " << seed_last << "\n";

  cnn net;
  const auto [cnn_first, cnn_last] = fit_batch(net, images.reshape({batch, 1, 28, 28}), labels, 10);
  std::cout << "2-conv CNN: loss " << cnn_first << " -> " << cnn_last << "\n";
  const bool ok = std::isfinite(seed_last) && std::isfinite(cnn_last) && seed_last < seed_first && cnn_last < cnn_first;
  return ok ? 0 : 1;
}
