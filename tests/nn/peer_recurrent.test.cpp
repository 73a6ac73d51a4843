// fx::nn::lstm, fx::nn::gru and fx::nn::simple_rnn against PyTorch's LSTM, GRU and RNN (float;
// weights converted to Keras's layout), returning the last state and the whole sequence: outputs and the gradients with respect
// to the input, kernel, recurrent kernel and bias (tests/fixtures/nn/make_fixtures_norm_lstm.py),
// through the statements and through the fused cell; from an initial state, with the final states
// (call_with_state); and with Keras's mask against PyTorch's packed sequences
// (tests/fixtures/nn/make_fixtures_masked_rnn.py; the SimpleRNN's cases from
// tests/fixtures/nn/make_fixtures_recurrent.py); the SimpleRNN with relu against nn.RNN's
// nonlinearity "relu".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
/// Builds `layer` for (4 steps, 3 features) and gives it the fixture's variables `name`_kernel ...
template <class L>
void load_variables(L& layer, const std::string& name) {
  layer.build(fx::shape{4, 3});
  layer.kernel().assign(peer::load(name + "_kernel"));
  layer.recurrent_kernel().assign(peer::load(name + "_recurrent_kernel"));
  layer.bias().assign(peer::load(name + "_bias"));
}
}  // namespace

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: forward and backward equal PyTorch's", L, nn::lstm<5, false>,
                   nn::lstm<5, true>, nn::gru<5, false>, nn::gru<5, true>, nn::simple_rnn<5, false>,
                   nn::simple_rnn<5, true>) {
  const std::string name = L::base_name, prefix = name + (L::return_sequences ? "_seq" : "_last");
  L layer;
  load_variables(layer, name);
  const fx::tensor<float> x = peer::load(name + "_x");
  // Under two tapes (nested, as for second derivatives) the steps are statements; under one tape
  // the sequence is one entry over the fused cell (nn/lstm_cell.hpp, nn/gru_cell.hpp). Both against
  // PyTorch.
  for (const bool nested : {true, false}) {
    CAPTURE(nested);
    std::optional<fx::gradient_tape> outer;
    if (nested) outer.emplace(fx::persistent);
    fx::tensor<float> y, dx;
    std::vector<fx::tensor<float>> g;
    std::size_t entries = 0;
    for (int pass = 0; pass < 2; ++pass) {  // a one-shot tape answers once: dx, then the variables
      fx::gradient_tape tape;
      tape.watch(x);
      y = layer(x);
      fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
      entries = tape.entries();
      if (pass == 0) dx = tape.gradient(s, x);
      else g = tape.gradient(s, layer.trainable_variables());
    }
    // Three or more statements a step (4 steps; the SimpleRNN's two), or one entry.
    constexpr std::size_t per_step = std::string_view(L::base_name) == "simple_rnn" ? 2 : 3;
    CHECK((nested ? entries > per_step * 4 : entries < 6));
    peer::check_close(y, peer::load(prefix + "_y"), "y");
    peer::check_close(dx, peer::load(prefix + "_dx"), "d x");
    peer::check_close(g[0], peer::load(prefix + "_dkernel"), "d kernel");
    peer::check_close(g[1], peer::load(prefix + "_drecurrent_kernel"), "d recurrent kernel");
    peer::check_close(g[2], peer::load(prefix + "_dbias"), "d bias");
  }
}

namespace {

/// Layer L from the fixture `name`'s variables and initial states (and, with `masked`, the mask
/// "step < length" of its lengths) through call_with_state, under nested tapes (the statements)
/// and under one (the fused sequence): the sequence, the final states, and the gradients of
/// sum(y * w) + sum(h * w_h) (+ sum(c * w_c)) with respect to x, the initial states and the
/// variables, against PyTorch's. options: the layer's (the SimpleRNN's activation).
template <class L>
void check_from_initial_state(const std::string& name, bool masked, const nn::recurrent_options& options = {}) {
  constexpr bool lstm = L::state_count == 2;
  L layer{options};
  load_variables(layer, name);
  const fx::tensor<float> x = peer::load(name + "_x");
  fx::tensor<bool> mask;
  if (masked) {
    const auto lengths = fx::io::load_npy<std::int32_t>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/nn/" + name +
                                                        "_lengths.npy")
                             .to_vector();
    const fx::index_t batch = x.shape()[0], time = x.shape()[1];
    std::vector<std::int32_t> keep;
    for (fx::index_t b = 0; b < batch; ++b)
      for (fx::index_t t = 0; t < time; ++t) keep.push_back(t < lengths[static_cast<std::size_t>(b)] ? 1 : 0);
    mask = fx::tensor<bool>(fx::from_vector(keep, {batch, time}) != 0);
  }
  typename L::state_type initial;
  initial[0] = peer::load(name + "_h0");
  if constexpr (lstm) initial[1] = peer::load(name + "_c0");
  for (const bool nested : {true, false}) {  // the statements, then the fused sequence
    CAPTURE(nested);
    std::optional<fx::gradient_tape> outer;
    if (nested) outer.emplace(fx::persistent);
    fx::gradient_tape tape{fx::persistent};
    tape.watch(x);
    for (const auto& s : initial) tape.watch(s);
    const auto out = masked ? layer.call_with_state(x, {.mask = &mask, .initial_state = &initial})
                            : layer.call_with_state(x, initial);
    fx::tensor<float> loss = fx::reduce_sum(out[0] * peer::load(name + "_w")) +
                             fx::reduce_sum(out[1] * peer::load(name + "_w_h"));
    if constexpr (lstm) loss = loss + fx::reduce_sum(out[2] * peer::load(name + "_w_c"));
    peer::check_close(out[0], peer::load(name + "_y"), "y");
    peer::check_close(out[1], peer::load(name + "_h"), "final h");
    if constexpr (lstm) peer::check_close(out[2], peer::load(name + "_c"), "final c");
    peer::check_close(tape.gradient(loss, x), peer::load(name + "_dx"), "d x");
    peer::check_close(tape.gradient(loss, initial[0]), peer::load(name + "_dh0"), "d h0");
    if constexpr (lstm) peer::check_close(tape.gradient(loss, initial[1]), peer::load(name + "_dc0"), "d c0");
    const auto g = tape.gradient(loss, layer.trainable_variables());
    peer::check_close(g[0], peer::load(name + "_dkernel"), "d kernel");
    peer::check_close(g[1], peer::load(name + "_drecurrent_kernel"), "d recurrent kernel");
    peer::check_close(g[2], peer::load(name + "_dbias"), "d bias");
  }
}

}  // namespace

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: from an initial state, the sequence, the final states and every "
                   "gradient equal PyTorch's",
                   L, nn::lstm<5, true>, nn::gru<5, true>, nn::simple_rnn<5, true>) {
  // Keras's initial_state and return_state (call_with_state) against PyTorch's LSTM(x, (h0, c0)) and
  // GRU(x, h0).
  check_from_initial_state<L>(std::string(L::base_name) + "_state", false);
}

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: a masked batch equals PyTorch's packed sequence (pack_padded_sequence)",
                   L, nn::lstm<5, true>, nn::gru<5, true>, nn::simple_rnn<5, true>) {
  // Keras's mask "step < length" for right-padded examples of lengths 4, 1 and 3 against PyTorch's
  // packed sequence from initial states: the padded output (zeros at padding) and the final states
  // (each example's after its last step).
  check_from_initial_state<L>(std::string(L::base_name) + "_masked", true);
}

TEST_CASE("simple_rnn with activation relu: from an initial state, and masked, equals PyTorch's nn.RNN with "
          "nonlinearity \"relu\"") {
  // Keras's SimpleRNN(activation="relu"): the statements and the fused sequence, every output and
  // gradient, with and without a mask.
  const nn::recurrent_options relu{.activation = nn::rnn_activation::relu};
  check_from_initial_state<nn::simple_rnn<5, true>>("simple_rnn_relu_state", false, relu);
  check_from_initial_state<nn::simple_rnn<5, true>>("simple_rnn_relu_masked", true, relu);
}
