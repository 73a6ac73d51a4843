// Keras's weight regularizers: the penalty against a naive loop, its gradient against central
// differences (double), the layers' kernel_regularizer and bias_regularizer on their variables, a
// frozen layer's weights left out, fx::fit's step and loss and fx::evaluate's loss against the same
// step by hand, nn::compile_step against the tape-based step with the penalty, and the errors.
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <utility>
#include <vector>

#include "penalty_data.hpp"
#include "reverse_only.hpp"

namespace regularizers_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;
namespace reg = fluxion::nn::regularizers;

namespace {

/// l1 sum |w| + l2 sum w^2 by a loop over the values.
template <class T>
double naive_penalty(const std::vector<T>& w, double l1, double l2) {
  double a = 0, b = 0;
  for (T v : w) a += std::abs(static_cast<double>(v)), b += static_cast<double>(v) * static_cast<double>(v);
  return l1 * a + l2 * b;
}

using penalty_data::batches;
using penalty_data::cross_entropy;

auto make_net() {
  fx::random::generator gen{17};
  return nn::sequential(gen, nn::typed_input<double, 5>{},
                        nn::dense<4>{{.kernel_regularizer = reg::l1_l2(0.01, 0.02), .bias_regularizer = reg::l2(0.5)}},
                        nn::tanh{}, nn::dense<3>{{.kernel_regularizer = reg::l2(0.03)}});
}

}  // namespace

TEST_CASE("regularizers: Keras's factories and defaults") {
  CHECK(reg::l1() == fx::regularizer{0.01, 0});
  CHECK(reg::l2() == fx::regularizer{0, 0.01});
  CHECK(reg::l1_l2() == fx::regularizer{0, 0});
  CHECK(reg::l1_l2(0.1, 0.2) == fx::regularizer{0.1, 0.2});
  CHECK_FALSE(static_cast<bool>(reg::l1_l2()));
  CHECK(static_cast<bool>(reg::l2(1e-4)));
}

TEST_CASE("regularizers: the penalty is l1 sum|w| + l2 sum w^2 over the trainable variables") {
  auto net = make_net();
  const auto vars = net.trainable_variables();
  REQUIRE(vars.size() == 4);
  CHECK(vars[0]->regularizer() == fx::regularizer{0.01, 0.02});
  CHECK(vars[1]->regularizer() == fx::regularizer{0, 0.5});
  CHECK(vars[2]->regularizer() == fx::regularizer{0, 0.03});
  CHECK_FALSE(static_cast<bool>(vars[3]->regularizer()));
  vars[1]->assign(fx::from_vector(std::vector<double>{0.5, -1, 0, 2}, {4}));  // a zero bias adds nothing
  const double want = naive_penalty(vars[0]->peek().to_vector(), 0.01, 0.02) +
                      naive_penalty(vars[1]->peek().to_vector(), 0, 0.5) +
                      naive_penalty(vars[2]->peek().to_vector(), 0, 0.03);
  CHECK(net.regularization_loss().item() == doctest::Approx(want).epsilon(1e-14));
  CHECK(nn::regularization_loss(vars).item() == net.regularization_loss().item());
  // Keras's model.losses holds the trainable weights' penalties: a frozen layer adds nothing.
  net.layer<0>().kernel().set_trainable(false);
  CHECK(net.regularization_loss().item() == doctest::Approx(want - naive_penalty(vars[0]->peek().to_vector(), 0.01, 0.02)));
  // A model without regularizers: 0.
  nn::dense<2> plain;
  plain.build(fx::shape{3});
  CHECK(plain.regularization_loss().item() == 0.f);
  CHECK_FALSE(nn::has_regularizers(plain.trainable_variables()));
}

TEST_CASE("regularizers: the convolutions, embedding, LSTM, GRU and attention attach theirs to their variables") {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 7>{},
                            nn::embedding<20, 4>{{.embeddings_regularizer = reg::l1(0.1)}},
                            nn::lstm<3, true>{{.kernel_regularizer = reg::l2(0.2), .recurrent_regularizer = reg::l1(0.3),
                                               .bias_regularizer = reg::l2(0.4)}},
                            nn::gru<3, true>{{.kernel_regularizer = reg::l1_l2(0.5, 0.6)}},
                            nn::conv1d<2, 3>{{.kernel_regularizer = reg::l2(0.7), .bias_regularizer = reg::l1(0.8)}},
                            nn::flatten{}, nn::dense<2>{});
  std::vector<std::pair<std::string, fx::regularizer>> got;
  double want = 0;
  for (auto* v : net.trainable_variables()) {
    got.emplace_back(v->name(), v->regularizer());
    want += naive_penalty(v->peek().to_vector(), v->regularizer().l1, v->regularizer().l2);
  }
  const std::vector<std::pair<std::string, fx::regularizer>> expected = {
      {"embedding/embeddings", {0.1, 0}}, {"lstm/kernel", {0, 0.2}},       {"lstm/recurrent_kernel", {0.3, 0}},
      {"lstm/bias", {0, 0.4}},           {"gru/kernel", {0.5, 0.6}},      {"gru/recurrent_kernel", {0, 0}},
      {"gru/bias", {0, 0}},              {"conv1d/kernel", {0, 0.7}},     {"conv1d/bias", {0.8, 0}},
      {"dense/kernel", {0, 0}},          {"dense/bias", {0, 0}}};
  CHECK(got == expected);
  CHECK(net.regularization_loss().item() == doctest::Approx(want).epsilon(1e-6));
  nn::multi_head_attention<2, 4> mha{{.kernel_regularizer = reg::l2(0.1), .bias_regularizer = reg::l1(0.2)}};
  mha.build(6, 6, 6);
  for (auto* v : mha.variables())
    CHECK(v->regularizer() == (v->name().ends_with("bias") ? fx::regularizer{0.2, 0} : fx::regularizer{0, 0.1}));
  CHECK_THROWS_WITH_AS(nn::lstm<3>({.recurrent_regularizer = {0, -2}}),
                       "lstm 'lstm': recurrent_regularizer.l2 = -2.000000 must be finite and not negative",
                       fx::invalid_argument);
}

TEST_CASE("regularizers: the penalty's gradient against central differences (double)") {
  fx::random::generator gen{2};
  fx::variable<double> w{fx::random::normal<double>({3, 4}, gen), "w"};
  w.set_regularizer(reg::l1_l2(0.3, 0.7));
  const std::vector<fx::variable<double>*> vars{&w};
  auto r = fx::testing::check_gradients(
      [&](const auto& wi) {
        w.assign(wi);
        return nn::regularization_loss(vars);
      },
      test::reverse_only, fx::tensor<double>(w.peek()));
  CHECK_MESSAGE(r.ok, r.report);
  // And as the tape gives it: l1 sign(w) + 2 l2 w.
  fx::gradient_tape tape;
  const fx::tensor<double> p = nn::regularization_loss(vars);
  const fx::tensor<double> g = tape.gradient(p, w);
  const fx::tensor<double> want = 0.3 * fx::sign(w) + 1.4 * w.peek();
  const auto gv = g.to_vector(), wv = want.to_vector();
  for (std::size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == doctest::Approx(wv[i]).epsilon(1e-14));
}

TEST_CASE("regularizers: fit trains on, and reports, the loss plus the penalty; evaluate reports it") {
  const auto data = batches(1, 3);
  auto net = make_net(), twin = make_net();
  // One SGD step by hand: the gradient of cross-entropy + penalty.
  fx::optim::sgd opt_hand{0.1};
  const double hand_loss = penalty_data::step_by_hand(twin, opt_hand, data[0]);
  fx::optim::sgd opt{0.1};
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log});
  CHECK(history.loss[0] == doctest::Approx(hand_loss).epsilon(1e-14));
  penalty_data::check_same_variables(net.variables(), twin.variables(), 1e-14);
  // evaluate: the same sum, after the step.
  const fx::evaluation e = fx::evaluate(net, cross_entropy, data);
  const double want = fx::tensor<double>(cross_entropy(net(data[0].first), data[0].second)).item() +
                      net.regularization_loss().item();
  CHECK(e.loss == doctest::Approx(want).epsilon(1e-14));
}

TEST_CASE("regularizers: nn::compile_step adds the penalty's value and gradient as the tape-based step does") {
  auto a = make_net(), b = make_net();
  penalty_data::check_compiled_step(a, b);
}

TEST_CASE("regularizers: bad penalties are refused, naming the factory, the layer or the variable") {
  CHECK_THROWS_WITH_AS(reg::l2(-1), "regularizers::l2: l2 = -1.000000 must be finite and not negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(reg::l1_l2(0, std::nan("")), "regularizers::l1_l2: l2 = nan must be finite and not negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::dense<3>({.kernel_regularizer = {-0.5, 0}, .name = "head"}),
                       "dense 'head': kernel_regularizer.l1 = -0.500000 must be finite and not negative",
                       fx::invalid_argument);
  using conv = nn::conv2d<3, 3>;
  CHECK_THROWS_WITH_AS(conv({.use_bias = false, .bias_regularizer = reg::l2()}),
                       "conv2d 'conv2d': a bias_regularizer with use_bias = false has no bias to act on",
                       fx::invalid_argument);
  fx::variable<float> w{fx::zeros<float>({2}), "w"};
  CHECK_THROWS_WITH_AS(w.set_regularizer({0, INFINITY}), "set_regularizer: variable 'w': l2 = inf must be finite and not negative",
                       fx::invalid_argument);
  CHECK_FALSE(static_cast<bool>(w.regularizer()));  // unchanged
  // A penalty that overflows (a bias of 1e200, which tanh saturates: the data loss stays finite)
  // stops fit before the update, as any loss that is not finite does, and the compiled step too.
  auto net = make_net();
  net.layer<0>().bias().assign(fx::full<double>({4}, 1e200));
  const auto before = net.layer<2>().kernel().peek().to_vector();
  fx::optim::sgd opt{0.1};
  std::ostringstream log;
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, batches(1, 3), {.epochs = 1, .out = &log}),
                       doctest::Contains("fit: the loss is inf at epoch 1, step 1"), fx::numeric_error);
  CHECK(net.layer<2>().kernel().peek().to_vector() == before);
  auto step = nn::compile_step(net, opt, cross_entropy);
  const auto data = batches(1, 3);
  CHECK_THROWS_WITH_AS(step(data[0].first, data[0].second),
                       doctest::Contains("compiled_step: the loss is inf at optimizer iteration 0; the variables were "
                                         "not updated (the variables' regularization_loss)"),
                       fx::numeric_error);
  CHECK(net.layer<2>().kernel().peek().to_vector() == before);
}

}  // namespace regularizers_test
