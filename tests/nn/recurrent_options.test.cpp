// Keras's recurrent layer arguments beyond masks and states: go_backwards (the layer on the
// time-reversed input and mask, its outputs in that order: against the same layer on the reversed
// input), dropout (one mask per sequence over the input's features, in training only: against the
// same layer on the input times a mask drawn from the same seed; replayed inside a
// recompute_scope; gradients against finite differences there), recurrent_dropout (the step reads
// h * mask: against a naive LSTM, GRU and SimpleRNN that do so, with the mask drawn from the layer's stream;
// gradients against finite differences), options carried into a double
// model and a bidirectional's backward copy, the mask after a go_backwards tagger, and the errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../test_util.hpp"
#include "compiled_check.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace recurrent_options_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

constexpr fx::index_t batch = 3, steps = 5, features = 4;

/// `to`'s variables set to `from`'s.
template <class A, class B>
void copy_variables(A& to, B& from) {
  to.kernel().assign(from.kernel().peek());
  to.recurrent_kernel().assign(from.recurrent_kernel().peek());
  to.bias().assign(from.bias().peek());
}

fx::tensor<bool> padding_mask() {
  const std::vector<std::int32_t> keep{1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 1, 1, 0, 1};
  return fx::tensor<bool>(fx::from_vector(keep, {batch, steps}) != 0);
}

template <class Layer>
void check_go_backwards() {
  fx::random::generator gen{21};
  using plain_t = typename Layer::template rebind<double>;
  plain_t plain, backwards{{.go_backwards = true}};
  plain.build(fx::shape{steps, features}, gen);
  backwards.build(fx::shape{steps, features}, gen);
  copy_variables(backwards, plain);
  const auto x = fx::random::normal<double>({batch, steps, features}, gen);
  const fx::tensor<double> reversed = nn::detail::reverse_time(x);
  // Keras's go_backwards: the reversed sequence in, the outputs in that order (not reversed back).
  test::check_close(backwards(x).to_vector(), plain(reversed).to_vector(), 1e-12);
  const auto with = backwards.call_with_state(x);
  const auto want = plain.call_with_state(reversed);
  for (std::size_t i = 0; i < with.size(); ++i) test::check_close(with[i].to_vector(), want[i].to_vector(), 1e-12);
  // A mask is reversed with the input.
  const fx::tensor<bool> m = padding_mask();
  const fx::tensor<bool> m_reversed = nn::detail::reverse_time(m);
  test::check_close(backwards(x, m).to_vector(), plain.call(reversed, {.mask = &m_reversed}).to_vector(), 1e-12);
  CHECK(backwards.output_mask(m).to_vector() == m_reversed.to_vector());
  // Gradients with respect to the input against finite differences.
  const fx::testing::check_options reverse_only{.reverse = true, .forward = false};
  auto report = fx::testing::check_gradients([&](const auto& xi) { return backwards(xi, m); }, reverse_only, x);
  CHECK_MESSAGE(report.ok, report.report);
}

template <class Layer>
void check_dropout() {
  fx::random::generator gen{22};
  using plain_t = typename Layer::template rebind<double>;
  const double rate = 0.4;
  plain_t plain, dropped{{.dropout = rate, .seed = 9}};
  plain.build(fx::shape{steps, features}, gen);
  dropped.build(fx::shape{steps, features}, gen);
  copy_variables(dropped, plain);
  const auto x = fx::random::normal<double>({batch, steps, features}, gen);
  // Inference: no dropout.
  test::check_close(dropped(x).to_vector(), plain(x).to_vector(), 1e-12);
  // Training: the input times one mask per (example, feature), the same at every step, drawn from
  // the seed's stream as nn::dropout draws it.
  fx::random::generator same{9};
  const fx::tensor<double> u = fx::random::uniform<double>({batch, 1, features}, same);
  const fx::tensor<double> keep = fx::where(u >= rate, fx::full<double>({batch, 1, features}, 1 / (1 - rate)), 0.0);
  const fx::tensor<double> y = dropped(x, /*training=*/true);
  test::check_close(y.to_vector(), plain(fx::tensor<double>(x * keep)).to_vector(), 1e-12);
  const auto kept = keep.to_vector();
  CHECK(std::count(kept.begin(), kept.end(), 0.0) > 0);
  CHECK(std::count(kept.begin(), kept.end(), 0.0) < static_cast<long>(kept.size()));
  // The next training call draws a new mask; a recompute_scope replays the last one.
  const fx::tensor<double> y2 = dropped(x, true);
  CHECK(y2.to_vector() != y.to_vector());
  {
    nn::recompute_scope replay;
    test::check_close(dropped(x, true).to_vector(), y2.to_vector(), 1e-15);
    // With the mask fixed, the gradients against finite differences.
    const fx::testing::check_options reverse_only{.reverse = true, .forward = false};
    auto report = fx::testing::check_gradients([&](const auto& xi) { return dropped(xi, true); }, reverse_only, x);
    CHECK_MESSAGE(report.ok, report.report);
  }
  // call and call_with_state take the training flag too.
  fx::random::generator again{9};
  plain_t replayed{{.dropout = rate, .seed = 9}};
  replayed.build(fx::shape{steps, features}, gen);
  copy_variables(replayed, plain);
  test::check_close(replayed.call_with_state(x, true)[0].to_vector(), y.to_vector(), 1e-12);
}

double sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

/// Keras's LSTM (gates = 4), GRU (gates = 3, reset_after) or SimpleRNN (gates = 1) step by step from
/// zero states, with recurrent dropout: the step reads h * keep[n] in place of the previous h (the
/// LSTM's and the SimpleRNN's product; the GRU's product and its z h term). Every output, (batch, time, units) row-major.
std::vector<double> naive_recurrent(int gates, const std::vector<double>& x, const std::vector<double>& k,
                                    const std::vector<double>& r, const std::vector<double>& b,
                                    const std::vector<double>& keep, std::size_t units) {
  const std::size_t g = static_cast<std::size_t>(gates) * units, b_n = batch, t_n = steps, f_n = features;
  std::vector<double> out(b_n * t_n * units);
  for (std::size_t n = 0; n < b_n; ++n) {
    std::vector<double> h(units, 0.0), c(units, 0.0);
    for (std::size_t t = 0; t < t_n; ++t) {
      std::vector<double> hr(units);
      for (std::size_t u = 0; u < units; ++u) hr[u] = h[u] * keep[n * units + u];
      // Input part xz (with the input bias) and recurrent part hz (the GRU's with its recurrent bias).
      std::vector<double> xz(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(g)), hz(g, 0.0);
      if (gates == 3) hz.assign(b.begin() + static_cast<std::ptrdiff_t>(g), b.end());
      for (std::size_t j = 0; j < g; ++j) {
        for (std::size_t i = 0; i < f_n; ++i) xz[j] += x[(n * t_n + t) * f_n + i] * k[i * g + j];
        for (std::size_t i = 0; i < units; ++i) hz[j] += hr[i] * r[i * g + j];
      }
      for (std::size_t u = 0; u < units; ++u) {
        if (gates == 4) {
          const auto z = [&](std::size_t q) { return xz[q * units + u] + hz[q * units + u]; };
          c[u] = sigmoid(z(1)) * c[u] + sigmoid(z(0)) * std::tanh(z(2));
          h[u] = sigmoid(z(3)) * std::tanh(c[u]);
        } else if (gates == 1) {
          h[u] = std::tanh(xz[u] + hz[u]);
        } else {
          const double zg = sigmoid(xz[u] + hz[u]), reset = sigmoid(xz[units + u] + hz[units + u]);
          h[u] = zg * hr[u] + (1 - zg) * std::tanh(xz[2 * units + u] + reset * hz[2 * units + u]);
        }
        out[(n * t_n + t) * units + u] = h[u];
      }
    }
  }
  return out;
}

template <class Layer>
void check_recurrent_dropout() {
  fx::random::generator gen{23};
  using layer_t = typename Layer::template rebind<double>;
  const double rate = 0.5;
  layer_t layer{{.recurrent_dropout = rate, .seed = 11}}, plain;
  layer.build(fx::shape{steps, features}, gen);
  plain.build(fx::shape{steps, features}, gen);
  copy_variables(plain, layer);
  const auto x = fx::random::normal<double>({batch, steps, features}, gen);
  // Inference: none.
  test::check_close(layer(x).to_vector(), plain(x).to_vector(), 1e-12);
  // Training: the mask from the layer's recurrent stream, as nn::dropout draws it.
  fx::random::generator stream{nn::detail::recurrent_dropout_seed(11)};
  const fx::tensor<double> u = fx::random::uniform<double>({batch, Layer::units}, stream);
  const fx::tensor<double> keep = fx::where(u >= rate, fx::full<double>({batch, Layer::units}, 1 / (1 - rate)), 0.0);
  const auto kept = keep.to_vector();
  CHECK(std::count(kept.begin(), kept.end(), 0.0) > 0);
  const int gates = static_cast<int>(layer.kernel().shape()[1] / Layer::units);
  const auto want = naive_recurrent(gates, x.to_vector(), layer.kernel().peek().to_vector(),
                                    layer.recurrent_kernel().peek().to_vector(), layer.bias().peek().to_vector(), kept,
                                    static_cast<std::size_t>(Layer::units));
  const fx::tensor<double> y = layer(x, /*training=*/true);
  const auto got = y.to_vector();
  if constexpr (Layer::return_sequences) {
    test::check_close(got, want, 1e-12);
  } else {  // the last step of each row
    std::vector<double> last;
    for (fx::index_t n = 0; n < batch; ++n)
      for (fx::index_t v = 0; v < Layer::units; ++v)
        last.push_back(want[static_cast<std::size_t>((n * steps + steps - 1) * Layer::units + v)]);
    test::check_close(got, last, 1e-12);
  }
  CHECK(got != plain(x).to_vector());
  // With the mask replayed, the gradients with respect to the input and the recurrent kernel.
  nn::recompute_scope replay;
  const fx::testing::check_options reverse_only{.reverse = true, .forward = false};
  auto report = fx::testing::check_gradients(
      [&](const auto& xi, const auto& ri) {
        layer.recurrent_kernel().assign(ri);
        return layer(xi, true);
      },
      reverse_only, x, fx::tensor<double>(layer.recurrent_kernel().peek()));
  CHECK_MESSAGE(report.ok, report.report);
}

}  // namespace

TEST_CASE("recurrent layers: recurrent_dropout masks the state each step reads, as Keras's cells") {
  check_recurrent_dropout<nn::lstm<3, true>>();
  check_recurrent_dropout<nn::lstm<3>>();
  check_recurrent_dropout<nn::gru<2, true>>();
  check_recurrent_dropout<nn::simple_rnn<3, true>>();
  check_recurrent_dropout<nn::simple_rnn<2>>();
}

TEST_CASE("recurrent layers: go_backwards reads the sequence from its end, as Keras's") {
  check_go_backwards<nn::lstm<3>>();
  check_go_backwards<nn::lstm<3, true>>();
  check_go_backwards<nn::gru<2>>();
  check_go_backwards<nn::gru<2, true>>();
  check_go_backwards<nn::simple_rnn<3>>();
  check_go_backwards<nn::simple_rnn<3, true>>();
}

TEST_CASE("recurrent layers: dropout drops input features with one mask per sequence, in training only") {
  check_dropout<nn::lstm<3>>();
  check_dropout<nn::gru<2, true>>();
  check_dropout<nn::simple_rnn<3, true>>();
}

TEST_CASE("recurrent layers: options carry into another element type and a bidirectional's backward copy") {
  auto net = nn::sequential(nn::typed_input<double, steps, features>{},
                            nn::lstm<3, true>{{.dropout = 0.25, .go_backwards = true, .seed = 4}},
                            nn::bidirectional<nn::gru<2>>{nn::gru<2>{{.dropout = 0.5, .seed = 7}}});
  CHECK(net.layer<0>().options().dropout == 0.25);
  CHECK(net.layer<0>().options().go_backwards);
  CHECK(net.layer<0>().options().seed == 4);
  CHECK(net.layer<1>().forward_layer().options().dropout == 0.5);
  CHECK(net.layer<1>().forward_layer().options().seed == 7);
  CHECK(net.layer<1>().backward_layer().options().dropout == 0.5);
  CHECK(net.layer<1>().backward_layer().options().seed == 8);  // a mask of its own
  CHECK(net.layer<1>().backward_layer().name() == "backward_gru");
  const auto x = fx::random::normal<double>({batch, steps, features}, fx::random::global_generator());
  CHECK(net(x).shape() == fx::shape{batch, 4});
  CHECK(net(x, true).shape() == fx::shape{batch, 4});
  // A tagger reading backwards gives the mask on in the order of its outputs.
  auto tagger = nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{},
                               nn::lstm<5, true>{{.go_backwards = true}}, nn::dense<3>{});
  const fx::tensor<std::int32_t> ids = fx::from_vector(std::vector<std::int32_t>{3, 7, 2, 0, 0, 0, 4, 1, 0, 0, 0, 0}, {2, 6});
  const auto out = tagger.output_and_mask(ids);
  const std::vector<bool> want{false, false, false, true, true, true, false, false, false, false, true, true};
  const auto got = out.mask.to_vector();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(bool(got[i]) == want[i]);
}

TEST_CASE("recurrent layers: a dropout outside [0, 1) and a bidirectional of a go_backwards layer throw") {
  CHECK_THROWS_WITH_AS(nn::lstm<3>({.dropout = 1.0}), "lstm 'lstm': dropout = 1 is not in [0, 1)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((nn::gru<3>{{.dropout = -0.1}, "encoder"}), "gru 'encoder': dropout = -0.1 is not in [0, 1)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((nn::lstm<3>{{.recurrent_dropout = 1.5}}), "lstm 'lstm': recurrent_dropout = 1.5 is not in [0, 1)",
                       fx::invalid_argument);
  CHECK_THROWS_AS(nn::bidirectional<nn::lstm<3>>{nn::lstm<3>{{.go_backwards = true}}}, fx::invalid_argument);
}

TEST_CASE("recurrent layers: a compiled step replays the dropout masks: the tape-based step's numbers") {
  auto make = [] {
    fx::random::generator g{85};
    return nn::sequential(g, nn::input<steps, features>{}, nn::lstm<4, true>{{.dropout = 0.3, .recurrent_dropout = 0.2, .seed = 2}},
                          nn::gru<3>{{.dropout = 0.2, .go_backwards = true, .seed = 3}}, nn::dense<2>{});
  };
  auto a = make(), b = make();
  const fx::tensor<float> x = fx::random::normal<float>({batch, steps, features}, fx::random::global_generator());
  // Bitwise: a mask that was not replayed would differ in the first digits.
  compiled_check::against_tape(a, b, x, fx::tensor<std::int32_t>{0, 1, 1}, 3);
}

}  // namespace recurrent_options_test
