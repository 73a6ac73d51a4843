// Keras's mask for nn::lstm, nn::gru, nn::simple_rnn and nn::bidirectional (`rnn.call(x, {.mask = &m})`), and
// nn::embedding::compute_mask. The reference is independent of the mask's code: each example run
// alone on only the steps its mask keeps (a row with holes as well as right padding), from which
// the masked batch's final states, last output and every-step output (zeros where skipped) follow.
// Gradients with a mask against finite differences (double), the fused sequence (one tape) against
// the statements (nested tapes), and the errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "../test_util.hpp"
#include "recurrent_gradients.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

// Rows with right padding, left padding, holes, every step, and no step at all.
constexpr fx::index_t batch = 5, steps = 6, features = 3;
const std::vector<std::vector<bool>> masks = {{1, 1, 1, 1, 0, 0}, {0, 0, 1, 1, 1, 1}, {1, 0, 1, 1, 0, 1},
                                              {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}};

fx::tensor<bool> mask_tensor() {
  std::vector<std::int32_t> flat;
  for (const auto& row : masks)
    for (bool keep : row) flat.push_back(keep ? 1 : 0);
  return fx::tensor<bool>(fx::from_vector(flat, {batch, steps}) != 0);
}

/// Example b of x, only the steps its mask keeps: (1, kept, features).
fx::tensor<double> kept_steps(const fx::tensor<double>& x, fx::index_t b) {
  const auto v = x.to_vector();
  std::vector<double> out;
  for (fx::index_t t = 0; t < steps; ++t)
    if (masks[b][t])
      for (fx::index_t f = 0; f < features; ++f) out.push_back(v[(b * steps + t) * features + f]);
  return fx::from_vector(out, {1, static_cast<fx::index_t>(out.size()) / features, features});
}

/// A built layer L, an input (batch, steps, features) and initial states, drawn from `seed`.
template <class L>
struct drawn {
  fx::random::generator gen;
  L layer;
  fx::tensor<double> x;
  typename L::state_type s0;
  explicit drawn(std::uint64_t seed) : gen{seed} {
    layer.build(fx::shape{steps, features}, gen);
    x = fx::random::normal<double>({batch, steps, features}, gen);
    for (auto& s : s0) s = fx::random::normal<double>({batch, L::units}, gen, 0.0, 0.7);
  }
};

/// Row b of a (batch, units) state.
template <class L>
typename L::state_type row_state(const typename L::state_type& s, fx::index_t b) {
  typename L::state_type out;
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = fx::tensor<double>(fx::slice(s[i], {b, 0}, {1, L::units}));
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: a masked batch is each example run alone on the steps its mask keeps", L,
                   nn::lstm<4, false, double>, nn::lstm<4, true, double>, nn::gru<4, false, double>,
                   nn::gru<4, true, double>, nn::simple_rnn<4, false, double>, nn::simple_rnn<4, true, double>) {
  drawn<L> d(51);
  auto& layer = d.layer;
  const fx::tensor<double>& x = d.x;
  const typename L::state_type& s0 = d.s0;
  const fx::tensor<bool> m = mask_tensor();
  for (const bool taped : {false, true}) {  // inference, and the fused sequence under a tape
    for (const bool from_initial : {false, true}) {
      CAPTURE(taped);
      CAPTURE(from_initial);
      std::optional<fx::gradient_tape> tape;
      if (taped) tape.emplace();
      const auto got = from_initial ? layer.call_with_state(x, {.mask = &m, .initial_state = &s0})
                                    : layer.call_with_state(x, {.mask = &m});
      // call gives call_with_state's output.
      const fx::tensor<double> called =
          from_initial ? layer.call(x, {.mask = &m, .initial_state = &s0}) : layer.call(x, {.mask = &m});
      test::check_close(called.to_vector(), got[0].to_vector(), 1e-15);
      if (!from_initial) test::check_close(layer(x, m).to_vector(), got[0].to_vector(), 1e-15);  // layer(x, mask)
      const auto out = got[0].to_vector();
      for (fx::index_t b = 0; b < batch; ++b) {
        CAPTURE(b);
        typename L::state_type alone_state;
        std::vector<double> alone_out;  // the kept steps' outputs, in order
        const fx::tensor<double> xb = kept_steps(x, b);
        if (xb.shape()[1] == 0) {  // nothing kept: the states stay the initial ones
          for (std::size_t i = 0; i < alone_state.size(); ++i)
            alone_state[i] = from_initial ? row_state<L>(s0, b)[i] : fx::zeros<double>({1, L::units});
        } else {
          const auto r = from_initial ? layer.call_with_state(xb, row_state<L>(s0, b)) : layer.call_with_state(xb);
          for (std::size_t i = 0; i < alone_state.size(); ++i) alone_state[i] = r[i + 1];
          alone_out = r[0].to_vector();
        }
        for (std::size_t i = 0; i < alone_state.size(); ++i)
          test::check_close(fx::tensor<double>(fx::slice(got[i + 1], {b, 0}, {1, L::units})).to_vector(),
                            alone_state[i].to_vector(), 1e-13);
        if constexpr (L::return_sequences) {  // the kept steps' outputs in place, zeros elsewhere
          std::size_t k = 0;
          for (fx::index_t t = 0; t < steps; ++t)
            for (fx::index_t u = 0; u < L::units; ++u) {
              const double want = masks[b][t] ? alone_out[k * L::units + u] : 0.0;
              CHECK(out[(b * steps + t) * L::units + u] == doctest::Approx(want).epsilon(1e-13));
              if (u == L::units - 1 && masks[b][t]) ++k;
            }
        } else {  // the output is the final h
          test::check_close(fx::tensor<double>(fx::slice(got[0], {b, 0}, {1, L::units})).to_vector(),
                            alone_state[0].to_vector(), 1e-13);
        }
      }
    }
  }
}

TEST_CASE_TEMPLATE("lstm, gru, simple_rnn: gradients with a mask against finite differences; fused and statements agree", L,
                   nn::lstm<3, false, double>, nn::lstm<3, true, double>, nn::gru<3, false, double>,
                   nn::gru<3, true, double>, nn::simple_rnn<3, false, double>, nn::simple_rnn<3, true, double>) {
  drawn<L> d(52);
  auto& layer = d.layer;
  const fx::tensor<double>& x = d.x;
  const typename L::state_type& s0 = d.s0;
  const fx::tensor<double> k = layer.kernel().peek(), r = layer.recurrent_kernel().peek();
  const fx::tensor<double> b = fx::random::normal<double>(layer.bias().shape(), d.gen, 0.0, 0.5);
  const fx::tensor<bool> m = mask_tensor();
  auto set = [&](const fx::tensor<double>& ki, const fx::tensor<double>& ri, const fx::tensor<double>& bi) {
    layer.kernel().assign(ki);
    layer.recurrent_kernel().assign(ri);
    layer.bias().assign(bi);
  };
  const fx::testing::gradient_report report = recurrent_gradients::states_and_variables(
      layer,
      [&](const auto& xi, const auto& initial) {
        return layer.call_with_state(xi, {.mask = &m, .initial_state = &initial});
      },
      x, s0, k, r, b);
  CHECK_MESSAGE(report.ok, report.report);

  // The fused sequence against the statements: the output alone (call, from zero states), and the
  // output and the final states from initial states.
  set(k, r, b);
  for (const bool with_state : {false, true}) {
    CAPTURE(with_state);
    const auto got = recurrent_gradients::fused_against_statements(layer, x, with_state ? &s0 : nullptr, [&] {
      if (with_state) {
        const auto out = layer.call_with_state(x, {.mask = &m, .initial_state = &s0});
        return fx::tensor<double>(fx::reduce_sum(fx::square(out[0] - 0.25) + out[0]) +
                                  fx::reduce_sum(fx::square(out[L::state_count]) + out[1]));
      }
      const fx::tensor<double> y = layer.call(x, {.mask = &m});
      return fx::tensor<double>(fx::reduce_sum(fx::square(y - 0.25) + y));
    });
    for (const auto& dx : {got[0][0], got[1][0]})  // a skipped step's input gets no gradient
      for (fx::index_t e = 0; e < batch; ++e)
        for (fx::index_t t = 0; t < steps; ++t)
          if (!masks[e][t])
            for (fx::index_t f = 0; f < features; ++f) CHECK(dx[(e * steps + t) * features + f] == 0.0);
  }
}

TEST_CASE("bidirectional: a mask is reversed with the input, so the backward copy skips the same steps") {
  fx::random::generator gen{53};
  nn::bidirectional<nn::lstm<3, true, double>> seq;
  nn::bidirectional<nn::gru<3, false, double>> last;
  seq.build(fx::shape{steps, features}, gen);
  last.build(fx::shape{steps, features}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({batch, steps, features}, gen);
  const fx::tensor<bool> m = mask_tensor();
  const auto y = seq.call(x, {.mask = &m}).to_vector();           // (batch, steps, 6)
  const auto z = last.call_with_state(x, {.mask = &m});           // (batch, 6), forward h, backward h
  CHECK(z[0].shape() == fx::shape{batch, 6});
  test::check_close(fx::tensor<double>(last.call(x, {.mask = &m})).to_vector(), z[0].to_vector(), 1e-15);
  test::check_close(last(x, m).to_vector(), z[0].to_vector(), 1e-15);
  for (fx::index_t b = 0; b < batch; ++b) {
    CAPTURE(b);
    const fx::tensor<double> xb = kept_steps(x, b);
    const fx::index_t kept = xb.shape()[1];
    std::vector<double> f, r, lf, lr;
    if (kept > 0) {
      const fx::tensor<double> xr = fx::tensor<double>(fx::strided_slice(xb, {0, -1}, {fx::end, fx::end}, {1, -1}));
      f = seq.forward_layer()(xb).to_vector();
      r = seq.backward_layer()(xr).to_vector();  // step j of it belongs to kept step kept - 1 - j
      lf = last.forward_layer()(xb).to_vector();
      lr = last.backward_layer()(xr).to_vector();
    } else {
      lf = lr = std::vector<double>(3, 0.0);
    }
    fx::index_t k = 0;
    for (fx::index_t t = 0; t < steps; ++t) {
      for (fx::index_t u = 0; u < 3; ++u) {
        const double* row = &y[(b * steps + t) * 6];
        CHECK(row[u] == doctest::Approx(masks[b][t] ? f[k * 3 + u] : 0.0).epsilon(1e-13));
        CHECK(row[3 + u] == doctest::Approx(masks[b][t] ? r[(kept - 1 - k) * 3 + u] : 0.0).epsilon(1e-13));
      }
      if (masks[b][t]) ++k;
    }
    const auto zb = fx::tensor<double>(fx::slice(z[0], {b, 0}, {1, 6})).to_vector();
    for (fx::index_t u = 0; u < 3; ++u) {
      CHECK(zb[u] == doctest::Approx(lf[u]).epsilon(1e-13));
      CHECK(zb[3 + u] == doctest::Approx(lr[u]).epsilon(1e-13));
    }
  }
}

TEST_CASE("embedding::compute_mask is Keras's mask_zero, and it masks a recurrent layer's padding") {
  nn::embedding<10, 4> embed;
  nn::lstm<5> rnn;
  const fx::tensor<std::int32_t> ids = fx::from_vector(std::vector<std::int32_t>{3, 7, 2, 0, 0, 5, 0, 0, 0, 0}, {2, 5});
  const fx::tensor<bool> m = embed.compute_mask(ids);
  CHECK(m.shape() == fx::shape{2, 5});
  const auto mv = m.to_vector();
  const std::vector<bool> want{true, true, true, false, false, true, false, false, false, false};
  REQUIRE(mv.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(bool(mv[i]) == want[i]);
  // The padded batch's last output is each example's own without its padding.
  const fx::tensor<float> padded = rnn.call(embed(ids), {.mask = &m});
  const fx::tensor<float> first = rnn(embed(fx::tensor<std::int32_t>(fx::slice(ids, {0, 0}, {1, 3}))));
  const fx::tensor<float> second = rnn(embed(fx::tensor<std::int32_t>(fx::slice(ids, {1, 0}, {1, 1}))));
  test::check_close(fx::tensor<float>(fx::slice(padded, {0, 0}, {1, 5})).to_vector(), first.to_vector(), 1e-6);
  test::check_close(fx::tensor<float>(fx::slice(padded, {1, 0}, {1, 5})).to_vector(), second.to_vector(), 1e-6);
}

TEST_CASE("lstm, gru, bidirectional: a mask of the wrong shape is an error that names the layer and the shapes") {
  nn::lstm<4> lstm;
  nn::gru<4, true> gru;
  nn::bidirectional<nn::lstm<4>> bi;
  const fx::tensor<float> x = fx::zeros<float>({2, 3, 5});
  const fx::tensor<bool> bad = fx::ones<bool>({2, 4}), flat = fx::ones<bool>({6});
  CHECK_THROWS_WITH_AS(lstm.call(x, {.mask = &bad}),
                       "lstm 'lstm': the mask must be (batch, time) = (2, 3) for input (2, 3, 5), got (2, 4)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(gru.call_with_state(x, {.mask = &flat}),
                       "gru 'gru': the mask must be (batch, time) = (2, 3) for input (2, 3, 5), got (6,)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(bi.call(x, {.mask = &bad}),
                       "lstm 'forward_lstm': the mask must be (batch, time) = (2, 3) for input (2, 3, 5), got (2, 4)",
                       fx::shape_error);
  const fx::tensor<bool> good = fx::ones<bool>({2, 3});
  CHECK(lstm.call(x, {.mask = &good}).shape() == fx::shape{2, 4});  // the layer is unchanged
}

TEST_CASE("sequential: an embedding<...>::mask_zero's mask passes through dense and activations to the recurrent "
          "layers, as Keras's Sequential") {
  fx::random::generator gen{55};
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{},
                            nn::dense<4>{}, nn::tanh{}, nn::dropout{0.0}, nn::lstm<5, true>{}, nn::layer_norm{},
                            nn::bidirectional<nn::gru<3>>{}, nn::dense<2>{});
  // Right padding, holes, a row with no step at all.
  const fx::tensor<std::int32_t> ids = fx::from_vector(
      std::vector<std::int32_t>{3, 7, 2, 9, 0, 0, 4, 0, 0, 5, 1, 0, 0, 0, 0, 0, 0, 0}, {3, 6});
  auto& embed = net.layer<0>();
  auto& dense = net.layer<1>();
  auto& lstm = net.layer<4>();
  auto& norm = net.layer<5>();
  auto& bi = net.layer<6>();
  auto& head = net.layer<7>();
  // The same layers called by hand, the mask passed explicitly.
  auto by_hand = [&] {
    const fx::tensor<bool> m = embed.compute_mask(ids);
    const fx::tensor<float> d = fx::tanh(dense(embed(ids)));
    const fx::tensor<float> s = norm(lstm.call(d, {.mask = &m}));
    return head(bi.call(s, {.mask = &m}));
  };
  for (const bool training : {false, true}) {
    CAPTURE(training);
    fx::gradient_tape tape{fx::persistent};
    const fx::tensor<float> y = net(ids, training);
    const fx::tensor<float> want = by_hand();
    CHECK(y.shape() == fx::shape{3, 2});
    test::check_close(y.to_vector(), want.to_vector(), 1e-6);
    const auto vars = net.trainable_variables();
    const auto g = tape.gradient(fx::reduce_sum(fx::square(y)), vars);
    const auto h = tape.gradient(fx::reduce_sum(fx::square(want)), vars);
    REQUIRE(g.size() == h.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      CAPTURE(i);
      test::check_close(g[i].to_vector(), h[i].to_vector(), 1e-5);
    }
    // The padding rows of the table get no gradient from the recurrent layers: row 0 none at all.
    const auto table = g[0].to_vector();
    for (fx::index_t u = 0; u < 4; ++u) CHECK(table[static_cast<std::size_t>(u)] == 0.f);
  }
  // Without mask_zero the padding is read as index 0: a different output.
  auto plain = nn::sequential(gen, nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>{}, nn::lstm<5>{});
  auto masked = nn::sequential(gen, nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{},
                               nn::lstm<5>{});
  masked.layer<0>().embeddings().assign(plain.layer<0>().embeddings().peek());
  masked.layer<1>().kernel().assign(plain.layer<1>().kernel().peek());
  masked.layer<1>().recurrent_kernel().assign(plain.layer<1>().recurrent_kernel().peek());
  masked.layer<1>().bias().assign(plain.layer<1>().bias().peek());
  const auto a = plain(ids).to_vector(), b = masked(ids).to_vector();
  CHECK(a != b);
  // The row of no steps keeps the zero state.
  for (std::size_t u = 10; u < 15; ++u) CHECK(b[u] == 0.f);
  CHECK(masked.summary().find("embedding") != std::string::npos);
}

TEST_CASE("sequential: a tagger's mask reaches its output, through output_and_mask (Keras's output._keras_mask)") {
  fx::random::generator gen{56};
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{}, nn::lstm<5, true>{},
                            nn::dense<3>{}, nn::relu{});
  static_assert(decltype(net)::output_masked);
  // A recurrent layer without ReturnSequences consumes the mask; a model without mask_zero has none.
  static_assert(!decltype(nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{},
                                         nn::lstm<5, true>{}, nn::gru<3>{}))::output_masked);
  static_assert(!decltype(nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>{},
                                         nn::lstm<5, true>{}))::output_masked);
  const fx::tensor<std::int32_t> ids = fx::from_vector(
      std::vector<std::int32_t>{3, 7, 2, 9, 0, 0, 4, 0, 0, 5, 1, 0, 0, 0, 0, 0, 0, 0}, {3, 6});
  const auto out = net.output_and_mask(ids);
  CHECK(out.output.shape() == fx::shape{3, 6, 3});
  const auto m = out.mask.to_vector();
  const auto i = ids.to_vector();
  REQUIRE(m.size() == i.size());
  for (std::size_t k = 0; k < i.size(); ++k) CHECK(bool(m[k]) == (i[k] != 0));
  const fx::tensor<bool> mask = net.layer<0>().compute_mask(ids);
  const fx::tensor<float> want =
      fx::relu(net.layer<2>()(net.layer<1>().call(net.layer<0>()(ids), {.mask = &mask})));
  test::check_close(out.output.to_vector(), want.to_vector(), 1e-6);
}
