// Composite models (fx::nn::model with FLUXION_LAYERS): a shared trunk with two heads, stable
// hierarchical names, gradients from both heads reaching the trunk, inference without a tape.
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
