// fx::nn::lstm: the forward pass against a naive loop, Keras's initializers (the orthogonal one
// against Gram-Schmidt), static shapes in a sequential model, errors. Gradients against finite
// differences: tests/nn/gru.test.cpp (for both recurrent layers).
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
// (Not "sigmoid": gru.test.cpp has one, and test files compile together in batches.)

double logistic(double v) { return 1 / (1 + std::exp(-v)); }

/// Keras's LSTM step by step: every hidden state, (batch, time, units) row-major; relu: Keras's
/// activation (else tanh).
std::vector<double> naive_lstm(const std::vector<double>& x, const std::vector<double>& k, const std::vector<double>& r,
                               const std::vector<double>& b, std::size_t batch, std::size_t time, std::size_t features,
                               std::size_t units, bool relu = false) {
  auto act = [relu](double v) { return relu ? std::max(v, 0.0) : std::tanh(v); };
  std::vector<double> out(batch * time * units);
  for (std::size_t n = 0; n < batch; ++n) {
    std::vector<double> h(units, 0.0), c(units, 0.0);
    for (std::size_t t = 0; t < time; ++t) {
      std::vector<double> z(b.begin(), b.end());
      for (std::size_t j = 0; j < 4 * units; ++j) {
        for (std::size_t i = 0; i < features; ++i) z[j] += x[(n * time + t) * features + i] * k[i * 4 * units + j];
        for (std::size_t i = 0; i < units; ++i) z[j] += h[i] * r[i * 4 * units + j];
      }
      for (std::size_t u = 0; u < units; ++u) {
        const double in = logistic(z[u]), forget = logistic(z[units + u]), cand = act(z[2 * units + u]),
                     o = logistic(z[3 * units + u]);
        c[u] = forget * c[u] + in * cand;
        h[u] = o * act(c[u]);
        out[(n * time + t) * units + u] = h[u];
      }
    }
  }
  return out;
}

/// Modified Gram-Schmidt on the columns of the row-major m x n matrix a: Q with R's diagonal positive.
std::vector<double> gram_schmidt(std::vector<double> a, std::size_t m, std::size_t n) {
  for (std::size_t j = 0; j < n; ++j) {
    for (std::size_t p = 0; p < j; ++p) {
      double dot = 0;
      for (std::size_t i = 0; i < m; ++i) dot += a[i * n + p] * a[i * n + j];
      for (std::size_t i = 0; i < m; ++i) a[i * n + j] -= dot * a[i * n + p];
    }
    double norm = 0;
    for (std::size_t i = 0; i < m; ++i) norm += a[i * n + j] * a[i * n + j];
    for (std::size_t i = 0; i < m; ++i) a[i * n + j] /= std::sqrt(norm);
  }
  return a;
}

}  // namespace

TEST_CASE_TEMPLATE("lstm: the forward pass equals the LSTM written by hand, with tanh and with relu", L,
                   nn::lstm<3, false, double>, nn::lstm<3, true, double>) {
  fx::random::generator gen{21};
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    L layer{{.activation = relu ? nn::rnn_activation::relu : nn::rnn_activation::tanh}};
    const fx::tensor<double> x = fx::random::normal<double>({2, 4, 5}, gen);
    layer.build(fx::shape{4, 5}, gen);
    layer.bias().assign(fx::random::normal<double>({12}, gen));  // not the initial zeros and ones
    const fx::tensor<double> y = layer(x);
    const std::vector<double> all = naive_lstm(x.to_vector(), layer.kernel().peek().to_vector(),
                                               layer.recurrent_kernel().peek().to_vector(),
                                               layer.bias().peek().to_vector(), 2, 4, 5, 3, relu);
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
    {
      fx::gradient_tape outer, inner;  // two tapes: the statements
      outer.watch(x);
      const auto statements = fx::tensor<double>(layer(x)).to_vector();
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(statements[i] == doctest::Approx(want[i]).epsilon(1e-12));
    }
    // One time step.
    const fx::tensor<double> x1 = fx::random::normal<double>({3, 1, 5}, gen);
    const fx::tensor<double> y1 = layer(x1);
    const auto want1 = naive_lstm(x1.to_vector(), layer.kernel().peek().to_vector(),
                                  layer.recurrent_kernel().peek().to_vector(), layer.bias().peek().to_vector(), 3, 1, 5, 3,
                                  relu);
    const auto got1 = y1.to_vector();
    REQUIRE(got1.size() == want1.size());
    for (std::size_t i = 0; i < got1.size(); ++i) CHECK(got1[i] == doctest::Approx(want1[i]).epsilon(1e-12));
  }
}

TEST_CASE("lstm: Keras's initializers") {
  fx::random::generator gen{23};
  nn::lstm<4> layer;
  layer.build(fx::shape{6, 5}, gen);
  CHECK(layer.kernel().shape() == fx::shape{5, 16});
  CHECK(layer.recurrent_kernel().shape() == fx::shape{4, 16});
  const float limit = std::sqrt(6.f / (5 + 16));
  for (float v : layer.kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  std::vector<float> bias(16, 0.f);
  for (int j = 4; j < 8; ++j) bias[static_cast<std::size_t>(j)] = 1.f;  // unit forget bias
  CHECK(layer.bias().peek().to_vector() == bias);
  // The recurrent kernel's rows are orthonormal.
  const fx::tensor<float> rrt = fx::matmul(layer.recurrent_kernel().peek(), layer.recurrent_kernel().peek(),
                                           fx::transpose_b);
  const auto p = rrt.to_vector();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(p[i * 4 + j] == doctest::Approx(i == j ? 1.0 : 0.0).epsilon(1e-5));
  std::vector<std::string> names;
  for (auto* v : layer.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"lstm/kernel", "lstm/recurrent_kernel", "lstm/bias"});
}

TEST_CASE("initializers::orthogonal: Q of the normal draw's QR, signs fixed by R's diagonal") {
  // Wide (rows < cols, as an LSTM's recurrent kernel): Q^T of the (cols, rows) draw; tall: Q itself.
  for (auto [rows_, cols_] : {std::pair<std::size_t, std::size_t>{3, 8}, {6, 4}, {5, 5}}) {
    const auto& rows = rows_, &cols = cols_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(rows);
    CAPTURE(cols);
    fx::random::generator g1{31}, g2{31};
    const std::size_t m = std::max(rows, cols), n = std::min(rows, cols);
    const fx::tensor<double> q =
        nn::initializers::orthogonal<double>({static_cast<fx::index_t>(rows), static_cast<fx::index_t>(cols)}, g1, 2.0);
    const auto want = gram_schmidt(
        fx::random::normal<double>({static_cast<fx::index_t>(m), static_cast<fx::index_t>(n)}, g2).to_vector(), m, n);
    const auto got = q.to_vector();
    for (std::size_t r = 0; r < rows; ++r)
      for (std::size_t c = 0; c < cols; ++c) {
        const double w = rows >= cols ? want[r * n + c] : want[c * n + r];
        CHECK(got[r * cols + c] == doctest::Approx(2.0 * w).epsilon(1e-10));
      }
  }
  fx::random::generator gen{1};
  CHECK_THROWS_AS(nn::initializers::orthogonal<float>({4}, gen), fx::invalid_argument);
}

TEST_CASE("lstm: static shapes in a sequential model, and errors") {
  auto net = nn::sequential(nn::input<6, 3>{}, nn::lstm<4, true>{}, nn::lstm<2>{}, nn::dense<1>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<1>>);
  static_assert(std::is_same_v<decltype(nn::lstm<4, true>::output_shape(nn::static_shape<6, 3>{})),
                               nn::static_shape<6, 4>>);
  CHECK(net.layer<0>().name() == "lstm");
  CHECK(net.layer<1>().name() == "lstm_1");
  CHECK(net.layer<1>().kernel().shape() == fx::shape{4, 8});
  fx::random::generator gen{3};
  const fx::tensor<float> x = fx::random::normal<float>({5, 6, 3}, gen);
  CHECK(net(x).shape() == fx::shape{5, 1});
  // Every variable gets a gradient through the time steps.
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(net(x));
  auto grads = tape.gradient(loss, net.trainable_variables());
  REQUIRE(grads.size() == 8);
  for (std::size_t i = 0; i < grads.size(); ++i) CHECK(grads[i].shape() == net.trainable_variables()[i]->shape());

  auto& layer = net.layer<0>();
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 6, 4})),
                       "lstm 'lstm': expects input of shape (batch, time >= 1, 3), got (2, 6, 4)", fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 3})), "lstm 'lstm': expects input of shape (batch, time, features), got (2, 3)",
                       fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({2, 0, 3})), fx::shape_error);
}
