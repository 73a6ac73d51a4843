// What nn/recurrent.hpp gives every recurrent layer: Keras's initial_state and return_state
// (call_with_state) for nn::lstm, nn::gru and nn::simple_rnn. The final states are checked against the output and
// against a sequence cut in two (the second half started from the first half's final states gives
// the whole sequence's outputs and states); the gradients with respect to the input, the initial
// states and every variable, through the output and the final states, against finite differences
// (double), on the fused sequence (one tape) and on the statements (nested tapes), which must also
// agree with each other; and the shape errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <array>
#include <optional>
#include <vector>

#include "../test_util.hpp"
#include "recurrent_gradients.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

template <class L>
constexpr std::size_t states = L::state_count;

template <class L>
using state_t = typename L::state_type;

/// Random initial states for layer L at this batch.
template <class L>
state_t<L> random_state(fx::index_t batch, fx::random::generator& gen) {
  state_t<L> s;
  for (auto& t : s) t = fx::random::normal<double>({batch, L::units}, gen, 0.0, 0.7);
  return s;
}

std::vector<double> flat(const fx::tensor<double>& t) { return t.to_vector(); }

}  // namespace

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: call_with_state gives the output and the final states, and an initial state continues "
                   "a sequence",
                   L, nn::lstm<4, false, double>, nn::lstm<4, true, double>, nn::gru<4, false, double>,
                   nn::gru<4, true, double>, nn::simple_rnn<4, false, double>, nn::simple_rnn<4, true, double>) {
  fx::random::generator gen{41};
  L layer;
  layer.build(fx::shape{5, 3}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 5, 3}, gen);
  for (const bool taped : {false, true}) {  // inference, and the fused sequence under a tape
    CAPTURE(taped);
    std::optional<fx::gradient_tape> tape;
    if (taped) tape.emplace();
    const auto whole = layer.call_with_state(x);
    REQUIRE(whole.size() == 1 + states<L>);
    // The output is operator()'s; the final h is the output's last step.
    test::check_close(flat(whole[0]), flat(fx::tensor<double>(layer(x))), 1e-15);
    const fx::tensor<double> last_h = L::return_sequences
                                          ? fx::tensor<double>(fx::reshape(fx::slice(whole[0], {0, 4, 0}, {2, 1, 4}), {2, 4}))
                                          : whole[0];
    test::check_close(flat(whole[1]), flat(last_h), 1e-15);
    for (std::size_t i = 1; i <= states<L>; ++i) CHECK(whole[i].shape() == fx::shape{2, 4});

    // Steps 0-1, then steps 2-4 from their final states: the whole sequence's outputs and states.
    const auto head = layer.call_with_state(fx::tensor<double>(fx::slice(x, {0, 0, 0}, {2, 2, 3})));
    state_t<L> carried;
    for (std::size_t i = 0; i < states<L>; ++i) carried[i] = head[i + 1];
    const auto tail = layer.call_with_state(fx::tensor<double>(fx::slice(x, {0, 2, 0}, {2, 3, 3})), carried);
    for (std::size_t i = 1; i <= states<L>; ++i) test::check_close(flat(tail[i]), flat(whole[i]), 1e-13);
    if constexpr (L::return_sequences)
      test::check_close(flat(fx::tensor<double>(fx::concat({head[0], tail[0]}, 1))), flat(whole[0]), 1e-13);
    else
      test::check_close(flat(tail[0]), flat(whole[0]), 1e-13);
  }
}

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: gradients through the final states and from the initial states against finite "
                   "differences",
                   L, nn::lstm<3, false, double>, nn::lstm<3, true, double>, nn::gru<3, false, double>,
                   nn::gru<3, true, double>, nn::simple_rnn<3, false, double>, nn::simple_rnn<3, true, double>) {
  fx::random::generator gen{42};
  L layer;
  layer.build(fx::shape{4, 2}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 4, 2}, gen);
  const state_t<L> s0 = random_state<L>(2, gen);
  const fx::tensor<double> k = layer.kernel().peek(), r = layer.recurrent_kernel().peek();
  const fx::tensor<double> b = fx::random::normal<double>(layer.bias().shape(), gen, 0.0, 0.5);
  auto set = [&](const fx::tensor<double>& ki, const fx::tensor<double>& ri, const fx::tensor<double>& bi) {
    layer.kernel().assign(ki);
    layer.recurrent_kernel().assign(ri);
    layer.bias().assign(bi);
  };
  const fx::testing::gradient_report report = recurrent_gradients::states_and_variables(
      layer, [&](const auto& xi, const auto& initial) { return layer.call_with_state(xi, initial); }, x, s0, k, r, b);
  CHECK_MESSAGE(report.ok, report.report);

  // The fused sequence (one tape) and the statements (nested tapes) give the same gradients; from
  // zero states (no initial state) too, and with only a final state's gradient asked for.
  set(k, r, b);
  for (const bool from_zero : {false, true}) {
    for (const bool state_only : {false, true}) {
      CAPTURE(from_zero);
      CAPTURE(state_only);
      recurrent_gradients::fused_against_statements(layer, x, from_zero ? nullptr : &s0, [&] {
        const auto out = from_zero ? layer.call_with_state(x) : layer.call_with_state(x, s0);
        fx::tensor<double> loss = fx::reduce_sum(fx::square(out[states<L>]) + out[1]);
        if (!state_only) loss = loss + fx::reduce_sum(fx::square(out[0] - 0.25) + out[0]);
        return loss;
      });
    }
  }
}

TEST_CASE("lstm, gru: an encoder's final states start a decoder, and the loss reaches the encoder's variables") {
  // Keras's sequence-to-sequence pattern: encoder = LSTM(return_state=True), decoder =
  // LSTM(return_sequences=True)(y, initial_state=[h, c]).
  fx::random::generator gen{43};
  nn::lstm<6> encoder;
  nn::lstm<6, true> decoder;
  nn::gru<6> gru_encoder;
  nn::gru<6, true> gru_decoder;
  const fx::tensor<float> x = fx::random::normal<float>({3, 7, 4}, gen), y = fx::random::normal<float>({3, 5, 2}, gen);
  fx::gradient_tape tape{fx::persistent};
  auto [encoded, h, c] = encoder.call_with_state(x);
  auto [decoded, h2, c2] = decoder.call_with_state(y, {h, c});
  auto [gru_encoded, gh] = gru_encoder.call_with_state(x);
  auto [gru_decoded, gh2] = gru_decoder.call_with_state(y, {gh});
  CHECK(decoded.shape() == fx::shape{3, 5, 6});
  CHECK(gru_decoded.shape() == fx::shape{3, 5, 6});
  const fx::tensor<float> loss = fx::reduce_mean(fx::square(decoded)) + fx::reduce_mean(fx::square(gru_decoded));
  auto connected = [](const std::vector<fx::tensor<float>>& gradients) {
    REQUIRE(gradients.size() == 3);
    for (const auto& g : gradients) {
      REQUIRE(g.size() > 0);  // not the empty tensor of a variable the loss does not depend on
      CHECK(fx::reduce_max(fx::abs(g)).item() > 0.f);
    }
  };
  connected(tape.gradient(loss, encoder.trainable_variables()));
  connected(tape.gradient(loss, gru_encoder.trainable_variables()));
  connected(tape.gradient(loss, decoder.trainable_variables()));
}

TEST_CASE("lstm, gru: an initial state of the wrong shape is an error that names the layer and the shapes") {
  fx::random::generator gen{44};
  nn::lstm<4> lstm;
  nn::gru<4> gru;
  const fx::tensor<float> x = fx::random::normal<float>({2, 3, 5}, gen);
  const fx::tensor<float> good = fx::zeros<float>({2, 4}), bad = fx::zeros<float>({3, 4});
  CHECK_THROWS_WITH_AS((lstm.call_with_state(x, {good, bad})),
                       "lstm 'lstm': initial_state[1] must be (batch, units) = (2, 4) for input (2, 3, 5), got (3, 4)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS((gru.call_with_state(x, {fx::zeros<float>({2, 5})})),
                       "gru 'gru': initial_state[0] must be (batch, units) = (2, 4) for input (2, 3, 5), got (2, 5)",
                       fx::shape_error);
  // The layer is unchanged: a good call still works.
  CHECK(lstm.call_with_state(x, {good, good})[0].shape() == fx::shape{2, 4});
}
