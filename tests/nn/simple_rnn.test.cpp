// fx::nn::simple_rnn: the forward pass against a naive loop (tanh and relu), Keras's initializers
// and variable names, static shapes in a sequential model,
// nn::bidirectional around it, a compiled training step against the tape-based one, and errors.
// Masks, states, dropout and go_backwards are in the recurrent layers' shared tests
// (recurrent.test.cpp, recurrent_mask.test.cpp, recurrent_options.test.cpp); the fused sequence
// against the statements and second derivatives in simple_rnn_cell.test.cpp; PyTorch's nn.RNN in
// peer_recurrent.test.cpp; gradients with respect to the input and every variable against finite
// differences (double; the fused sequence, which one tape records) in gru.test.cpp, with the GRU's
// and the LSTM's.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "../test_util.hpp"
#include "compiled_check.hpp"
#include "reverse_only.hpp"

namespace simple_rnn_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

using test::reverse_only;

/// Keras's SimpleRNN step by step: every hidden state, (batch, time, units) row-major; relu: the
/// activation (else tanh).
std::vector<double> naive_simple_rnn(const std::vector<double>& x, const std::vector<double>& k,
                                     const std::vector<double>& r, const std::vector<double>& b, std::size_t batch,
                                     std::size_t time, std::size_t features, std::size_t units, bool relu) {
  std::vector<double> out(batch * time * units);
  for (std::size_t n = 0; n < batch; ++n) {
    std::vector<double> h(units, 0.0);
    for (std::size_t t = 0; t < time; ++t) {
      std::vector<double> a(b);
      for (std::size_t j = 0; j < units; ++j) {
        for (std::size_t i = 0; i < features; ++i) a[j] += x[(n * time + t) * features + i] * k[i * units + j];
        for (std::size_t i = 0; i < units; ++i) a[j] += h[i] * r[i * units + j];
      }
      for (std::size_t u = 0; u < units; ++u) {
        h[u] = relu ? std::max(a[u], 0.0) : std::tanh(a[u]);
        out[(n * time + t) * units + u] = h[u];
      }
    }
  }
  return out;
}

/// The last step of each row of an every-step output (batch, time, units).
std::vector<double> last_steps(const std::vector<double>& all, std::size_t batch, std::size_t time, std::size_t units) {
  std::vector<double> out;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t u = 0; u < units; ++u) out.push_back(all[(n * time + time - 1) * units + u]);
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("simple_rnn: the forward pass equals the SimpleRNN written by hand", L,
                   nn::simple_rnn<3, false, double>, nn::simple_rnn<3, true, double>,
                   nn::simple_rnn<19, true, double>) {  // 19: whole vectors and a scalar tail
  constexpr std::size_t units = L::units;
  fx::random::generator gen{61};
  for (const nn::rnn_activation activation : {nn::rnn_activation::tanh, nn::rnn_activation::relu}) {
    const bool relu = activation == nn::rnn_activation::relu;
    CAPTURE(relu);
    L layer{{.activation = activation}};
    layer.build(fx::shape{4, 5}, gen);
    layer.bias().assign(fx::random::normal<double>({L::units}, gen));  // not the initial zeros
    auto naive = [&](const fx::tensor<double>& in) {
      const fx::shape& s = in.shape();
      const auto all = naive_simple_rnn(in.to_vector(), layer.kernel().peek().to_vector(),
                                        layer.recurrent_kernel().peek().to_vector(), layer.bias().peek().to_vector(),
                                        static_cast<std::size_t>(s[0]), static_cast<std::size_t>(s[1]), 5, units,
                                        relu);
      return L::return_sequences ? all
                                 : last_steps(all, static_cast<std::size_t>(s[0]),
                                              static_cast<std::size_t>(s[1]), units);
    };
    for (const fx::index_t batch : {2, 1, 40}) {
      CAPTURE(batch);
      const fx::tensor<double> x = fx::random::normal<double>({batch, 4, 5}, gen);
      const fx::tensor<double> y = layer(x);  // no tape: the fused cells
      CHECK(y.shape() == (L::return_sequences ? fx::shape{batch, 4, L::units} : fx::shape{batch, L::units}));
      const auto want = naive(x);
      test::check_close(y.to_vector(), want, 1e-13, 1e-13);
      {
        fx::gradient_tape outer, inner;  // two tapes: the statements
        outer.watch(x);
        test::check_close(fx::tensor<double>(layer(x)).to_vector(), want, 1e-13, 1e-13);
      }
      const fx::tensor<double> x1 = fx::random::normal<double>({batch, 1, 5}, gen);  // one step
      test::check_close(fx::tensor<double>(layer(x1)).to_vector(), naive(x1), 1e-13, 1e-13);
      if (relu && batch == 40) {  // both sides of the kink are taken
        CHECK(std::count(want.begin(), want.end(), 0.0) > 0);
        CHECK(*std::max_element(want.begin(), want.end()) > 0.0);
      }
    }
  }
}

TEST_CASE("simple_rnn: Keras's initializers and variable names") {
  fx::random::generator gen{63};
  nn::simple_rnn<4> layer;
  layer.build(fx::shape{6, 5}, gen);
  CHECK(layer.kernel().shape() == fx::shape{5, 4});
  CHECK(layer.recurrent_kernel().shape() == fx::shape{4, 4});
  CHECK(layer.bias().shape() == fx::shape{4});
  const float limit = std::sqrt(6.f / (5 + 4));
  for (float v : layer.kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(4, 0.f));
  // The recurrent kernel is orthogonal.
  const fx::tensor<float> rrt = fx::matmul(layer.recurrent_kernel().peek(), layer.recurrent_kernel().peek(),
                                           fx::transpose_b);
  const auto p = rrt.to_vector();
  for (std::size_t i = 0; i < 4; ++i)
    for (std::size_t j = 0; j < 4; ++j) CHECK(p[i * 4 + j] == doctest::Approx(i == j ? 1.0 : 0.0).epsilon(1e-5));
  std::vector<std::string> names;
  for (auto* v : layer.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"simple_rnn/kernel", "simple_rnn/recurrent_kernel", "simple_rnn/bias"});
  CHECK(layer.count_params() == 5 * 4 + 4 * 4 + 4);  // Keras's summary of SimpleRNN(4) on 5 features: 40
  // Keras's options: bias_initializer, and a regularizer the model's penalty sums.
  nn::simple_rnn<4> ones{{.bias_initializer = fx::nn::initializers::ones(),
                          .recurrent_regularizer = fx::nn::regularizers::l2(0.5)}};
  ones.build(fx::shape{6, 5}, gen);
  CHECK(ones.bias().peek().to_vector() == std::vector<float>(4, 1.f));
  const fx::tensor<float> rk = ones.recurrent_kernel().peek();
  CHECK(fx::tensor<float>(ones.regularization_loss()).item() ==
        doctest::Approx(0.5 * fx::tensor<float>(fx::reduce_sum(fx::square(rk))).item()).epsilon(1e-6));
}

TEST_CASE("simple_rnn: static shapes in a sequential model, gradients through it, and errors") {
  auto net = nn::sequential(nn::input<6, 3>{}, nn::simple_rnn<4, true>{}, nn::simple_rnn<2>{}, nn::dense<1>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<1>>);
  static_assert(std::is_same_v<decltype(nn::simple_rnn<4, true>::output_shape(nn::static_shape<6, 3>{})),
                               nn::static_shape<6, 4>>);
  CHECK(net.layer<0>().name() == "simple_rnn");
  CHECK(net.layer<1>().name() == "simple_rnn_1");
  CHECK(net.layer<1>().kernel().shape() == fx::shape{4, 2});
  fx::random::generator gen{64};
  const fx::tensor<float> x = fx::random::normal<float>({5, 6, 3}, gen);
  CHECK(net(x).shape() == fx::shape{5, 1});
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
                       "simple_rnn 'simple_rnn': expects input of shape (batch, time >= 1, 3), got (2, 6, 4)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 3})),
                       "simple_rnn 'simple_rnn': expects input of shape (batch, time, features), got (2, 3)",
                       fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({2, 0, 3})), fx::shape_error);
  const std::array<fx::tensor<float>, 1> wrong{fx::zeros<float>({2, 3})};
  CHECK_THROWS_WITH_AS(layer.call_with_state(fx::zeros<float>({2, 6, 3}), wrong),
                       "simple_rnn 'simple_rnn': initial_state[0] must be (batch, units) = (2, 4) for input (2, 6, 3), "
                       "got (2, 3)",
                       fx::shape_error);
  nn::simple_rnn<2> unbuilt;
  CHECK_THROWS_WITH_AS(unbuilt.kernel(),
                       "simple_rnn 'simple_rnn': kernel does not exist before the layer is built (call it once)",
                       fx::error);
  CHECK_THROWS_WITH_AS((nn::simple_rnn<3>{{.recurrent_dropout = 1.0}}),
                       "simple_rnn 'simple_rnn': recurrent_dropout = 1 is not in [0, 1)", fx::invalid_argument);
  CHECK(nn::simple_rnn<3>{{.activation = nn::rnn_activation::relu}}.options().activation == nn::rnn_activation::relu);
  // An empty batch takes the statements and gives an empty output.
  CHECK(fx::tensor<float>(layer(fx::zeros<float>({0, 6, 3}))).shape() == fx::shape{0, 6, 4});
}

TEST_CASE("simple_rnn: bidirectional is its two halves, the backward one on the reversed input") {
  fx::random::generator gen{65};
  nn::bidirectional<nn::simple_rnn<3, true, double>> bi;
  bi.build(fx::shape{4, 2}, gen);
  CHECK(bi.backward_layer().name() == "backward_simple_rnn");
  const fx::tensor<double> x = fx::random::normal<double>({2, 4, 2}, gen);
  const fx::tensor<double> f = bi.forward_layer()(x);
  const fx::tensor<double> b = nn::detail::reverse_time(
      fx::tensor<double>(bi.backward_layer()(fx::tensor<double>(nn::detail::reverse_time(x)))));
  test::check_close(fx::tensor<double>(bi(x)).to_vector(), fx::tensor<double>(fx::concat({f, b}, 2)).to_vector(),
                    1e-14, 1e-14);
  auto report = fx::testing::check_gradients([&](const auto& xi) { return bi(xi); }, reverse_only, x);
  CHECK_MESSAGE(report.ok, report.report);
}

TEST_CASE("simple_rnn: a compiled training step equals the tape-based step, bitwise") {
  auto make = [] {
    fx::random::generator g{66};
    return nn::sequential(g, nn::input<5, 4>{}, nn::simple_rnn<6, true>{},
                          nn::bidirectional<nn::simple_rnn<3>>{}, nn::dense<2>{});
  };
  auto a = make(), b = make();
  const fx::tensor<float> x = fx::random::normal<float>({3, 5, 4}, fx::random::global_generator());
  compiled_check::against_tape(a, b, x, fx::tensor<std::int32_t>{0, 1, 1}, 3);
}

TEST_CASE("simple_rnn: training steps learn to tell a rising sequence from a falling one, with tanh and with relu") {
  // 64 sequences of 6 steps, each rising or falling from a random start: the last state must tell.
  // With relu, Le, Jaitly and Hinton's IRNN: an identity recurrent kernel.
  for (const bool relu : {false, true}) {
    CAPTURE(relu);
    fx::random::generator gen{67};
    std::vector<float> xs;
    std::vector<std::int32_t> ys;
    for (int n = 0; n < 64; ++n) {
      const float start = static_cast<float>(fx::random::uniform<double>({1}, gen).item()), dir = n % 2 ? 0.3f : -0.3f;
      for (int t = 0; t < 6; ++t) xs.push_back(start + dir * static_cast<float>(t));
      ys.push_back(n % 2);
    }
    const fx::tensor<float> x = fx::from_vector(xs, {64, 6, 1});
    const fx::tensor<std::int32_t> y = fx::from_vector(ys, {64});
    const nn::recurrent_options options =
        relu ? nn::recurrent_options{.activation = nn::rnn_activation::relu,
                                     .recurrent_initializer = nn::initializers::identity()}
             : nn::recurrent_options{};
    auto net = nn::sequential(gen, nn::input<6, 1>{}, nn::simple_rnn<8>{options}, nn::dense<2>{});
    fx::optim::adam opt{0.02};
    auto loss_fn = [](const auto& logits, const auto& labels) {
      return fx::losses::sparse_softmax_cross_entropy(logits, labels);
    };
    const float before = fx::tensor<float>(loss_fn(net(x), y)).item();
    for (int step = 0; step < 60; ++step) compiled_check::tape_step(net, opt, loss_fn, x, y);
    const float after = fx::tensor<float>(loss_fn(net(x), y)).item();
    CHECK(after < 0.2f * before);
    const auto predicted = fx::tensor<std::int64_t>(fx::argmax(net(x), 1)).to_vector();
    CHECK(predicted == std::vector<std::int64_t>(ys.begin(), ys.end()));
  }
}

}  // namespace simple_rnn_test
