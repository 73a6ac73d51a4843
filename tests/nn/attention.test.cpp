// fx::nn::multi_head_attention: PyTorch's multi-head attention (self-attention with a causal mask,
// cross-attention with key and value sizes of their own and an attention mask): outputs,
// attention scores, and the gradients of the query, key, value and every variable; gradients
// against finite differences (double); Keras's variables, shapes and parameter counts; errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <optional>
#include <vector>

#include "compiled_check.hpp"
#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
const char* const variable_names[] = {"query_kernel", "query_bias", "key_kernel",    "key_bias",
                                      "value_kernel", "value_bias", "output_kernel", "output_bias"};

fx::tensor<bool> load_mask(const std::string& prefix) {
  const auto m = fx::io::load_npy<std::int32_t>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/nn/" + prefix + "_mask.npy");
  return fx::tensor<bool>(m != 0);
}

template <class L>
void assign_peer(L& layer, const std::string& prefix) {
  auto vars = layer.trainable_variables();
  REQUIRE(vars.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) vars[i]->assign(peer::load(prefix + "_" + variable_names[i]));
}
}  // namespace

TEST_CASE("multi_head_attention: causal self-attention equals PyTorch's, values, scores and gradients") {
  nn::multi_head_attention<2, 4> mha{nn::causal_mask};
  mha.build(fx::shape{5, 8});
  assign_peer(mha, "mha_self");
  const fx::tensor<float> x = peer::load("mha_self_query");
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<float> scores;
  const fx::tensor<float> y = mha.call(x, x, x, {.attention_scores = &scores});
  peer::check_close(y, peer::load("mha_self_y"), "y");
  peer::check_close(scores, peer::load("mha_self_scores"), "scores");
  // Self-attention: PyTorch's input was the query, the key and the value too.
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load("mha_self_w"));
  peer::check_close(tape.gradient(s, x), peer::load("mha_self_dquery"), "d x");
  const auto g = tape.gradient(s, mha.trainable_variables());
  for (std::size_t i = 0; i < 8; ++i)
    peer::check_close(g[i], peer::load(std::string("mha_self_d") + variable_names[i]), variable_names[i]);
  // The call operator is the same self-attention (the layer's causal mask).
  peer::check_close(mha(x), peer::load("mha_self_y"), "operator()");
}

TEST_CASE("multi_head_attention: masked cross-attention equals PyTorch's, through the statements and under nested tapes") {
  nn::multi_head_attention<2, 4> mha;
  mha.build(8, 5, 6);  // query, value and key features
  assign_peer(mha, "mha_cross");
  const fx::tensor<float> q = peer::load("mha_cross_query"), k = peer::load("mha_cross_key"),
                          v = peer::load("mha_cross_value");
  const fx::tensor<bool> mask = load_mask("mha_cross");
  for (const bool nested : {false, true}) {
    CAPTURE(nested);
    std::optional<fx::gradient_tape> outer;
    if (nested) outer.emplace(fx::persistent);
    fx::gradient_tape tape{fx::persistent};
    for (const auto* t : {&q, &k, &v}) tape.watch(*t);
    fx::tensor<float> scores;
    const fx::tensor<float> y = mha.call(q, v, k, {.attention_mask = &mask, .attention_scores = &scores});
    peer::check_close(y, peer::load("mha_cross_y"), "y");
    peer::check_close(scores, peer::load("mha_cross_scores"), "scores");
    const fx::tensor<float> s = fx::reduce_sum(y * peer::load("mha_cross_w"));
    const auto d = tape.gradient(s, std::vector<const fx::tensor<float>*>{&q, &k, &v});
    peer::check_close(d[0], peer::load("mha_cross_dquery"), "d query");
    peer::check_close(d[1], peer::load("mha_cross_dkey"), "d key");
    peer::check_close(d[2], peer::load("mha_cross_dvalue"), "d value");
    const auto g = tape.gradient(s, mha.trainable_variables());
    for (std::size_t i = 0; i < 8; ++i)
      peer::check_close(g[i], peer::load(std::string("mha_cross_d") + variable_names[i]), variable_names[i]);
  }
}

TEST_CASE("multi_head_attention: gradients against finite differences (double), with a mask and the causal mask") {
  fx::random::generator gen{81};
  nn::multi_head_attention<2, 3, 2, double> mha;
  mha.build(5, 4, 3, gen);
  const fx::tensor<double> q = fx::random::normal<double>({2, 3, 5}, gen), v = fx::random::normal<double>({2, 3, 4}, gen),
                           k = fx::random::normal<double>({2, 3, 3}, gen);
  fx::tensor<bool> mask = fx::random::uniform<double>({2, 3, 3}, gen) > 0.3;
  for (fx::index_t i = 0; i < 2 * 3; ++i) mask.mutable_data()[i * 3] = true;
  auto vars = mha.trainable_variables();
  std::vector<fx::tensor<double>> values;
  for (auto* var : vars) values.push_back(fx::random::normal<double>(var->shape(), gen, 0.0, 0.5));
  auto report = fx::testing::check_gradients(
      [&](const auto& qi, const auto& vi, const auto& ki, const auto& qk, const auto& kb, const auto& vk,
          const auto& ok) {
        vars[0]->assign(qk);
        vars[3]->assign(kb);
        vars[4]->assign(vk);
        vars[6]->assign(ok);
        return mha.call(qi, vi, ki, {.attention_mask = &mask, .use_causal_mask = true});
      },
      fx::testing::check_options{.reverse = true, .forward = false}, q, v, k, values[0], values[3], values[4],
      values[6]);
  CHECK_MESSAGE(report.ok, report.report);
}

TEST_CASE("multi_head_attention: Keras's variables, shapes and parameters in a sequential model; errors") {
  fx::random::generator gen{82};
  auto net = nn::sequential(gen, nn::input<6, 8>{}, nn::multi_head_attention<2, 4>{nn::causal_mask},
                            nn::layer_norm{}, nn::global_avg_pool1d{}, nn::dense<3>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<3>>);
  CHECK(net.layer<0>().causal());  // kept through the model's re-declaration
  std::vector<std::string> names;
  for (auto* v : net.layer<0>().trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"multi_head_attention/query/kernel", "multi_head_attention/query/bias",
                                          "multi_head_attention/key/kernel", "multi_head_attention/key/bias",
                                          "multi_head_attention/value/kernel", "multi_head_attention/value/bias",
                                          "multi_head_attention/attention_output/kernel",
                                          "multi_head_attention/attention_output/bias"});
  // Keras: 3 x (8 x 2 x 4 + 2 x 4) + 2 x 4 x 8 + 8 = 288.
  CHECK(net.summary() ==
        "layer                      output shape          params\n"
        "multi_head_attention       (batch, 6, 8)         288\n"
        "layer_normalization        (batch, 6, 8)         16\n"
        "global_avg_pool1d          (batch, 8)            0\n"
        "dense                      (batch, 3)            27\n"
        "total trainable parameters: 331\n");
  const float limit = std::sqrt(6.f / (2 * 8 + 4 * 8));  // fans of (8, 2, 4): 2 x 8 and 4 x 8
  for (float v : net.layer<0>().query_kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  // A causal layer's output at step t does not depend on the inputs after t.
  fx::tensor<float> x = fx::random::normal<float>({1, 6, 8}, gen);
  const std::vector<float> before = net.layer<0>()(x).to_vector();
  x.mutable_data()[5 * 8] += 1.f;  // the last step
  const std::vector<float> after = net.layer<0>()(x).to_vector();
  for (std::size_t i = 0; i < 5 * 8; ++i) CHECK(before[i] == after[i]);
  CHECK(before[5 * 8] != after[5 * 8]);

  nn::multi_head_attention<2, 4> mha;
  CHECK_THROWS_WITH_AS(mha(fx::zeros<float>({2, 8})),
                       "multi_head_attention 'multi_head_attention': the input must be (batch, time >= 1, features), "
                       "got (2, 8)",
                       fx::shape_error);
  (void)mha(fx::zeros<float>({2, 3, 8}));
  CHECK_THROWS_WITH_AS(mha(fx::zeros<float>({2, 3, 7})),
                       "multi_head_attention 'multi_head_attention': the query (2, 3, 7) has 7 features, the layer "
                       "was built for 8",
                       fx::shape_error);
  CHECK_THROWS_AS(mha.call(fx::zeros<float>({2, 3, 8}), fx::zeros<float>({3, 4, 8})), fx::shape_error);
  const fx::tensor<bool> bad_mask = fx::ones<bool>({2, 3, 3});
  CHECK_THROWS_WITH_AS(mha.call(fx::zeros<float>({2, 3, 8}), fx::zeros<float>({2, 4, 8}), {.attention_mask = &bad_mask}),
                       "multi_head_attention 'multi_head_attention': attention_mask (2, 3, 3) must be (batch, Tq, Tk) "
                       "= (2, 3, 4)",
                       fx::shape_error);
  nn::multi_head_attention<2, 4> unbuilt;
  CHECK_THROWS_AS(unbuilt.query_kernel(), fx::error);
}

TEST_CASE("multi_head_attention: dropout on the attention weights in training, replayed by a compiled step") {
  fx::random::generator gen{83};
  nn::multi_head_attention<2, 4> plain;
  nn::multi_head_attention<2, 4> dropping{{.dropout = 0.5, .seed = 7}};
  plain.build(fx::shape{5, 8}, gen);
  dropping.build(fx::shape{5, 8});
  auto pv = plain.trainable_variables(), dv = dropping.trainable_variables();
  for (std::size_t i = 0; i < pv.size(); ++i) dv[i]->assign(pv[i]->peek());
  const fx::tensor<float> x = fx::random::normal<float>({2, 5, 8}, gen);
  // Inference ignores the rate; training drops weights, and the scores returned are those before it.
  CHECK(dropping(x).to_vector() == plain(x).to_vector());
  fx::tensor<float> before, after;
  const fx::tensor<float> y_plain = plain.call(x, x, x, {.attention_scores = &before});
  const fx::tensor<float> y_drop = dropping.call(x, x, x, {.attention_scores = &after, .training = true});
  CHECK(after.to_vector() == before.to_vector());
  CHECK(y_drop.to_vector() != y_plain.to_vector());
  CHECK_THROWS_WITH_AS((nn::multi_head_attention<2, 4>(nn::attention_options{.dropout = 1.0})),
                       "multi_head_attention 'multi_head_attention': dropout = 1 is not in [0, 1)", fx::invalid_argument);
  // A compiled step recomputes the layer in its backward pass: the replayed masks give the
  // tape-based step's numbers, bitwise.
  auto make = [] {
    fx::random::generator g{84};
    return nn::sequential(g, nn::input<5, 8>{}, nn::multi_head_attention<2, 4>{{.use_causal_mask = true, .dropout = 0.3, .seed = 9}},
                          nn::global_avg_pool1d{}, nn::dense<3>{});
  };
  auto a = make(), b = make();
  CHECK(b.layer<0>().causal());
  CHECK(b.layer<0>().options().dropout == 0.3);
  compiled_check::against_tape(a, b, x, fx::tensor<std::int32_t>{0, 2}, 3);
}

TEST_CASE("multi_head_attention: Keras's sequence mask (embedding<...>::mask_zero) in a sequential model") {
  // A query attends only to the keys the mask keeps: the same as call() with the attention mask
  // m[b, i] && m[b, j] built by hand; the output keeps the mask for the masked mean after it.
  fx::random::generator gen{71};
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<10, 8>::mask_zero{},
                            nn::multi_head_attention<2, 4>{}, nn::global_avg_pool1d{}, nn::dense<2>{});
  const std::vector<std::int32_t> flat{3, 1, 4, 0, 0, 5, 0, 9, 2, 0, 0, 0, 0, 0, 0};
  const fx::tensor<std::int32_t> ids = fx::from_vector(flat, {3, 5});
  std::vector<std::int32_t> pairs, keep;
  for (int b = 0; b < 3; ++b)
    for (int i = 0; i < 5; ++i) {
      keep.push_back(flat[b * 5 + i] != 0);
      for (int j = 0; j < 5; ++j) pairs.push_back(flat[b * 5 + i] != 0 && flat[b * 5 + j] != 0);
    }
  const fx::tensor<bool> am(fx::from_vector(pairs, {3, 5, 5}) != 0), m(fx::from_vector(keep, {3, 5}) != 0);
  auto& embed = net.layer<0>();
  auto& mha = net.layer<1>();
  auto& pool = net.layer<2>();
  auto& head = net.layer<3>();
  fx::gradient_tape tape{fx::persistent};
  const fx::tensor<float> y = net(ids, true);
  const fx::tensor<float> e = embed(ids);
  const fx::tensor<float> want = head(pool.call(mha.call(e, e, e, {.attention_mask = &am}), {.mask = &m}));
  const auto got = y.to_vector(), wanted = want.to_vector();
  REQUIRE(got.size() == wanted.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(wanted[i]).epsilon(1e-5));
  const auto vars = net.trainable_variables();
  const auto g = tape.gradient(fx::reduce_sum(fx::square(y)), vars);
  const auto h = tape.gradient(fx::reduce_sum(fx::square(want)), vars);
  for (std::size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    const auto a = g[i].to_vector(), b = h[i].to_vector();
    for (std::size_t k = 0; k < a.size(); ++k) CHECK(a[k] == doctest::Approx(b[k]).epsilon(1e-4).scale(1e-3));
  }
  // Padding is read by no kept query: the table's row 0 gets no gradient.
  for (int u = 0; u < 8; ++u) CHECK(g[0].to_vector()[static_cast<std::size_t>(u)] == 0.f);
  CHECK_THROWS_WITH_AS(mha(e, fx::ones<bool>({3, 4})),
                       "multi_head_attention 'multi_head_attention': the mask must be (batch, time) = (3, 5) for "
                       "input (3, 5, 8), got (3, 4)",
                       fx::shape_error);
}
