// The LibTorch twins of fluxion's benchmark models (nn.bench.cpp, epoch.bench.cpp), NCHW:
//   torch_mlp    784-256-256-10, relu
//   torch_cnn    the TF tutorial's 2-conv network (conv 32 5x5 same relu, pool 2, conv 64 5x5 same
//                relu, pool 2, dense 1024 relu, [dropout], dense 10)
//   torch_lstm   the seed's CNN+LSTM (MNIST_HighLevel): conv, pool, conv, pool, LSTM 128, dense 10
#pragma once

#include <torch/torch.h>

struct torch_mlp : torch::nn::Module {
  torch::nn::Linear l1{784, 256}, l2{256, 256}, l3{256, 10};
  torch_mlp() {
    register_module("l1", l1), register_module("l2", l2), register_module("l3", l3);
  }
  torch::Tensor forward(const torch::Tensor& x) { return l3(torch::relu(l2(torch::relu(l1(x))))); }
};

struct torch_cnn : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 32, 5).padding(2)}, c2{torch::nn::Conv2dOptions(32, 64, 5).padding(2)};
  torch::nn::Linear f1{7 * 7 * 64, 1024}, f2{1024, 10};
  double dropout;  // after f1's relu, in training mode only (the example's network has 0.4)
  explicit torch_cnn(double dropout_rate = 0) : dropout(dropout_rate) {
    register_module("c1", c1), register_module("c2", c2), register_module("f1", f1), register_module("f2", f2);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(c1(x)), 2);
    h = torch::max_pool2d(torch::relu(c2(h)), 2);
    h = torch::relu(f1(h.flatten(1)));
    if (dropout > 0) h = torch::dropout(h, dropout, is_training());
    return f2(h);
  }
};

struct torch_lstm : torch::nn::Module {
  torch::nn::Conv2d c1{torch::nn::Conv2dOptions(1, 32, 5).padding(2)}, c2{torch::nn::Conv2dOptions(32, 64, 5).padding(2)};
  torch::nn::LSTM lstm{torch::nn::LSTMOptions(49, 128).batch_first(true)};
  torch::nn::Linear fc{128, 10};
  torch_lstm() {
    register_module("c1", c1), register_module("c2", c2), register_module("lstm", lstm), register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = torch::max_pool2d(c1(x), 2);
    h = torch::max_pool2d(c2(h), 2);                   // (batch, 64, 7, 7): channels first already
    auto seq = h.flatten(2);                           // (batch, 64, 49) = fluxion's permuted (49, 64)
    auto out = std::get<0>(lstm(seq));                 // (batch, 64, 128)
    return fc(out.select(1, out.size(1) - 1));
  }
};
