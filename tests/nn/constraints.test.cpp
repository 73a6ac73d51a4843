// Keras's weight constraints: each projection, applied by the optimizer after an update, against a
// naive loop of Keras's formula (double); the layers' kernel_constraint and bias_constraint, an
// embedding's rows, fx::fit and nn::compile_step keeping them; gradient accumulation applying them
// at updates only; and the errors.
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <utility>
#include <vector>

namespace constraints_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;
namespace con = fluxion::nn::constraints;

namespace {

/// Keras's projection of a row-major (rows, cols) matrix with the norms over axis 0 (each column):
/// w * (rate * clip(n, lo, hi) + (1 - rate) * n) / (1e-7 + n).
std::vector<double> naive_columns(std::vector<double> w, fx::index_t rows, fx::index_t cols, double lo, double hi,
                                  double rate) {
  for (fx::index_t c = 0; c < cols; ++c) {
    double n = 0;
    for (fx::index_t r = 0; r < rows; ++r) n += w[static_cast<std::size_t>(r * cols + c)] * w[static_cast<std::size_t>(r * cols + c)];
    n = std::sqrt(n);
    const double scale = (rate * std::min(std::max(n, lo), hi) + (1 - rate) * n) / (1e-7 + n);
    for (fx::index_t r = 0; r < rows; ++r) w[static_cast<std::size_t>(r * cols + c)] *= scale;
  }
  return w;
}

/// One SGD(lr) step of sum(dense(x)^2) on `fc` by hand: the kernel's value after the update,
/// before any constraint.
std::vector<double> stepped_kernel(nn::dense<3, double>& fc, const fx::tensor<double>& x, double lr) {
  fx::gradient_tape tape;
  const fx::tensor<double> loss = fx::reduce_sum(fx::square(fc(x)));
  const fx::tensor<double> g = tape.gradient(loss, fc.kernel());
  return fx::tensor<double>(fc.kernel().peek() - lr * g).to_vector();
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-14) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (tol == 0) CHECK(got[i] == want[i]);
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}

}  // namespace

TEST_CASE("constraints: Keras's factories and defaults") {
  CHECK(con::max_norm() == fx::constraint{fx::constraint::kind::max_norm, 0, 2, 1, {0}});
  CHECK(con::min_max_norm() == fx::constraint{fx::constraint::kind::min_max_norm, 0, 1, 1, {0}});
  CHECK(con::unit_norm({0, 1, 2}).axes == std::vector<int>{0, 1, 2});
  CHECK(con::non_neg().which == fx::constraint::kind::non_neg);
  CHECK_FALSE(static_cast<bool>(fx::constraint{}));
}

TEST_CASE("constraints: max_norm, min_max_norm and unit_norm after an SGD step equal Keras's formula") {
  struct kase {
    fx::constraint c;
    double lo, hi, rate;
  };
  const std::vector<kase> cases = {{con::max_norm(0.8), 0, 0.8, 1},
                                   {con::min_max_norm(0.5, 0.9, 0.25), 0.5, 0.9, 0.25},
                                   {con::unit_norm(), 1, 1, 1}};
  for (const auto& k : cases) {
    CAPTURE(static_cast<int>(k.c.which));
    fx::random::generator gen{3};
    nn::dense<3, double> fc{{.kernel_constraint = k.c}};
    fc.build(fx::shape{4}, gen);
    const fx::tensor<double> x = fx::random::normal<double>({5, 4}, gen);
    const std::vector<double> updated = stepped_kernel(fc, x, 0.05);
    fx::optim::sgd opt{0.05};
    fx::gradient_tape tape;
    const fx::tensor<double> loss = fx::reduce_sum(fx::square(fc(x)));
    auto vars = fc.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    check_close(fc.kernel().peek().to_vector(), naive_columns(updated, 4, 3, k.lo, k.hi, k.rate));
  }
}

TEST_CASE("constraints: a convolution's filters over axes {0, 1, 2}, non_neg, and an embedding's rows") {
  fx::random::generator gen{4};
  auto net = nn::sequential(gen, nn::typed_input<double, 6, 6, 2>{},
                            nn::conv2d<3, 3>{{.kernel_constraint = con::unit_norm({0, 1, 2}), .bias_constraint = con::non_neg()}},
                            nn::flatten{}, nn::dense<2>{});
  const fx::tensor<double> x = fx::random::normal<double>({4, 6, 6, 2}, gen);
  fx::optim::sgd opt{0.5};
  for (int step = 0; step < 3; ++step) {
    fx::gradient_tape tape;
    const fx::tensor<double> loss = fx::reduce_sum(fx::square(net(x, true) - 3.0));
    auto vars = net.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  const auto k = net.layer<0>().kernel().peek().to_vector();  // (3, 3, 2, 3): filter f at k[i * 3 + f]
  for (int f = 0; f < 3; ++f) {
    double n = 0;
    for (std::size_t i = 0; i < k.size() / 3; ++i) n += k[i * 3 + static_cast<std::size_t>(f)] * k[i * 3 + static_cast<std::size_t>(f)];
    CHECK(std::sqrt(n) == doctest::Approx(1).epsilon(1e-6));  // n / (1e-7 + n), n its norm before
  }
  for (double b : net.layer<0>().bias().peek().to_vector()) CHECK(b >= 0);

  // non_neg on a dense kernel: w * (w >= 0) of the updated values.
  nn::dense<3, double> fc{{.kernel_constraint = con::non_neg()}};
  fc.build(fx::shape{4}, gen);
  const fx::tensor<double> xd = fx::random::normal<double>({5, 4}, gen);
  std::vector<double> want = stepped_kernel(fc, xd, 1.0);
  for (double& v : want) v = v >= 0 ? v : 0;
  fx::optim::sgd big{1.0};
  fx::gradient_tape tape;
  const fx::tensor<double> loss = fx::reduce_sum(fx::square(fc(xd)));
  auto vars = fc.trainable_variables();
  big.apply_gradients(tape.gradient(loss, vars), vars);
  check_close(fc.kernel().peek().to_vector(), want, 0);

  // An embedding whose rows keep norm 1 (unit_norm over axis 1).
  nn::embedding<5, 4, double> table{{.embeddings_constraint = con::unit_norm({1})}};
  table.build();
  fx::optim::sgd sgd{0.3};
  fx::gradient_tape t2;
  const fx::tensor<double> l2 = fx::reduce_sum(table(fx::tensor<std::int32_t>{{0, 2}, {2, 4}}));
  auto tv = table.trainable_variables();
  sgd.apply_gradients(t2.gradient(l2, tv), tv);
  const auto rows = table.embeddings().peek().to_vector();
  for (int r = 0; r < 5; ++r) {
    double n = 0;
    for (int c = 0; c < 4; ++c) n += rows[static_cast<std::size_t>(r * 4 + c)] * rows[static_cast<std::size_t>(r * 4 + c)];
    // n / (1e-7 + n) of rows whose norms were near 0.05 (uniform(-0.05, 0.05) values): 1 - 2e-6.
    CHECK(std::sqrt(n) == doctest::Approx(1).epsilon(1e-5));
  }
}

TEST_CASE("constraints: fit and compile_step keep them; gradient accumulation applies them at updates only") {
  using batch = std::pair<fx::tensor<double>, fx::tensor<std::int32_t>>;
  fx::random::generator gen{9};
  std::vector<batch> data;
  for (int i = 0; i < 4; ++i) data.emplace_back(fx::random::normal<double>({8, 5}, gen), fx::tensor<std::int32_t>{0, 1, 2, 0, 1, 2, 0, 1});
  auto loss_fn = [](const auto& logits, const auto& labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
  auto make = [] {
    fx::random::generator g{2};
    return nn::sequential(g, nn::typed_input<double, 5>{}, nn::dense<4>{{.kernel_constraint = con::max_norm(0.3)}},
                          nn::tanh{}, nn::dense<3>{});
  };
  auto column_norms_at_most = [](const std::vector<double>& k, fx::index_t rows, fx::index_t cols, double most) {
    for (fx::index_t c = 0; c < cols; ++c) {
      double n = 0;
      for (fx::index_t r = 0; r < rows; ++r) n += k[static_cast<std::size_t>(r * cols + c)] * k[static_cast<std::size_t>(r * cols + c)];
      CHECK(std::sqrt(n) <= most);
    }
  };
  auto a = make();
  fx::optim::adam opt_a{0.1};
  std::ostringstream log;
  (void)fx::fit(a, opt_a, loss_fn, data, {.epochs = 2, .out = &log});
  column_norms_at_most(a.layer<0>().kernel().peek().to_vector(), 5, 4, 0.3);

  auto b = make();
  fx::optim::adam opt_b{0.1};
  auto step = nn::compile_step(b, opt_b, loss_fn);
  for (const auto& [x, y] : data) (void)step(x, y);
  column_norms_at_most(b.layer<0>().kernel().peek().to_vector(), 5, 4, 0.3);

  // The initial kernel breaks the constraint (glorot's columns have norms near 1): a call that only
  // accumulates leaves it as it is; the update then projects it.
  auto c = make();
  const auto initial = c.layer<0>().kernel().peek().to_vector();
  fx::optim::sgd acc{{.learning_rate = 0.1, .gradient_accumulation_steps = 2}};
  for (int i = 0; i < 2; ++i) {
    fx::gradient_tape tape;
    const fx::tensor<double> loss = loss_fn(c(data[static_cast<std::size_t>(i)].first, true), data[static_cast<std::size_t>(i)].second);
    auto vars = c.trainable_variables();
    acc.apply_gradients(tape.gradient(loss, vars), vars);
    if (i == 0) CHECK(c.layer<0>().kernel().peek().to_vector() == initial);
  }
  column_norms_at_most(c.layer<0>().kernel().peek().to_vector(), 5, 4, 0.3);
}

TEST_CASE("constraints: bad bounds and axes are refused, naming the factory, the layer or the variable") {
  CHECK_THROWS_WITH_AS(con::max_norm(-1), "constraints::max_norm: max_value = -1.000000 must be finite and not negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(con::min_max_norm(2, 1), "constraints::min_max_norm: min_value = 2.000000 is above max_value = 1.000000",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(con::min_max_norm(0, 1, 1.5), "constraints::min_max_norm: rate = 1.500000 must be in [0, 1]",
                       fx::invalid_argument);
  using conv = nn::conv2d<3, 3>;
  CHECK_THROWS_WITH_AS(conv({.use_bias = false, .bias_constraint = con::non_neg()}),
                       "conv2d 'conv2d': a bias_constraint with use_bias = false has no bias to act on",
                       fx::invalid_argument);
  // An axis the kernel does not have: when the layer is built, naming the variable.
  nn::dense<3> fc{{.kernel_constraint = con::max_norm(2, {2}), .name = "head"}};
  CHECK_THROWS_WITH_AS(fc.build(fx::shape{4}),
                       "set_constraint: variable 'head/kernel' of shape (4, 3): the constraint's axis 2 is not in [-2, 2)",
                       fx::invalid_argument);
  CHECK_FALSE(fc.built());  // as before the call: no half-built layer
  nn::lstm<2> rnn{{.recurrent_constraint = con::max_norm(1, {0, 1, 2})}};
  CHECK_THROWS_AS(rnn.build(fx::shape{3, 4}), fx::invalid_argument);
  CHECK_FALSE(rnn.built());
  fx::variable<float> w{fx::zeros<float>({2, 3}), "w"};
  CHECK_THROWS_WITH_AS(w.set_constraint(con::unit_norm({0, -2})),
                       "set_constraint: variable 'w' of shape (2, 3): the constraint's axis -2 is repeated", fx::invalid_argument);
  CHECK_FALSE(static_cast<bool>(w.constraint()));
}

}  // namespace constraints_test
