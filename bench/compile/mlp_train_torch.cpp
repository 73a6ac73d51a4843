// Compile-time benchmark (issue 10): the LibTorch twin of mlp_train.cpp, the same model, data and
// loop written as a LibTorch C++ user writes them (tensors with requires_grad, autograd, manual SGD).
//   mlp_train_torch [directory of the IDX .gz files] [epochs]
#include <torch/torch.h>
#include "read_idx.hpp"

#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "/usr/share/datasets/fashion-mnist";
  const int epochs = argc > 2 ? std::stoi(argv[2]) : 1;
  const auto pixels = read_idx(dir + "/train-images-idx3-ubyte.gz", 16);
  const auto labels = read_idx(dir + "/train-labels-idx1-ubyte.gz", 8);
  const std::int64_t n = static_cast<std::int64_t>(labels.size()), batch = 64;

  std::vector<float> images(pixels.size());
  for (std::size_t i = 0; i < pixels.size(); ++i) images[i] = pixels[i] / 255.f;
  std::vector<std::int64_t> classes(labels.begin(), labels.end());

  torch::manual_seed(42);
  auto glorot = [&](std::int64_t in, std::int64_t out) {
    const float limit = std::sqrt(6.f / static_cast<float>(in + out));
    return (torch::rand({in, out}) * 2 * limit - limit).requires_grad_();
  };
  torch::Tensor w1 = glorot(784, 256), b1 = torch::zeros({256}, torch::requires_grad());
  torch::Tensor w2 = glorot(256, 256), b2 = torch::zeros({256}, torch::requires_grad());
  torch::Tensor w3 = glorot(256, 10), b3 = torch::zeros({10}, torch::requires_grad());
  std::vector<torch::Tensor> params{w1, b1, w2, b2, w3, b3};
  const float learning_rate = 0.05f;

  auto logits_of = [&](const torch::Tensor& x) {
    torch::Tensor h1 = torch::relu(torch::matmul(x, w1) + b1);
    torch::Tensor h2 = torch::relu(torch::matmul(h1, w2) + b2);
    return torch::Tensor(torch::matmul(h2, w3) + b3);
  };

  for (int epoch = 0; epoch < epochs; ++epoch) {
    double total = 0;
    std::int64_t steps = 0;
    for (std::int64_t start = 0; start + batch <= n; start += batch, ++steps) {
      std::vector<float> xb(images.begin() + start * 784, images.begin() + (start + batch) * 784);
      std::vector<std::int64_t> yb(classes.begin() + start, classes.begin() + start + batch);
      const torch::Tensor x = torch::from_blob(xb.data(), {batch, 784}).clone();
      const torch::Tensor y = torch::from_blob(yb.data(), {batch}, torch::kInt64).clone();

      const torch::Tensor logits = logits_of(x);
      // softmax cross-entropy: logsumexp(logits) - logits[label], averaged over the batch
      const torch::Tensor loss = torch::mean(torch::logsumexp(logits, {1}) -
                                             torch::sum(logits * torch::one_hot(y, 10).to(torch::kFloat32), {1}));
      const auto grads = torch::autograd::grad({loss}, params);
      {
        torch::NoGradGuard no_grad;
        for (std::size_t i = 0; i < params.size(); ++i) params[i].sub_(learning_rate * grads[i]);
      }
      total += loss.item<float>();
    }
    std::cout << "epoch " << epoch << ": mean loss " << total / static_cast<double>(steps) << "\n";
  }

  // Accuracy on the last 10000 training images.
  const std::int64_t m = 10000;
  std::vector<float> xt(images.end() - m * 784, images.end());
  torch::NoGradGuard no_grad;
  const torch::Tensor logits = logits_of(torch::from_blob(xt.data(), {m, 784}).clone());
  const torch::Tensor predicted = torch::argmax(logits, 1);
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < m; ++i) correct += predicted[i].item<std::int64_t>() == classes[n - m + i];
  std::cout << "accuracy " << static_cast<double>(correct) / m << "\n";
  return 0;
}
