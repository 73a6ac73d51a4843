// fx::nn::lstm and fx::nn::gru against PyTorch's LSTM and GRU (float; weights converted to Keras's
// layout), returning the last state and the whole sequence: outputs and the gradients with respect
// to the input, kernel, recurrent kernel and bias (tests/fixtures/nn/make_fixtures_norm_lstm.py),
// through the statements and through the fused cell; and from an initial state, with the final
// states (call_with_state).
#include <optional>

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

TEST_CASE_TEMPLATE("lstm, gru: forward and backward equal PyTorch's", L, nn::lstm<5, false>, nn::lstm<5, true>,
                   nn::gru<5, false>, nn::gru<5, true>) {
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
    CHECK(nested ? entries > 3 * 4 : entries < 6);  // three or more statements a step (4 steps), or one entry
    peer::check_close(y, peer::load(prefix + "_y"), "y");
    peer::check_close(dx, peer::load(prefix + "_dx"), "d x");
    peer::check_close(g[0], peer::load(prefix + "_dkernel"), "d kernel");
    peer::check_close(g[1], peer::load(prefix + "_drecurrent_kernel"), "d recurrent kernel");
    peer::check_close(g[2], peer::load(prefix + "_dbias"), "d bias");
  }
}

TEST_CASE_TEMPLATE("lstm, gru: from an initial state, the sequence, the final states and every gradient equal "
                   "PyTorch's",
                   L, nn::lstm<5, true>, nn::gru<5, true>) {
  // Keras's initial_state and return_state (call_with_state) against PyTorch's LSTM(x, (h0, c0)) and
  // GRU(x, h0): the loss sum(y * w) + sum(h * w_h) (+ sum(c * w_c)) and its gradients with respect
  // to x, the initial states and the variables.
  const std::string name = std::string(L::base_name) + "_state";
  constexpr bool lstm = L::state_count == 2;
  L layer;
  load_variables(layer, name);
  const fx::tensor<float> x = peer::load(name + "_x");
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
    const auto out = layer.call_with_state(x, initial);
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
