// fx::nn::sequential: static shapes, automatic names, the fused activation epilogue, run-time batch
// checks, and the forward pass against the same computation written by hand.
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE("sequential: shapes are computed at compile time, the batch at run time") {
  auto net = nn::sequential(nn::input<28, 28, 1>{}, nn::conv2d<8, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::conv2d<4, 3>{}, nn::flatten{}, nn::dense<10>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<10>>);
  static_assert(std::is_same_v<N::input_shape_t, nn::static_shape<28, 28, 1>>);
  fx::random::generator gen{1};
  for (fx::index_t batch : {1, 3}) {
    fx::tensor<float> x = fx::random::normal<float>({batch, 28, 28, 1}, gen);
    fx::tensor<float> y = net(x);
    CHECK(y.shape() == fx::shape{batch, 10});
  }
  CHECK_THROWS_WITH_AS(net(fx::zeros<float>({2, 28, 28})),
                       "sequential: 'sequential' expects input of shape (batch, 28, 28, 1), got (2, 28, 28)",
                       fx::shape_error);
  CHECK_THROWS_AS(net(fx::zeros<float>({2, 28, 27, 1})), fx::shape_error);
}

TEST_CASE("sequential: a NaN in the input reaches the output and the loss, in inference and in training") {
  // relu and max pooling keep NaN on every path: the fused epilogues of inference (conv2d and dense
  // with relu in the kernel's store: direct, Winograd and single-channel convolutions, GEMM tiles)
  // as well as the statements the tape records, so the loss's NaN check stops a bad batch instead
  // of a silently finite loss. Batch 1 and 64 take different convolution and GEMM kernels.
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{},
                            nn::max_pool2d<2>{}, nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::flatten{}, nn::dense<64>{}, nn::relu{}, nn::dense<10>{});
  for (fx::index_t batch : {1, 64}) {
    for (bool training : {false, true}) {
      INFO("batch " << batch << (training ? ", training" : ", inference"));
      fx::tensor<float> x = fx::random::normal<float>({batch, 28, 28, 1}, gen);
      x.mutable_data()[(batch - 1) * 784 + 13 * 28 + 14] = std::numeric_limits<float>::quiet_NaN();
      // Inference runs with no tape alive, as in a program: that is when layers use the epilogues.
      std::optional<fx::gradient_tape> tape;
      if (training) tape.emplace();
      fx::tensor<float> logits = net(x, training);
      const auto v = logits.to_vector();
      int nan_in_last = 0, nan_elsewhere = 0;
      for (std::size_t i = 0; i < v.size(); ++i) (i / 10 == static_cast<std::size_t>(batch - 1) ? nan_in_last : nan_elsewhere) += std::isnan(v[i]);
      CHECK(nan_in_last == 10);
      CHECK(nan_elsewhere == 0);
      CHECK_THROWS_AS(fx::losses::sparse_softmax_cross_entropy(logits, fx::zeros<std::int32_t>({batch})),
                      fx::numeric_error);
    }
  }
}

TEST_CASE("sequential: Keras's automatic names and stable variable order") {
  auto net = nn::sequential(nn::input<6>{}, nn::dense<4>{}, nn::relu{}, nn::dense<3>{"logits"}, nn::dense<2>{});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"dense/kernel", "dense/bias", "logits/kernel", "logits/bias",
                                          "dense_1/kernel", "dense_1/bias"});
  CHECK(net.count_params() == 6 * 4 + 4 + 4 * 3 + 3 + 3 * 2 + 2);
  CHECK(net.variables().size() == 6);
  CHECK(net.non_trainable_variables().empty());
  CHECK(net.summary().find("logits") != std::string::npos);
}

TEST_CASE("sequential: the forward pass equals the layers written by hand") {
  fx::random::generator gen{7};
  auto net = nn::sequential(gen, nn::typed_input<double, 5>{}, nn::dense<4>{}, nn::tanh{}, nn::dense<3>{},
                            nn::softmax{});
  fx::tensor<double> x = fx::random::normal<double>({2, 5}, gen);
  fx::tensor<double> y = net(x);
  auto& d0 = net.layer<0>();
  auto& d1 = net.layer<2>();
  const auto k0 = d0.kernel().peek().to_vector(), b0 = d0.bias().peek().to_vector();
  const auto k1 = d1.kernel().peek().to_vector(), b1 = d1.bias().peek().to_vector();
  const auto xv = x.to_vector();
  for (int r = 0; r < 2; ++r) {
    double h[4], z[3], m = -1e300, s = 0;
    for (int j = 0; j < 4; ++j) {
      h[j] = b0[j];
      for (int i = 0; i < 5; ++i) h[j] += xv[r * 5 + i] * k0[i * 4 + j];
      h[j] = std::tanh(h[j]);
    }
    for (int j = 0; j < 3; ++j) {
      z[j] = b1[j];
      for (int i = 0; i < 4; ++i) z[j] += h[i] * k1[i * 3 + j];
      m = std::max(m, z[j]);
    }
    for (int j = 0; j < 3; ++j) s += std::exp(z[j] - m);
    for (int j = 0; j < 3; ++j) CHECK(y(r, j) == doctest::Approx(std::exp(z[j] - m) / s).epsilon(1e-12));
  }
}

TEST_CASE("sequential: the same seed gives the same model") {
  fx::random::generator g1{3}, g2{3};
  auto a = nn::sequential(g1, nn::input<4>{}, nn::dense<3>{});
  auto b = nn::sequential(g2, nn::input<4>{}, nn::dense<3>{});
  CHECK(a.layer<0>().kernel().peek().to_vector() == b.layer<0>().kernel().peek().to_vector());
  // Glorot uniform: every value within sqrt(6 / (4 + 3)).
  for (float v : a.layer<0>().kernel().peek().to_vector()) CHECK(std::abs(v) <= std::sqrt(6.f / 7.f));
  for (float v : a.layer<0>().bias().peek().to_vector()) CHECK(v == 0.f);
}

TEST_CASE("sequential: gradients through the tape reach every variable") {
  fx::random::generator gen{11};
  auto net = nn::sequential(gen, nn::typed_input<double, 6, 6, 2>{}, nn::conv2d<3, 3, nn::same>{}, nn::relu{},
                            nn::avg_pool2d<2>{}, nn::flatten{}, nn::dense<2>{});
  fx::tensor<double> x = fx::random::normal<double>({2, 6, 6, 2}, gen);
  fx::gradient_tape tape;
  fx::tensor<double> loss = fx::reduce_sum(fx::square(net(x)));
  auto vars = net.trainable_variables();
  auto grads = tape.gradient(loss, vars);
  REQUIRE(grads.size() == 4);
  for (std::size_t i = 0; i < grads.size(); ++i) CHECK(grads[i].shape() == vars[i]->shape());
}
