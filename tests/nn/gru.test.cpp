// fx::nn::gru: the forward pass against a naive loop, gradients with respect to the input and every
// variable against finite differences (double; the LSTM's and the SimpleRNN's too, with tanh and
// relu), Keras's initializers and variable names, static shapes in a sequential model, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

using test::reverse_only;

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

/// Keras's GRU (reset_after = true) step by step: every hidden state, (batch, time, units)
/// row-major. b is (2, 3 units): the input bias, then the recurrent bias. relu: Keras's activation
/// (else tanh).
std::vector<double> naive_gru(const std::vector<double>& x, const std::vector<double>& k, const std::vector<double>& r,
                              const std::vector<double>& b, std::size_t batch, std::size_t time, std::size_t features,
                              std::size_t units, bool relu) {
  const std::size_t g = 3 * units;
  std::vector<double> out(batch * time * units);
  for (std::size_t n = 0; n < batch; ++n) {
    std::vector<double> h(units, 0.0);
    for (std::size_t t = 0; t < time; ++t) {
      std::vector<double> xz(b.begin(), b.begin() + g), hz(b.begin() + g, b.end());
      for (std::size_t j = 0; j < g; ++j) {
        for (std::size_t i = 0; i < features; ++i) xz[j] += x[(n * time + t) * features + i] * k[i * g + j];
        for (std::size_t i = 0; i < units; ++i) hz[j] += h[i] * r[i * g + j];
      }
      for (std::size_t u = 0; u < units; ++u) {
        const double z = sigmoid(xz[u] + hz[u]), reset = sigmoid(xz[units + u] + hz[units + u]);
        const double a = xz[2 * units + u] + reset * hz[2 * units + u], c = relu ? std::max(a, 0.0) : std::tanh(a);
        h[u] = z * h[u] + (1 - z) * c;
        out[(n * time + t) * units + u] = h[u];
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("gru: the forward pass equals the GRU written by hand, with tanh and with relu", L,
                   nn::gru<3, false, double>, nn::gru<3, true, double>) {
  fx::random::generator gen{21};
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    L layer{{.activation = relu ? nn::rnn_activation::relu : nn::rnn_activation::tanh}};
    const fx::tensor<double> x = fx::random::normal<double>({2, 4, 5}, gen);
    layer.build(fx::shape{4, 5}, gen);
    layer.bias().assign(fx::random::normal<double>({2, 9}, gen));  // not the initial zeros
    auto naive = [&](const fx::tensor<double>& in) {
      const fx::shape& s = in.shape();
      return naive_gru(in.to_vector(), layer.kernel().peek().to_vector(), layer.recurrent_kernel().peek().to_vector(),
                       layer.bias().peek().to_vector(), static_cast<std::size_t>(s[0]), static_cast<std::size_t>(s[1]),
                       5, 3, relu);
    };
    const fx::tensor<double> y = layer(x);
    const std::vector<double> all = naive(x);
    std::vector<double> want = all;
    if (!L::return_sequences) {
      REQUIRE(y.shape() == fx::shape{2, 3});
      want.clear();
      for (std::size_t n = 0; n < 2; ++n)
        for (std::size_t u = 0; u < 3; ++u) want.push_back(all[(n * 4 + 3) * 3 + u]);
    } else {
      REQUIRE(y.shape() == fx::shape{2, 4, 3});
    }
    const auto got = y.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
    // One time step, and the same sequence under a tape (the fused cell; without one, the statements).
    const fx::tensor<double> x1 = fx::random::normal<double>({3, 1, 5}, gen);
    const auto got1 = fx::tensor<double>(layer(x1)).to_vector(), want1 = naive(x1);
    REQUIRE(got1.size() == want1.size());
    for (std::size_t i = 0; i < got1.size(); ++i) CHECK(got1[i] == doctest::Approx(want1[i]).epsilon(1e-12));
    fx::gradient_tape tape;
    tape.watch(x);
    const auto taped = fx::tensor<double>(layer(x)).to_vector();
    for (std::size_t i = 0; i < taped.size(); ++i) CHECK(taped[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
}

TEST_CASE_TEMPLATE("gru, lstm, simple_rnn: gradients with respect to the input, kernel, recurrent kernel and bias, "
                   "with tanh and with relu",
                   L, nn::gru<3, false, double>, nn::gru<3, true, double>, nn::lstm<3, false, double>,
                   nn::lstm<3, true, double>, nn::simple_rnn<3, false, double>, nn::simple_rnn<3, true, double>) {
  fx::random::generator gen{22};
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    L layer{{.activation = relu ? nn::rnn_activation::relu : nn::rnn_activation::tanh}};
    layer.build(fx::shape{3, 2}, gen);
    const fx::tensor<double> x = fx::random::normal<double>({2, 3, 2}, gen);
    const fx::tensor<double> k = layer.kernel().peek(), r = layer.recurrent_kernel().peek();
    const fx::tensor<double> b = fx::random::normal<double>(layer.bias().shape(), gen, 0.0, 0.5);
    auto report = fx::testing::check_gradients(
        [&](const auto& xi, const auto& ki, const auto& ri, const auto& bi) {
          layer.kernel().assign(ki);
          layer.recurrent_kernel().assign(ri);
          layer.bias().assign(bi);
          return layer(xi);
        },
        reverse_only, x, k, r, b);
    CHECK_MESSAGE(report.ok, report.report);
  }
}

TEST_CASE("gru: Keras's initializers and variable names") {
  fx::random::generator gen{23};
  nn::gru<4> layer;
  layer.build(fx::shape{6, 5}, gen);
  CHECK(layer.kernel().shape() == fx::shape{5, 12});
  CHECK(layer.recurrent_kernel().shape() == fx::shape{4, 12});
  CHECK(layer.bias().shape() == fx::shape{2, 12});
  const float limit = std::sqrt(6.f / (5 + 12));
  for (float v : layer.kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(24, 0.f));
  // The recurrent kernel's rows are orthonormal.
  const fx::tensor<float> rrt = fx::matmul(layer.recurrent_kernel().peek(), layer.recurrent_kernel().peek(),
                                           fx::transpose_b);
  const auto p = rrt.to_vector();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(p[i * 4 + j] == doctest::Approx(i == j ? 1.0 : 0.0).epsilon(1e-5));
  std::vector<std::string> names;
  for (auto* v : layer.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"gru/kernel", "gru/recurrent_kernel", "gru/bias"});
  CHECK(layer.count_params() == 5 * 12 + 4 * 12 + 24);  // Keras's summary: 3 * (5 * 4 + 4 * 4 + 2 * 4)
  // initialize() draws again and zeroes the bias.
  layer.bias().assign(fx::ones<float>({2, 12}));
  const auto before = layer.kernel().peek().to_vector();
  layer.initialize(gen);
  CHECK(layer.kernel().peek().to_vector() != before);
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(24, 0.f));
}

TEST_CASE("gru: static shapes in a sequential model, and errors") {
  auto net = nn::sequential(nn::input<6, 3>{}, nn::gru<4, true>{}, nn::gru<2>{}, nn::dense<1>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<1>>);
  static_assert(std::is_same_v<decltype(nn::gru<4, true>::output_shape(nn::static_shape<6, 3>{})),
                               nn::static_shape<6, 4>>);
  CHECK(net.layer<0>().name() == "gru");
  CHECK(net.layer<1>().name() == "gru_1");
  CHECK(net.layer<1>().kernel().shape() == fx::shape{4, 6});
  fx::random::generator gen{3};
  const fx::tensor<float> x = fx::random::normal<float>({5, 6, 3}, gen);
  CHECK(net(x).shape() == fx::shape{5, 1});
  // Every variable gets a nonzero gradient through the time steps.
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(net(x));
  auto grads = tape.gradient(loss, net.trainable_variables());
  REQUIRE(grads.size() == 8);
  for (std::size_t i = 0; i < grads.size(); ++i) {
    CAPTURE(i);
    CHECK(grads[i].shape() == net.trainable_variables()[i]->shape());
    CHECK(fx::tensor<float>(fx::reduce_max(fx::abs(grads[i]))).item() > 0.f);
  }

  auto& layer = net.layer<0>();
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 6, 4})),
                       "gru 'gru': expects input of shape (batch, time >= 1, 3), got (2, 6, 4)", fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 3})),
                       "gru 'gru': expects input of shape (batch, time, features), got (2, 3)", fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({2, 0, 3})), fx::shape_error);
  nn::gru<2> unbuilt;
  CHECK_THROWS_WITH_AS(unbuilt.kernel(), "gru 'gru': kernel does not exist before the layer is built (call it once)",
                       fx::error);
  CHECK_THROWS_AS(unbuilt.build(fx::shape{3}), fx::shape_error);
  // An empty batch takes the statements and gives an empty output.
  CHECK(fx::tensor<float>(layer(fx::zeros<float>({0, 6, 3}))).shape() == fx::shape{0, 6, 4});
}
