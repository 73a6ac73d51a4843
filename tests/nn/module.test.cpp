// Composite models (fx::nn::model with FLUXION_LAYERS): a shared trunk with two heads, stable
// hierarchical names, gradients from both heads reaching the trunk, inference without a tape, and
// variables of the model's own (Keras's add_weight), members named by the model in their errors.
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
struct two_heads : nn::model<two_heads> {
  nn::sequential_t<nn::input<6>, nn::dense<8>, nn::relu> trunk;
  nn::dense<3> classes{"classes"};
  nn::dense<1> score{"score"};
  FLUXION_LAYERS(trunk, classes, score)

  std::pair<fx::tensor<float>, fx::tensor<float>> call(const fx::tensor<float>& x, bool training = false) {
    fx::tensor<float> h = trunk(x, training);
    return {classes(h), score(h)};
  }
};

/// A model with a variable of its own beside a layer: logits divided by a learned temperature.
struct tempered : nn::model<tempered> {
  nn::dense<3> head;
  fx::variable<float> temperature{fx::tensor<float>(2.f)};
  fx::variable<float> calls{fx::tensor<float>(0.f), "", /*trainable=*/false};
  FLUXION_LAYERS(head, temperature, calls)
  fx::tensor<float> call(const fx::tensor<float>& x, bool = false) { return fx::tensor<float>(head(x) / temperature); }
};

/// A model of models: the names nest.
struct outer : nn::model<outer> {
  two_heads body;
  nn::dense<2> head;
  FLUXION_LAYERS(body, head)
  fx::tensor<float> call(const fx::tensor<float>& x) {
    auto [c, s] = body(x);
    return head(fx::tensor<float>(c + s));
  }
};
}  // namespace

TEST_CASE("model: a shared trunk with two heads") {
  two_heads net;
  CHECK(net.trainable_variables().size() == 2);  // the heads are built on the first call
  const fx::tensor<float> x = fx::random::normal<float>({5, 6}, fx::random::global_generator());
  auto [c, s] = net(x);
  CHECK(c.shape() == fx::shape{5, 3});
  CHECK(s.shape() == fx::shape{5, 1});
  std::vector<std::string> names;
  for (auto* v : net.variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"trunk/dense/kernel", "trunk/dense/bias", "classes/kernel", "classes/bias",
                                          "score/kernel", "score/bias"});
  CHECK(net.count_params() == 6 * 8 + 8 + 8 * 3 + 3 + 8 + 1);

  // Both heads' losses reach the trunk; each head gets only its own.
  fx::gradient_tape tape{fx::persistent};
  auto [c2, s2] = net(x);
  fx::tensor<float> class_loss = fx::reduce_sum(fx::square(c2));
  fx::tensor<float> score_loss = fx::reduce_sum(s2);
  auto vars = net.trainable_variables();
  auto g_class = tape.gradient(class_loss, vars);
  auto g_score = tape.gradient(score_loss, vars);
  CHECK(g_class[0].shape() == fx::shape{6, 8});
  CHECK(g_score[0].shape() == fx::shape{6, 8});
  CHECK(g_class[4].shape() == fx::shape{0});  // score/kernel: the class loss does not read it
  CHECK(g_score[2].shape() == fx::shape{0});  // classes/kernel
  // The score head is linear: d sum(s) / d score/bias = batch size.
  CHECK(g_score[5].to_vector() == std::vector<float>{5.f});
}

TEST_CASE("model: models nest, with nested names; inference needs no tape") {
  outer net;
  const fx::tensor<float> y = net(fx::ones<float>({2, 6}));
  CHECK(y.shape() == fx::shape{2, 2});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names.front() == "body/trunk/dense/kernel");
  CHECK(names.back() == "head/bias");
  CHECK(names.size() == 8);
}

TEST_CASE("model: sequential models nest and check the inner input shape") {
  using block = nn::sequential_t<nn::input<8>, nn::dense<8>, nn::tanh>;
  auto net = nn::sequential(nn::input<4>{}, nn::dense<8>{}, block{}, block{}, nn::dense<1>{});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"dense/kernel", "dense/bias", "sequential/dense/kernel",
                                          "sequential/dense/bias", "sequential_1/dense/kernel",
                                          "sequential_1/dense/bias", "dense_1/kernel", "dense_1/bias"});
  CHECK(fx::tensor<float>(net(fx::ones<float>({3, 4}))).shape() == fx::shape{3, 1});
}

TEST_CASE("model: a variable of the model's own, listed in FLUXION_LAYERS, is named, trained and saved by name") {
  tempered net;
  const fx::tensor<float> x = fx::ones<float>({2, 4});
  net(x);
  std::vector<std::string> names;
  for (auto* v : net.variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"head/kernel", "head/bias", "temperature", "calls"});
  auto vars = net.trainable_variables();
  REQUIRE(vars.size() == 3);  // `calls` is not trainable
  CHECK(net.non_trainable_variables().size() == 1);
  // d/dT sum(head(x) / T) = -sum(head(x)) / T^2, against the layer's own output.
  fx::gradient_tape tape;
  const fx::tensor<float> loss = fx::reduce_sum(net(x, true));
  const auto g = tape.gradient(loss, vars);
  const float h = fx::tensor<float>(fx::reduce_sum(net.head(x))).item();
  CHECK(g[2].item() == doctest::Approx(-h / 4.f).epsilon(1e-5));
  fx::optim::sgd opt{0.5};
  opt.apply_gradients(g, vars);
  CHECK(net.temperature.peek().item() == doctest::Approx(2.f + 0.5f * h / 4.f).epsilon(1e-5));
  // Nested, the variable's name follows the member's path.
  struct wrapper : nn::model<wrapper> {
    tempered inner;
    FLUXION_LAYERS(inner)
    fx::tensor<float> call(const fx::tensor<float>& x, bool = false) { return inner(x); }
  } w;
  w(x);
  CHECK(w.variables()[2]->name() == "inner/temperature");
}

TEST_CASE("model: summary() lists the members by name and kind, nested models indented, as Keras's") {
  outer net;
  // Before the first call the dense members have no variables: their rows say so.
  const std::string before = net.summary();
  CHECK(before ==
        "layer                      output shape          params\n"
        "body (model)                                     56\n"
        "  trunk (sequential)       (batch, 8)            56\n"
        "    dense                  (batch, 8)            56\n"
        "    relu                   (batch, 8)            0\n"
        "  classes (dense)          not built             0\n"
        "  score (dense)            not built             0\n"
        "head (dense)               not built             0\n"
        "total trainable parameters: 56\n"
        "(call the model once to build the layers marked 'not built' and count their parameters)\n");
  net(fx::zeros<float>({2, 6}));
  CHECK(net.summary() ==
        "layer                      output shape          params\n"
        "body (model)                                     92\n"
        "  trunk (sequential)       (batch, 8)            56\n"
        "    dense                  (batch, 8)            56\n"
        "    relu                   (batch, 8)            0\n"
        "  classes (dense)                                27\n"
        "  score (dense)                                  9\n"
        "head (dense)                                     8\n"
        "total trainable parameters: 100\n");
  CHECK(net.count_params() == (6 * 8 + 8) + (8 * 3 + 3) + (8 + 1) + (3 * 2 + 2));

  // A variable of the model's own has a row of its own; non-trainable ones count no parameters.
  tempered t;
  t(fx::zeros<float>({1, 4}));
  CHECK(t.summary() ==
        "layer                      output shape          params\n"
        "head (dense)                                     15\n"
        "temperature (variable)     ()                    1\n"
        "calls (variable)           ()                    0\n"
        "total trainable parameters: 16\n"
        "non-trainable parameters: 1\n");

  // batch_norm's moving statistics are the non-trainable parameters of a sequential model, as
  // Keras's summary counts them ("Non-trainable params: 16" for 8 channels).
  auto bn = nn::sequential(nn::input<3, 3, 2>{}, nn::conv2d<8, 3, nn::same>{}, nn::batch_norm{}, nn::flatten{},
                           nn::dense<2>{});
  const std::string table = bn.summary();
  CAPTURE(table);
  const std::string totals = "total trainable parameters: " + std::to_string(3 * 3 * 2 * 8 + 8 + 2 * 8 + 72 * 2 + 2) +
                             "\nnon-trainable parameters: 16\n";
  CHECK(table.size() > totals.size());
  CHECK(table.compare(table.size() - totals.size(), totals.size(), totals) == 0);
}

namespace {
/// Two layers of one kind: an automatic name, and one given.
struct two_recurrent : nn::model<two_recurrent> {
  nn::lstm<4> encoder;
  nn::lstm<4> decoder{"my_decoder"};
  FLUXION_LAYERS(encoder, decoder)
  fx::tensor<float> call(const fx::tensor<float>& x, const fx::tensor<float>& y) {
    auto [out, h, c] = encoder.call_with_state(x);
    return decoder.call_with_state(y, {h, c})[0];
  }
};
}  // namespace

TEST_CASE("model: errors in a member say which member; a name given to a layer is kept") {
  two_recurrent net;
  CHECK(net.encoder.name() == "lstm");  // Keras's automatic name until the model's first call
  const fx::tensor<float> x = fx::zeros<float>({2, 3, 5}), y = fx::zeros<float>({2, 2, 3});
  CHECK(net(x, y).shape() == fx::shape{2, 4});
  CHECK(net.encoder.name() == "encoder");
  CHECK(net.decoder.name() == "my_decoder");
  CHECK_THROWS_WITH_AS(net(fx::zeros<float>({2, 3, 6}), y),
                       "lstm 'encoder': expects input of shape (batch, time >= 1, 5), got (2, 3, 6)", fx::shape_error);
  CHECK_THROWS_WITH_AS(net(x, fx::zeros<float>({3, 2, 3})),
                       "lstm 'my_decoder': initial_state[0] must be (batch, units) = (3, 4) for input (3, 2, 3), got "
                       "(2, 4)",
                       fx::shape_error);
  // The variables keep their member names.
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"encoder/kernel", "encoder/recurrent_kernel", "encoder/bias",
                                          "decoder/kernel", "decoder/recurrent_kernel", "decoder/bias"});
}
