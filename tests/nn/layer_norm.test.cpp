// fx::nn::layer_norm: gradients against finite differences (double), values against a naive loop,
// variables, a sequential model with a fused activation, errors. With these settings (first
// order, no forward mode) the layer's backward pass is the hand-written one (layer_norm.hpp);
// norm_second_order.test.cpp checks the tape's rules for the same statements at order 2.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <type_traits>
#include <vector>
#include "norm_checks.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

using test::reverse_only;

/// Each row of the last axis: gamma (x - mean) / sqrt(var + eps) + beta, var biased.
std::vector<double> naive_layer_norm(const std::vector<double>& x, const std::vector<double>& gamma,
                                     const std::vector<double>& beta, double eps) {
  const std::size_t n = gamma.size();
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double mean = 0, var = 0;
    for (std::size_t i = 0; i < n; ++i) mean += x[r * n + i] / static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) var += (x[r * n + i] - mean) * (x[r * n + i] - mean) / static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) y[r * n + i] = gamma[i] * (x[r * n + i] - mean) / std::sqrt(var + eps) + beta[i];
  }
  return y;
}

/// check_gradients with respect to the input and gamma (assigned to the layer at each call).
template <class Layer>
void check_input_and_gamma_gradients(Layer& layer, const fx::tensor<double>& x, const fx::tensor<double>& g) {
  auto r = fx::testing::check_gradients(
      [&](const auto& xi, const auto& gi) {
        layer.gamma().assign(gi);
        return layer(xi);
      },
      reverse_only, x, g);
  CHECK_MESSAGE(r.ok, r.report);
}

}  // namespace

TEST_CASE("layer_norm: gradients with respect to the input, gamma and beta") {
  fx::random::generator gen{6};
  nn::layer_norm<double> layer;
  layer.build(fx::shape{4});
  for (const fx::shape& s : {fx::shape{3, 4}, fx::shape{2, 3, 4}, fx::shape{1, 4}}) {
    CAPTURE(s);
    const fx::tensor<double> x = fx::random::normal<double>(s, gen, 0.5, 2.0);
    const fx::tensor<double> g = fx::random::uniform<double>({4}, gen, 0.5, 1.5), b = fx::random::normal<double>({4}, gen);
    auto r = fx::testing::check_gradients(
        [&](const auto& xi, const auto& gi, const auto& bi) {
          layer.gamma().assign(gi);
          layer.beta().assign(bi);
          return layer(xi);
        },
        reverse_only, x, g, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

TEST_CASE("layer_norm: the cpu's row kernel agrees with the recorded statements, with long rows") {
  // The statements the layer runs with other autodiff settings (layer_norm.hpp, after the #else),
  // written out here, against the cpu's row kernel (layer_norm_rows), which sums in another order:
  // within rounding. Rows of 40 and 300 features (vectors and a tail), float and double.
  fx::random::generator gen{9};
  auto check = [&]<class T>(T, const fx::shape& s) {
    CAPTURE(s);
    const fx::index_t n = s[s.rank() - 1];
    const fx::tensor<T> x = fx::random::normal<T>(s, gen, T(0.5), T(2));
    const fx::tensor<T> g = fx::random::uniform<T>({n}, gen, T(0.5), T(1.5)), b = fx::random::normal<T>({n}, gen);
    nn::layer_norm<T> plain;
    nn::layer_norm<T> rms{{.rms_scaling = true}};
    plain.build(fx::shape{n});
    rms.build(fx::shape{n});
    plain.gamma().assign(g);
    plain.beta().assign(b);
    rms.gamma().assign(g);
    const T eps = T(1e-3);
    const fx::tensor<T> mean = fx::reduce_mean(x, -1, fx::keepdims);
    const fx::tensor<T> variance = fx::reduce_mean(fx::square(x - mean), -1, fx::keepdims);
    const fx::tensor<T> want = (x - mean) * fx::rsqrt(variance + eps) * g + b;
    // RMS: the same statements with a mean of zeros and beta's zeros.
    std::vector<fx::index_t> row_stats = s.to_vector();
    row_stats.back() = 1;
    const fx::tensor<T> zero_mean = fx::zeros<T>(fx::shape(row_stats));
    const fx::tensor<T> mean_square = fx::reduce_mean(fx::square(x - zero_mean), -1, fx::keepdims);
    const fx::tensor<T> want_rms = (x - zero_mean) * fx::rsqrt(mean_square + eps) * g + fx::zeros<T>({n});
    fx::gradient_tape tape;  // under a tape: the custom gradient's forward pass
    tape.watch(x);
    const double tolerance = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    auto agrees = [&](const fx::tensor<T>& got, const fx::tensor<T>& expected) {
      REQUIRE(got.shape() == expected.shape());
      const auto gv = got.to_vector(), ev = expected.to_vector();
      for (std::size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == doctest::Approx(ev[i]).epsilon(tolerance).scale(1));
    };
    agrees(plain(x), want);
    agrees(rms(x), want_rms);
  };
  for (const fx::shape& s : {fx::shape{6, 40}, fx::shape{3, 5, 300}, fx::shape{1, 300}}) {
    check(0.0f, s);
    check(0.0, s);
  }
}

TEST_CASE("layer_norm: over many rows (several tasks of the row kernel), gradients against the formula") {
  // (1000, 40): the row kernel splits the rows into 3 tasks and adds gamma's and beta's partial
  // sums; too many elements for finite differences, so the gradients are checked against the
  // formula written as statements: dx = rstd (dy g - mean(dy g) - xhat mean(dy g xhat)),
  // dgamma = sum(dy xhat), dbeta = sum(dy) (RMS: no mean, no mean(dy g) term).
  fx::random::generator gen{11};
  const fx::tensor<double> x = fx::random::normal<double>({1000, 40}, gen, 0.5, 2.0);
  const fx::tensor<double> w = fx::random::normal<double>({1000, 40}, gen);
  const fx::tensor<double> g = fx::random::uniform<double>({40}, gen, 0.5, 1.5), b = fx::random::normal<double>({40}, gen);
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    nn::layer_norm<double> layer{{.rms_scaling = rms}};
    layer.build(fx::shape{40});
    layer.gamma().assign(g);
    if (!rms) layer.beta().assign(b);
    auto vars = layer.trainable_variables();
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<double> y = layer(x);
    std::vector<const fx::tensor<double>*> sources{&x};
    for (auto* v : vars) sources.push_back(&v->peek());
    const auto grads = tape.gradient(fx::reduce_sum(y * w), sources);

    const fx::tensor<double> mean = rms ? fx::zeros<double>({1000, 1}) : fx::tensor<double>(fx::reduce_mean(x, -1, fx::keepdims));
    const fx::tensor<double> rstd = fx::rsqrt(fx::reduce_mean(fx::square(x - mean), -1, fx::keepdims) + 1e-3);
    const fx::tensor<double> xhat = (x - mean) * rstd, dxhat = w * g;
    const fx::tensor<double> a = rms ? fx::zeros<double>({1000, 1}) : fx::tensor<double>(fx::reduce_mean(dxhat, -1, fx::keepdims));
    const fx::tensor<double> c = fx::reduce_mean(dxhat * xhat, -1, fx::keepdims);
    const std::vector<fx::tensor<double>> want{rstd * (dxhat - a - xhat * c), fx::reduce_sum(w * xhat, {0}),
                                               fx::reduce_sum(w, {0})};
    REQUIRE(grads.size() == (rms ? 2u : 3u));
    for (std::size_t k = 0; k < grads.size(); ++k) {
      CAPTURE(k);
      REQUIRE(grads[k].shape() == want[k].shape());
      const auto got = grads[k].to_vector(), expected = want[k].to_vector();
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(expected[i]).epsilon(1e-10).scale(1));
    }
    // The same bits with one thread as with two: the tasks do not depend on the thread count.
    const int threads = fx::get_num_threads();
    fx::set_num_threads(1);
    fx::gradient_tape tape1;
    tape1.watch(x);
    const fx::tensor<double> y1 = layer(x);
    const auto grads1 = tape1.gradient(fx::reduce_sum(y1 * w), sources);
    fx::set_num_threads(threads);
    CHECK(y1.to_vector() == y.to_vector());
    for (std::size_t k = 0; k < grads.size(); ++k) CHECK(grads1[k].to_vector() == grads[k].to_vector());
  }
}

TEST_CASE("layer_norm: gradients with long rows, and with a relu after it in a sequential model") {
  fx::random::generator gen{10};
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    nn::layer_norm<double> layer{{.rms_scaling = rms}};
    layer.build(fx::shape{37}, gen);
    const fx::tensor<double> x = fx::random::normal<double>({2, 3, 37}, gen, 0.5, 2.0);
    const fx::tensor<double> g = fx::random::uniform<double>({37}, gen, 0.5, 1.5);
    check_input_and_gamma_gradients(layer, x, g);
  }
  auto net = nn::sequential(gen, nn::typed_input<double, 4, 6>{}, nn::layer_norm{}, nn::relu{});
  const fx::tensor<double> x = fx::random::normal<double>({3, 4, 6}, gen, 0.5, 2.0);
  auto r = fx::testing::check_gradients([&](const auto& xi) { return net(xi, /*training=*/true); }, reverse_only, x);
  CHECK_MESSAGE(r.ok, r.report);
  test::check_beta_counts_positive_outputs(net, x, 6);
  // Rows of 37 (vectors and a tail) with the relu in the cpu kernel's passes, and RMS normalization
  // with it: gradients against finite differences, and the output of the layer and a relu apart.
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    auto long_rows = nn::sequential(gen, nn::typed_input<double, 3, 37>{},
                                    nn::layer_norm<double>{{.rms_scaling = rms}}, nn::relu{});
    const fx::tensor<double> xl = fx::random::normal<double>({2, 3, 37}, gen, 0.5, 2.0);
    auto rl = fx::testing::check_gradients([&](const auto& xi) { return long_rows(xi, /*training=*/true); },
                                           reverse_only, xl);
    CHECK_MESSAGE(rl.ok, rl.report);
    nn::layer_norm<double> alone{{.rms_scaling = rms}};
    alone.build(fx::shape{37});
    alone.gamma().assign(long_rows.layer<0>().gamma().peek());
    if (!rms) alone.beta().assign(long_rows.layer<0>().beta().peek());
    const auto want = fx::tensor<double>(fx::relu(alone(xl))).to_vector(), y = long_rows(xl).to_vector();
    REQUIRE(y.size() == want.size());
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-13));
  }
}

TEST_CASE("layer_norm: values against a naive loop, the same in training and inference") {
  fx::random::generator gen{1};
  nn::layer_norm<double> layer{1e-2};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 5}, gen, 1.0, 3.0);
  layer(x);
  const std::vector<double> gamma{0.5, 1.0, 1.5, 2.0, 2.5}, beta{-1.0, 0.0, 1.0, 2.0, 3.0};
  layer.gamma().assign(fx::from_vector(gamma, {5}));
  layer.beta().assign(fx::from_vector(beta, {5}));
  const std::vector<double> want = naive_layer_norm(x.to_vector(), gamma, beta, 1e-2);
  for (bool training : {false, true}) {
    const fx::tensor<double> y = layer(x, training);
    REQUIRE(y.shape() == x.shape());
    const auto got = y.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  std::vector<std::string> names;
  for (auto* v : layer.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"layer_normalization/gamma", "layer_normalization/beta"});
}

TEST_CASE("layer_norm: in a sequential model, epsilon is kept and the activation is fused") {
  fx::random::generator gen{2};
  auto net = nn::sequential(gen, nn::typed_input<double, 3, 4>{}, nn::layer_norm{0.5}, nn::tanh{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<3, 4>>);
  CHECK(net.layer<0>().epsilon() == 0.5);
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4}, gen);
  const auto y = fx::tensor<double>(net(x)).to_vector();
  auto want = naive_layer_norm(x.to_vector(), std::vector<double>(4, 1.0), std::vector<double>(4, 0.0), 0.5);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(std::tanh(want[i])).epsilon(1e-12));
}

TEST_CASE("layer_norm: errors name the layer and the shapes") {
  nn::layer_norm<> layer{"ln"};
  layer(fx::zeros<float>({2, 4}));
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 5})), "layer_norm 'ln': expects input of shape (batch, ..., 4), got (2, 5)",
                       fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({4})), fx::shape_error);
  CHECK_THROWS_AS(nn::layer_norm<>(-1.0), fx::invalid_argument);
}

namespace {
/// Keras 3's rms_scaling: each row of the last axis, gamma x / sqrt(mean(x^2) + eps).
std::vector<double> naive_rms_norm(const std::vector<double>& x, const std::vector<double>& gamma, double eps) {
  const std::size_t n = gamma.size();
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / n; ++r) {
    double ms = 0;
    for (std::size_t i = 0; i < n; ++i) ms += x[r * n + i] * x[r * n + i] / static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) y[r * n + i] = gamma[i] * x[r * n + i] / std::sqrt(ms + eps);
  }
  return y;
}
}  // namespace

TEST_CASE("layer_norm options: rms_scaling is RMS normalization, with gamma only") {
  fx::random::generator gen{7};
  nn::layer_norm<double> layer{{.epsilon = 1e-2, .rms_scaling = true, .name = "rms"}};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 5}, gen, 1.0, 2.0);
  layer(x);
  std::vector<std::string> names;
  for (auto* v : layer.variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"rms/gamma"});
  CHECK_THROWS_WITH_AS(layer.beta(), "layer_norm 'rms': the layer has no beta (it was made with rms_scaling = true, so center = false)",
                       fx::invalid_argument);
  const std::vector<double> gamma{0.5, 1.0, 1.5, 2.0, -1.0};
  layer.gamma().assign(fx::from_vector(gamma, {5}));
  const std::vector<double> want = naive_rms_norm(x.to_vector(), gamma, 1e-2);
  const auto got = fx::tensor<double>(layer(x, true)).to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  // Keras ignores center and scale with rms_scaling: still gamma alone.
  nn::layer_norm<double> ignored{{.center = true, .scale = false, .rms_scaling = true}};
  ignored.build(fx::shape{5});
  CHECK(ignored.trainable_variables().size() == 1);

  const fx::tensor<double> g = fx::random::uniform<double>({5}, gen, 0.5, 1.5);
  check_input_and_gamma_gradients(layer, x, g);
  CHECK_THROWS_WITH_AS(nn::layer_norm<>({.rms_scaling = true, .beta_regularizer = nn::regularizers::l2(0.1), .name = "r"}),
                       "layer_norm 'r': a beta_regularizer or beta_constraint with rms_scaling = true has no beta to act on "
                       "(RMS normalization scales by gamma only)",
                       fx::invalid_argument);
}

TEST_CASE("layer_norm options: center, scale, initializers, regularizers and constraints") {
  namespace init = nn::initializers;
  fx::random::generator gen{8};
  const fx::tensor<double> x = fx::random::normal<double>({3, 4}, gen, 1.0, 3.0);
  nn::layer_norm<double> plain;
  {
    nn::layer_norm<double> layer{{.center = false, .scale = false, .name = "ln"}};
    CHECK(layer(x).to_vector() == plain(x).to_vector());  // the ones and zeros it holds, bitwise
    CHECK(layer.variables().empty());
    CHECK_THROWS_WITH_AS(layer.gamma(), "layer_norm 'ln': the layer has no gamma (it was made with scale = false)",
                         fx::invalid_argument);
  }
  nn::layer_norm<double> layer{{.center = false,
                                .gamma_initializer = init::constant(2.0),
                                .gamma_regularizer = nn::regularizers::l2(0.5),
                                .gamma_constraint = nn::constraints::non_neg()}};
  const auto y = fx::tensor<double>(layer(x)).to_vector();
  const auto want = naive_layer_norm(x.to_vector(), std::vector<double>(4, 2.0), std::vector<double>(4, 0.0), 1e-3);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-12));
  REQUIRE(layer.trainable_variables().size() == 1);
  CHECK(layer.regularization_loss().item() == doctest::Approx(0.5 * 4 * 4.0).epsilon(1e-14));
  fx::optim::sgd opt{1.0};
  auto vars = layer.trainable_variables();
  opt.apply_gradients({fx::from_vector(std::vector<double>{3.0, 1.0, 0.0, -1.0}, {4})}, vars);
  CHECK(layer.gamma().peek().to_vector() == std::vector<double>{0.0, 1.0, 2.0, 3.0});

  // Kept by a sequential model of double, with the name.
  auto net = nn::sequential(gen, nn::typed_input<double, 4>{}, nn::layer_norm{{.epsilon = 0.5, .rms_scaling = true, .name = "r"}});
  CHECK(net.layer<0>().epsilon() == 0.5);
  CHECK(net.layer<0>().options().rms_scaling);
  CHECK(net.layer<0>().name() == "r");
  CHECK(net.trainable_variables().size() == 1);
  CHECK_THROWS_AS(nn::layer_norm<>({.epsilon = 0.0}), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::layer_norm<>({.center = false, .beta_regularizer = nn::regularizers::l1(0.1), .name = "l"}),
                       "layer_norm 'l': a beta_regularizer with center = false has no beta to act on", fx::invalid_argument);
}

TEST_CASE("layer_norm: an empty braced list is Keras's defaults, not an epsilon of 0") {
  nn::layer_norm braced{{}};
  CHECK(braced.epsilon() == 1e-3);
  CHECK_FALSE(braced.options().rms_scaling);
  CHECK(nn::layer_norm{0.5}.epsilon() == 0.5);
  CHECK(nn::layer_norm{1e-5f}.epsilon() == static_cast<double>(1e-5f));
  CHECK(nn::layer_norm{"ln"}.name() == "ln");
}
