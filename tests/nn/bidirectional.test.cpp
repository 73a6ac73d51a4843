// fx::nn::bidirectional: PyTorch's bidirectional GRU (outputs and every gradient, the last states
// and the whole sequence), each merge mode against its two halves run by hand on the reversed
// input, gradients against finite differences (double), call_with_state (Keras's return_state and
// initial_state) against the halves' own, names, static shapes, the summary, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <optional>
#include <vector>

#include "peer.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// x (batch, time, features) reversed along time, by hand.
std::vector<double> reversed(const fx::tensor<double>& x) {
  const auto v = x.to_vector();
  const std::size_t b = static_cast<std::size_t>(x.shape()[0]), t = static_cast<std::size_t>(x.shape()[1]),
                    f = static_cast<std::size_t>(x.shape()[2]);
  std::vector<double> out(v.size());
  for (std::size_t n = 0; n < b; ++n)
    for (std::size_t s = 0; s < t; ++s)
      for (std::size_t k = 0; k < f; ++k) out[(n * t + s) * f + k] = v[(n * t + (t - 1 - s)) * f + k];
  return out;
}

/// The wrapper's output from its two halves, merged by hand.
template <class B>
std::vector<double> by_hand(B& bi, const fx::tensor<double>& x) {
  const fx::tensor<double> f = bi.forward_layer()(x);
  fx::tensor<double> b = bi.backward_layer()(fx::from_vector(reversed(x), x.shape()));
  if constexpr (B::return_sequences) b = fx::from_vector(reversed(b), b.shape());
  const auto fv = f.to_vector(), bv = b.to_vector();
  const std::size_t units = static_cast<std::size_t>(f.shape()[f.rank() - 1]), rows = fv.size() / units;
  std::vector<double> out;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t u = 0; u < units; ++u) {
      const double a = fv[r * units + u], c = bv[r * units + u];
      switch (B::merge) {
        case nn::merge_mode::concat: out.push_back(a); break;
        case nn::merge_mode::sum: out.push_back(a + c); break;
        case nn::merge_mode::mul: out.push_back(a * c); break;
        case nn::merge_mode::ave: out.push_back((a + c) / 2); break;
      }
    }
    if (B::merge == nn::merge_mode::concat)
      for (std::size_t u = 0; u < units; ++u) out.push_back(bv[r * units + u]);
  }
  return out;
}

using test::reverse_only;

}  // namespace

TEST_CASE_TEMPLATE("bidirectional: forward and backward equal PyTorch's bidirectional GRU", B,
                   nn::bidirectional<nn::gru<5>>, nn::bidirectional<nn::gru<5, true>>) {
  const std::string prefix = B::return_sequences ? "bigru_seq" : "bigru_last";
  B layer;
  layer.build(fx::shape{4, 3});
  for (auto* half : {&layer.forward_layer(), &layer.backward_layer()}) {
    const std::string name = std::string("bigru_") + (half == &layer.forward_layer() ? "forward" : "backward");
    half->kernel().assign(peer::load(name + "_kernel"));
    half->recurrent_kernel().assign(peer::load(name + "_recurrent_kernel"));
    half->bias().assign(peer::load(name + "_bias"));
  }
  const fx::tensor<float> x = peer::load("bigru_x");
  for (const bool nested : {true, false}) {  // the statements, then the fused cells
    CAPTURE(nested);
    std::optional<fx::gradient_tape> outer;
    if (nested) outer.emplace(fx::persistent);
    fx::gradient_tape tape{fx::persistent};
    tape.watch(x);
    const fx::tensor<float> y = layer(x);
    const fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
    peer::check_close(y, peer::load(prefix + "_y"), "y");
    peer::check_close(tape.gradient(s, x), peer::load(prefix + "_dx"), "d x");
    const auto g = tape.gradient(s, layer.trainable_variables());
    REQUIRE(g.size() == 6);
    const char* names[] = {"_dkernel", "_drecurrent_kernel", "_dbias"};
    for (std::size_t i = 0; i < 6; ++i)
      peer::check_close(g[i], peer::load(prefix + (i < 3 ? "_forward" : "_backward") + names[i % 3]), names[i % 3]);
  }
}

TEST_CASE_TEMPLATE("bidirectional: every merge mode is its two halves merged, on the reversed input", B,
                   nn::bidirectional<nn::gru<3, false, double>>,
                   nn::bidirectional<nn::gru<3, true, double>, nn::merge_mode::sum>,
                   nn::bidirectional<nn::lstm<3, true, double>, nn::merge_mode::mul>,
                   nn::bidirectional<nn::lstm<3, false, double>, nn::merge_mode::ave>) {
  fx::random::generator gen{51};
  B layer;
  layer.build(fx::shape{4, 2}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({3, 4, 2}, gen);
  const fx::tensor<double> y = layer(x);
  const fx::index_t out_units = B::merge == nn::merge_mode::concat ? 6 : 3;
  CHECK(y.shape() == (B::return_sequences ? fx::shape{3, 4, out_units} : fx::shape{3, out_units}));
  const auto want = by_hand(layer, x), got = y.to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  // The halves differ: the backward copy has variables of its own.
  CHECK(layer.forward_layer().kernel().peek().to_vector() != layer.backward_layer().kernel().peek().to_vector());
}

TEST_CASE_TEMPLATE("bidirectional: gradients with respect to the input and both halves' variables", B,
                   nn::bidirectional<nn::gru<2, true, double>>,
                   nn::bidirectional<nn::lstm<2, false, double>, nn::merge_mode::mul>) {
  fx::random::generator gen{52};
  B layer;
  layer.build(fx::shape{3, 2}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 2}, gen);
  auto& f = layer.forward_layer();
  auto& b = layer.backward_layer();
  auto report = fx::testing::check_gradients(
      [&](const auto& xi, const auto& fk, const auto& fr, const auto& bk, const auto& bb) {
        f.kernel().assign(fk);
        f.recurrent_kernel().assign(fr);
        b.kernel().assign(bk);
        b.bias().assign(bb);
        return layer(xi);
      },
      reverse_only, x, f.kernel().peek(), f.recurrent_kernel().peek(), b.kernel().peek(),
      fx::random::normal<double>(b.bias().shape(), gen, 0.0, 0.5));
  CHECK_MESSAGE(report.ok, report.report);
}

TEST_CASE_TEMPLATE("bidirectional: call_with_state gives the merged output and each half's final states, from zero "
                   "or given initial states",
                   B, nn::bidirectional<nn::lstm<3, true, double>>,
                   nn::bidirectional<nn::gru<3, false, double>, nn::merge_mode::sum>) {
  using L = typename B::layer_type;
  constexpr std::size_t half = L::state_count;
  fx::random::generator gen{53};
  B layer;
  layer.build(fx::shape{4, 2}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({3, 4, 2}, gen);
  const fx::tensor<double> x_reversed = fx::from_vector(reversed(x), x.shape());
  typename B::state_type initial;
  for (auto& t : initial) t = fx::random::normal<double>({3, 3}, gen, 0.0, 0.7);
  for (const bool from_zero : {true, false}) {
    CAPTURE(from_zero);
    const auto out = from_zero ? layer.call_with_state(x) : layer.call_with_state(x, initial);
    REQUIRE(out.size() == 1 + 2 * half);
    // Each half's own call_with_state, the backward one on the reversed input.
    typename L::state_type fi, bi;
    for (std::size_t i = 0; i < half; ++i) fi[i] = initial[i], bi[i] = initial[half + i];
    const auto f = from_zero ? layer.forward_layer().call_with_state(x) : layer.forward_layer().call_with_state(x, fi);
    const auto b = from_zero ? layer.backward_layer().call_with_state(x_reversed)
                             : layer.backward_layer().call_with_state(x_reversed, bi);
    for (std::size_t i = 0; i < half; ++i) {
      CHECK(out[1 + i].to_vector() == f[1 + i].to_vector());
      CHECK(out[1 + half + i].to_vector() == b[1 + i].to_vector());
    }
    if (from_zero) {  // the output is operator()'s
      CHECK(out[0].to_vector() == fx::tensor<double>(layer(x)).to_vector());
    } else {  // the output merges the halves as operator() does (checked above by hand)
      const auto fo = f[0].to_vector();
      const auto bo = B::return_sequences ? reversed(b[0]) : b[0].to_vector();
      const auto got = out[0].to_vector();
      const std::size_t rows = fo.size() / 3;
      REQUIRE(got.size() == (B::merge == nn::merge_mode::concat ? 2 : 1) * fo.size());
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t u = 0; u < 3; ++u) {
          if constexpr (B::merge == nn::merge_mode::concat) {
            CHECK(got[r * 6 + u] == doctest::Approx(fo[r * 3 + u]).epsilon(1e-14));
            CHECK(got[r * 6 + 3 + u] == doctest::Approx(bo[r * 3 + u]).epsilon(1e-14));
          } else {
            CHECK(got[r * 3 + u] == doctest::Approx(fo[r * 3 + u] + bo[r * 3 + u]).epsilon(1e-14));
          }
        }
    }
  }
  // Gradients with respect to every initial state, through the output and every final state.
  auto report = fx::testing::check_gradients(
      [&](const auto& xi, const auto& s0, const auto& s1) {
        typename B::state_type st = initial;
        st[0] = s0;
        st[half] = s1;  // the backward half's first state
        const auto out = layer.call_with_state(xi, st);
        std::vector<fx::tensor<double>> parts;
        for (const auto& t : out) parts.push_back(fx::tensor<double>(fx::reshape(t, {-1})));
        return fx::tensor<double>(fx::concat(parts, 0));
      },
      reverse_only, x, initial[0], initial[half]);
  CHECK_MESSAGE(report.ok, report.report);
}

TEST_CASE("bidirectional: names, static shapes in a sequential model, the summary and checkpoints' names") {
  fx::random::generator gen{53};
  auto net = nn::sequential(gen, nn::input<6, 3>{}, nn::bidirectional<nn::lstm<4, true>>{},
                            nn::bidirectional<nn::gru<2>, nn::merge_mode::sum>{}, nn::dense<1>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<1>>);
  static_assert(std::is_same_v<decltype(nn::bidirectional<nn::lstm<4, true>>::output_shape(nn::static_shape<6, 3>{})),
                               nn::static_shape<6, 8>>);
  static_assert(std::is_same_v<decltype(nn::bidirectional<nn::gru<4>>::output_shape(nn::static_shape<6, 3>{})),
                               nn::static_shape<8>>);
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{
                     "bidirectional/forward_lstm/kernel", "bidirectional/forward_lstm/recurrent_kernel",
                     "bidirectional/forward_lstm/bias", "bidirectional/backward_lstm/kernel",
                     "bidirectional/backward_lstm/recurrent_kernel", "bidirectional/backward_lstm/bias",
                     "bidirectional_1/forward_gru/kernel", "bidirectional_1/forward_gru/recurrent_kernel",
                     "bidirectional_1/forward_gru/bias", "bidirectional_1/backward_gru/kernel",
                     "bidirectional_1/backward_gru/recurrent_kernel", "bidirectional_1/backward_gru/bias",
                     "dense/kernel", "dense/bias"});
  CHECK(net.layer<1>().forward_layer().kernel().shape() == fx::shape{8, 6});  // the concat of 2 x 4 units
  // Keras's summary: 2 x 4 (3 + 4 + 1) x 4 = 256, 2 x 3 (8 + 2 + 2) x 2 = 144, 3.
  CHECK(net.count_params() == 256 + 144 + 3);
  CHECK(net.summary() ==
        "layer                      output shape          params\n"
        "bidirectional              (batch, 6, 8)         256\n"
        "bidirectional_1            (batch, 2)            144\n"
        "dense                      (batch, 1)            3\n"
        "total trainable parameters: 403\n");
  const fx::tensor<float> x = fx::random::normal<float>({5, 6, 3}, gen);
  CHECK(net(x).shape() == fx::shape{5, 1});
  // A named layer names both halves; CTAD wraps it.
  auto named = nn::bidirectional{nn::gru<2>{"encoder"}};
  CHECK(named.forward_layer().name() == "forward_encoder");
  CHECK(named.backward_layer().name() == "backward_encoder");
}

TEST_CASE("bidirectional: errors name the wrapper or the half") {
  nn::bidirectional<nn::gru<2>> layer;
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 3})),
                       "bidirectional 'bidirectional': expects input of shape (batch, time, features), got (2, 3)",
                       fx::shape_error);
  (void)layer(fx::zeros<float>({2, 3, 4}));
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 3, 5})),
                       "gru 'forward_gru': expects input of shape (batch, time >= 1, 4), got (2, 3, 5)", fx::shape_error);
  nn::gru<2> built;
  (void)built(fx::zeros<float>({1, 2, 3}));
  CHECK_THROWS_WITH_AS(nn::bidirectional<nn::gru<2>>(std::move(built)),
                       "bidirectional 'bidirectional': the layer 'gru' is already built; wrap one that is not (the "
                       "backward copy needs variables of its own)",
                       fx::invalid_argument);
}
