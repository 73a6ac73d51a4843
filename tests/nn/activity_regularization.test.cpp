// Keras's ActivityRegularization and add_loss: the penalty of each call against a naive loop, its
// gradient against central differences (double), fx::fit's step and loss and fx::evaluate's loss
// against the same step by hand, nn::compile_step and nn::recompute against the tape-based step, a
// composite model's own add_loss (nested models pass theirs on), and the errors.
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "penalty_data.hpp"
#include "reverse_only.hpp"

namespace activity_regularization_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;
namespace reg = fluxion::nn::regularizers;

namespace {

using penalty_data::batches;
using penalty_data::cross_entropy;

auto make_net(double l1 = 0.01, double l2 = 0.02) {
  fx::random::generator gen{17};
  return nn::sequential(gen, nn::typed_input<double, 5>{}, nn::dense<4>{}, nn::tanh{},
                        nn::activity_regularization{l1, l2}, nn::dense<3>{});
}

/// tanh(x W + b) by loops: the activity the layer sees.
std::vector<double> naive_hidden(const fx::tensor<double>& x, const fx::tensor<double>& w, const fx::tensor<double>& b) {
  const auto xv = x.to_vector(), wv = w.to_vector(), bv = b.to_vector();
  const std::size_t n = static_cast<std::size_t>(x.shape()[0]), in = 5, out = 4;
  std::vector<double> h(n * out);
  for (std::size_t r = 0; r < n; ++r)
    for (std::size_t j = 0; j < out; ++j) {
      double s = bv[j];
      for (std::size_t k = 0; k < in; ++k) s += xv[r * in + k] * wv[k * out + j];
      h[r * out + j] = std::tanh(s);
    }
  return h;
}

double naive_penalty(const std::vector<double>& h, double l1, double l2) {
  double a = 0, b = 0;
  for (double v : h) a += std::abs(v), b += v * v;
  return l1 * a + l2 * b;
}

using penalty_data::check_same_variables;

}  // namespace

TEST_CASE("activity_regularization: the output is the input; each call's penalty is the model's added loss") {
  const auto data = batches(1, 3);
  const fx::tensor<double>& x = data[0].first;
  auto net = make_net(0.3, 0.7);
  fx::random::generator gen{17};
  auto plain = nn::sequential(gen, nn::typed_input<double, 5>{}, nn::dense<4>{}, nn::tanh{}, nn::dense<3>{});
  CHECK(net.added_losses().empty());  // before the first call
  const auto y = net(x).to_vector(), want = plain(x).to_vector();
  REQUIRE(y.size() == want.size());
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == want[i]);  // the same weights, drawn in the same order

  REQUIRE(net.added_losses().size() == 1);
  const double penalty =
      naive_penalty(naive_hidden(x, net.layer<0>().kernel().peek(), net.layer<0>().bias().peek()), 0.3, 0.7);
  CHECK(net.added_losses()[0].rank() == 0);
  CHECK(net.added_losses()[0].item() == doctest::Approx(penalty).epsilon(1e-14));
  // regularization_loss(): Keras's sum(model.losses), the variables' penalties (none here) and this.
  CHECK(net.regularization_loss().item() == doctest::Approx(penalty).epsilon(1e-14));
  CHECK(plain.regularization_loss().item() == 0);

  // Each call replaces the last one's (Keras's); inference calls add theirs too.
  const fx::tensor<double> half = fx::tensor<double>(x * 0.5);
  net(half, false);
  REQUIRE(net.added_losses().size() == 1);
  CHECK(net.added_losses()[0].item() ==
        doctest::Approx(naive_penalty(naive_hidden(half, net.layer<0>().kernel().peek(), net.layer<0>().bias().peek()), 0.3, 0.7))
            .epsilon(1e-14));

  // Keras's defaults, l1 = l2 = 0, add nothing.
  auto none = make_net(0, 0);
  none(x);
  CHECK(none.added_losses().empty());
  CHECK(none.layer<2>().penalty().l1 == 0);
  CHECK(nn::activity_regularization{reg::l1(1e-5)}.penalty().l1 == 1e-5);
  CHECK(net.summary().find("activity_regularization") != std::string::npos);
}

TEST_CASE("activity_regularization: the gradient of the loss with the penalty against central differences (double)") {
  const auto data = batches(1, 5);
  auto net = make_net(0.3, 0.7);
  auto r = fx::testing::check_gradients(
      [&](const auto& x) {
        const fx::tensor<double> y = net(x, true);
        return fx::tensor<double>(fx::reduce_sum(fx::square(y)) * 0.1 + net.regularization_loss());
      },
      test::reverse_only, data[0].first);
  CHECK_MESSAGE(r.ok, r.report);
  // And with respect to the first layer's kernel: the penalty's term alone, as the tape gives it.
  fx::gradient_tape tape;
  net(data[0].first, true);
  const fx::tensor<double> p = net.regularization_loss();
  const fx::tensor<double> g = tape.gradient(p, net.layer<0>().kernel());
  // d/dW of sum(0.3 |h| + 0.7 h^2) with h = tanh(x W + b): x^T ((0.3 sign(h) + 1.4 h) (1 - h^2)).
  const auto xv = data[0].first.to_vector();
  const auto h = naive_hidden(data[0].first, net.layer<0>().kernel().peek(), net.layer<0>().bias().peek());
  const auto gv = g.to_vector();
  for (std::size_t k = 0; k < 5; ++k)
    for (std::size_t j = 0; j < 4; ++j) {
      double want = 0;
      for (std::size_t r = 0; r < 6; ++r) {
        const double hv = h[r * 4 + j];
        want += xv[r * 5 + k] * (0.3 * (hv > 0 ? 1 : -1) + 1.4 * hv) * (1 - hv * hv);
      }
      CHECK(gv[k * 4 + j] == doctest::Approx(want).epsilon(1e-12));
    }
}

TEST_CASE("activity_regularization: fit trains on, and reports, the loss plus the penalty; evaluate reports it") {
  const auto data = batches(1, 3);
  auto net = make_net(), twin = make_net();
  fx::optim::sgd opt_hand{0.1};
  const double hand_loss = penalty_data::step_by_hand(twin, opt_hand, data[0]);
  auto plain = make_net(0, 0);  // without the penalty the step differs
  fx::optim::sgd opt{0.1}, opt_plain{0.1};
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log});
  const auto plain_history = fx::fit(plain, opt_plain, cross_entropy, data, {.epochs = 1, .out = &log});
  CHECK(history.loss[0] == doctest::Approx(hand_loss).epsilon(1e-14));
  CHECK(history.loss[0] > plain_history.loss[0] + 1e-3);
  check_same_variables(net.variables(), twin.variables(), 1e-14);
  CHECK(net.layer<0>().kernel().peek().to_vector() != plain.layer<0>().kernel().peek().to_vector());

  const fx::evaluation e = fx::evaluate(net, cross_entropy, data);
  const double want = fx::tensor<double>(cross_entropy(net(data[0].first), data[0].second)).item();
  const double want_total = want + net.regularization_loss().item();
  CHECK(e.loss == doctest::Approx(want_total).epsilon(1e-14));
  // predict runs the model as a call: nothing to add, nothing thrown.
  CHECK(fx::predict(net, std::vector<fx::tensor<double>>{data[0].first}).shape() == fx::shape{6, 3});
}

TEST_CASE("activity_regularization: nn::compile_step and nn::recompute differentiate the penalty as the tape does") {
  auto a = make_net(), b = make_net();
  penalty_data::check_compiled_step(a, b);
  REQUIRE(b.added_losses().size() == 1);  // the compiled step's call kept its penalty too

  const auto data = batches(1, 8);

  // The penalty inside a recomputed segment: its value where the segment first ran, its gradient
  // from the recomputation in the backward pass.
  using segment = nn::sequential_t<nn::typed_input<double, 5>, nn::dense<4>, nn::tanh, nn::activity_regularization>;
  fx::random::generator gen{17};
  auto checkpointed = nn::sequential(gen, nn::typed_input<double, 5>{},
                                     nn::recompute<segment>{segment(gen, nn::dense<4, double>{}, nn::tanh{},
                                                                    nn::activity_regularization{0.01, 0.02})},
                                     nn::dense<3>{});
  auto direct = make_net();
  {
    const auto vd = direct.variables(), vc = checkpointed.variables();
    REQUIRE(vd.size() == vc.size());
    for (std::size_t i = 0; i < vd.size(); ++i) vc[i]->assign(vd[i]->peek());  // the same weights
  }
  const auto& [x, y] = data[0];
  fx::gradient_tape t1;
  const fx::tensor<double> o1 = direct(x, true);
  const fx::tensor<double> l1 = cross_entropy(o1, y) + direct.regularization_loss();
  const auto g1 = t1.gradient(l1, direct.trainable_variables());
  fx::gradient_tape t2;
  const fx::tensor<double> o2 = checkpointed(x, true);
  const fx::tensor<double> l2 = cross_entropy(o2, y) + checkpointed.regularization_loss();
  REQUIRE(checkpointed.added_losses().size() == 1);
  const auto g2 = t2.gradient(l2, checkpointed.trainable_variables());
  CHECK(l2.item() == doctest::Approx(l1.item()).epsilon(1e-14));
  REQUIRE(g1.size() == g2.size());
  for (std::size_t i = 0; i < g1.size(); ++i) {
    const auto u = g1[i].to_vector(), v = g2[i].to_vector();
    REQUIRE(u.size() == v.size());
    for (std::size_t j = 0; j < u.size(); ++j) CHECK(v[j] == doctest::Approx(u[j]).epsilon(1e-12));
  }
}

namespace {
/// A composite model with a loss of its own (a variational autoencoder's KL term, simplified): a
/// nested sequential with an activity_regularization passes its penalty on too.
struct with_kl : nn::model<with_kl, double> {
  nn::sequential_t<nn::typed_input<double, 5>, nn::dense<4>, nn::tanh, nn::activity_regularization> trunk{
      gen, nn::dense<4, double>{}, nn::tanh{}, nn::activity_regularization{0.05}};
  nn::dense<3, double> head;
  FLUXION_LAYERS(trunk, head)
  static inline fx::random::generator gen{29};
  fx::tensor<double> call(const fx::tensor<double>& x, bool training = false) {
    const fx::tensor<double> h = trunk(x, training);
    nn::add_loss(fx::tensor<double>(0.25 * fx::reduce_mean(fx::square(h))));
    return head(h, training);
  }
};
}  // namespace

TEST_CASE("nn::add_loss: a composite model's loss and its members' count in fit, as in a step by hand") {
  const auto data = batches(2, 11);
  with_kl net, twin;
  twin(data[0].first);  // built, then given net's values
  net(data[0].first);
  const auto vn = net.variables(), vt = twin.variables();
  for (std::size_t i = 0; i < vn.size(); ++i) vt[i]->assign(vn[i]->peek());
  REQUIRE(net.added_losses().size() == 2);  // the trunk's penalty, then the model's own
  REQUIRE(net.trunk.added_losses().size() == 1);
  CHECK(net.added_losses()[0].item() == net.trunk.added_losses()[0].item());
  const fx::tensor<double> h = net.trunk.layer<1>()(net.trunk.layer<0>()(data[0].first));
  double l1 = 0, sq = 0;
  for (double v : h.to_vector()) l1 += std::abs(v), sq += v * v;
  CHECK(net.added_losses()[0].item() == doctest::Approx(0.05 * l1).epsilon(1e-14));
  CHECK(net.added_losses()[1].item() == doctest::Approx(0.25 * sq / static_cast<double>(h.size())).epsilon(1e-14));

  fx::optim::sgd opt_hand{0.2};
  std::vector<double> hand_losses;
  for (const auto& b : data) hand_losses.push_back(penalty_data::step_by_hand(twin, opt_hand, b));
  fx::optim::sgd opt{0.2};
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log});
  CHECK(history.loss[0] == doctest::Approx((hand_losses[0] + hand_losses[1]) / 2).epsilon(1e-13));
  check_same_variables(net.variables(), twin.variables(), 1e-13);
}

TEST_CASE("activity_regularization and add_loss: bad input fails cleanly, naming what and where") {
  CHECK_THROWS_WITH_AS(nn::activity_regularization(-0.5, 0, "sparse"),
                       "activity_regularization 'sparse': activity_regularizer.l1 = -0.500000 must be finite and not negative",
                       fx::invalid_argument);
  CHECK_THROWS_AS(nn::activity_regularization(0, std::numeric_limits<double>::infinity()), fx::invalid_argument);
  const fx::tensor<double> x = fx::ones<double>({2, 3});
  // Outside every model's call the penalty would count nowhere.
  CHECK_THROWS_WITH_AS(nn::activity_regularization(0.1)(x),
                       doctest::Contains("activity_regularization 'activity_regularization': called outside every model's call"),
                       fx::error);
  CHECK_THROWS_WITH_AS(nn::add_loss(fx::tensor<double>(fx::reduce_sum(x))),
                       doctest::Contains("nn::add_loss: no model's call is running on this thread"), fx::error);
  {
    nn::loss_scope<double> scope;  // a scope of one's own gathers them
    nn::activity_regularization(0.1)(x);
    nn::add_loss(fx::tensor<double>(fx::reduce_sum(x)));
    REQUIRE(scope.losses().size() == 2);
    CHECK(scope.total().item() == doctest::Approx(0.6 + 6.0).epsilon(1e-15));
    CHECK_THROWS_WITH_AS(nn::add_loss(x), "nn::add_loss: the loss must be one value, got shape (2, 3); reduce it with "
                                          "fx::reduce_sum or fx::reduce_mean first",
                         fx::shape_error);
    CHECK(scope.losses().size() == 2);
  }
  {
    // A loss of shape (1,) is one value: kept as a scalar, and differentiable through the reshape.
    const fx::tensor<double> w = fx::from_vector(std::vector<double>{1, -2, 3}, {3});
    fx::gradient_tape tape;
    tape.watch(w);
    nn::loss_scope<double> scope;
    nn::add_loss(fx::tensor<double>(fx::reshape(fx::reduce_sum(w * w), {1})));
    REQUIRE(scope.losses().size() == 1);
    CHECK(scope.losses()[0].rank() == 0);
    const fx::tensor<double> g = tape.gradient(scope.total(), w);
    CHECK(g.to_vector() == std::vector<double>{2, -4, 6});
  }
  CHECK(nn::loss_scope<double>::innermost() == nullptr);

  // Reading regularization_loss() before the call (what g++ does with `loss_fn(net(x), y) +
  // net.regularization_loss()`) would add the last call's penalty, from under another tape.
  auto net = make_net();
  {
    fx::gradient_tape step1;
    net(fx::ones<double>({2, 5}), true);
  }
  {
    fx::gradient_tape step2;
    CHECK_THROWS_WITH_AS(net.regularization_loss(),
                         doctest::Contains("'sequential'.regularization_loss(): the losses its layers added"), fx::error);
    const fx::tensor<double> y = net(fx::ones<double>({2, 5}), true);
    CHECK(net.regularization_loss().item() > 0);  // after the call: this tape's
  }

  // A loss that is not finite stops fit before the update, naming the added loss: 1e200 squared
  // overflows where the model's output (and the cross-entropy) stays finite.
  auto data = batches(1, 3);
  auto xv = data[0].first.to_vector();
  xv[0] = 1e200;
  data[0].first = fx::from_vector(xv, {6, 5});
  auto bad = nn::sequential(nn::typed_input<double, 5>{}, nn::activity_regularization{0, 0.01}, nn::dense<3>{});
  fx::optim::sgd opt{0.1};
  std::ostringstream log;
  const auto before = bad.layer<1>().kernel().peek().to_vector();
  CHECK_THROWS_WITH_AS(fx::fit(bad, opt, cross_entropy, data, {.epochs = 1, .out = &log}),
                       doctest::Contains("(loss 0 of those the model's layers added, nn::add_loss or activity_regularization, is inf)"),
                       fx::numeric_error);
  CHECK(bad.layer<1>().kernel().peek().to_vector() == before);
}

}  // namespace activity_regularization_test
