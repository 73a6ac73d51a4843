// fx::nn::batch_norm: gradients against finite differences (double) in training and inference,
// forward values and the moving-average update against a naive loop, the update kept off the
// tape, the channel axis, settings kept by a sequential model, errors.
// Forward mode on here (unlike the other layer tests): the moving-average update pauses forward
// accumulators too, and the gradient check covers tangents through the batch statistics.
#define FLUXION_FORWARD_MODE 1
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// Per-channel mean and biased variance of x viewed as (rows, channels), channels last.
struct channel_stats {
  std::vector<double> mean, variance;
};
channel_stats naive_stats(const std::vector<double>& x, std::size_t channels) {
  const std::size_t rows = x.size() / channels;
  channel_stats s{std::vector<double>(channels, 0.0), std::vector<double>(channels, 0.0)};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < channels; ++c) s.mean[c] += x[r * channels + c] / static_cast<double>(rows);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < channels; ++c) {
      const double d = x[r * channels + c] - s.mean[c];
      s.variance[c] += d * d / static_cast<double>(rows);
    }
  return s;
}

/// gamma (x - mean) / sqrt(var + eps) + beta, channels last.
std::vector<double> naive_normalize(const std::vector<double>& x, const std::vector<double>& mean,
                                    const std::vector<double>& variance, const std::vector<double>& gamma,
                                    const std::vector<double>& beta, double eps) {
  const std::size_t channels = mean.size();
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t c = i % channels;
    y[i] = gamma[c] * (x[i] - mean[c]) / std::sqrt(variance[c] + eps) + beta[c];
  }
  return y;
}

void check_all_close(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::abs(got[i] - want[i]) <= tol, "element " << i);
}

}  // namespace

TEST_CASE("batch_norm: gradients and tangents with respect to the input, gamma and beta, in training and inference") {
  fx::random::generator gen{3};
  // The statements see rows of up to 512 values: (2, 200, 3) as 4 rows of 100 positions, (173,
  // 3) as rows of one (173 is prime).
  for (const fx::shape& s : {fx::shape{5, 3}, fx::shape{2, 3, 2, 3}, fx::shape{2, 200, 3}, fx::shape{173, 3}}) {
    CAPTURE(s);
    nn::batch_norm<-1, double> layer;
    layer.build(fx::shape(std::vector<fx::index_t>(s.begin() + 1, s.end())), gen);
    layer.moving_mean().assign(fx::random::normal<double>({3}, gen));
    layer.moving_variance().assign(fx::random::uniform<double>({3}, gen, 0.5, 1.5));
    const fx::tensor<double> x = fx::random::normal<double>(s, gen, 0.5, 2.0);
    const fx::tensor<double> g = fx::random::uniform<double>({3}, gen, 0.5, 1.5), b = fx::random::normal<double>({3}, gen);
    for (bool training : {true, false}) {
      CAPTURE(training);
      auto r = fx::testing::check_gradients(
          [&](const auto& xi, const auto& gi, const auto& bi) {
            layer.gamma().assign(gi);
            layer.beta().assign(bi);
            return layer(xi, training);
          },
          x, g, b);
      CHECK_MESSAGE(r.ok, r.report);
    }
  }
}

TEST_CASE("batch_norm: training and inference values, and the moving averages, against a naive loop") {
  fx::random::generator gen{8};
  nn::batch_norm<-1, double> layer{0.9};
  const fx::tensor<double> x = fx::random::normal<double>({2, 2, 3, 4}, gen, 1.0, 3.0);
  const std::vector<double> xv = x.to_vector();
  fx::tensor<double> y = layer(x, /*training=*/true);
  REQUIRE(y.shape() == x.shape());
  const std::vector<double> gamma(4, 1.0), beta(4, 0.0);
  const channel_stats st = naive_stats(xv, 4);
  check_all_close(y.to_vector(), naive_normalize(xv, st.mean, st.variance, gamma, beta, 1e-3));
  // Keras's update from zeros and ones, with the biased batch variance.
  std::vector<double> mean_after(4), variance_after(4);
  for (std::size_t c = 0; c < 4; ++c) {
    mean_after[c] = 0.0 * 0.9 + st.mean[c] * 0.1;
    variance_after[c] = 1.0 * 0.9 + st.variance[c] * 0.1;
  }
  check_all_close(layer.moving_mean().peek().to_vector(), mean_after);
  check_all_close(layer.moving_variance().peek().to_vector(), variance_after);
  // Inference uses the moving statistics and leaves them as they are.
  layer.gamma().assign(fx::from_vector(std::vector<double>{0.5, 1.0, 1.5, 2.0}, {4}));
  layer.beta().assign(fx::from_vector(std::vector<double>{-1.0, 0.0, 1.0, 2.0}, {4}));
  fx::tensor<double> z = layer(x);
  check_all_close(z.to_vector(), naive_normalize(xv, mean_after, variance_after, {0.5, 1.0, 1.5, 2.0},
                                                 {-1.0, 0.0, 1.0, 2.0}, 1e-3));
  check_all_close(layer.moving_mean().peek().to_vector(), mean_after);
  // A second training step moves the averages again, from where they are.
  layer(x, true);
  for (std::size_t c = 0; c < 4; ++c) mean_after[c] = mean_after[c] * 0.9 + st.mean[c] * 0.1;
  check_all_close(layer.moving_mean().peek().to_vector(), mean_after);
}

TEST_CASE("batch_norm: training values with rows of several positions and of one, against a naive loop") {
  fx::random::generator gen{9};
  for (const fx::shape& s : {fx::shape{2, 200, 3}, fx::shape{173, 3}, fx::shape{3, 7, 5, 64}, fx::shape{4, 600}}) {
    CAPTURE(s);
    const fx::index_t c = s[s.rank() - 1];
    nn::batch_norm<-1, double> layer{0.5};
    const fx::tensor<double> x = fx::random::normal<double>(s, gen, 1.0, 3.0);
    const std::vector<double> xv = x.to_vector();
    const fx::tensor<double> y = layer(x, /*training=*/true);
    const channel_stats st = naive_stats(xv, static_cast<std::size_t>(c));
    const std::vector<double> ones(static_cast<std::size_t>(c), 1.0), zeros(static_cast<std::size_t>(c), 0.0);
    check_all_close(y.to_vector(), naive_normalize(xv, st.mean, st.variance, ones, zeros, 1e-3));
    std::vector<double> variance_after(static_cast<std::size_t>(c));
    for (std::size_t j = 0; j < variance_after.size(); ++j) variance_after[j] = 0.5 + st.variance[j] * 0.5;
    check_all_close(layer.moving_variance().peek().to_vector(), variance_after);
  }
}

TEST_CASE("batch_norm: the moving-average update can be switched off and is never recorded") {
  fx::random::generator gen{4};
  nn::batch_norm<-1, double> layer;
  const fx::tensor<double> x = fx::random::normal<double>({6, 3}, gen);
  layer.build(fx::shape{3}, gen);
  const auto before = layer.moving_mean().peek().to_vector();
  layer.call(x, /*training=*/true, /*update=*/false);
  CHECK(layer.moving_mean().peek().to_vector() == before);
  layer.set_update_moving_averages(false);
  CHECK_FALSE(layer.update_moving_averages());
  layer(x, true);
  CHECK(layer.moving_variance().peek().to_vector() == std::vector<double>(3, 1.0));
  layer.set_update_moving_averages(true);

  // Under a tape: the same entries with and without the update; the moving statistics get no
  // gradient (they are not trainable), gamma and beta do.
  std::size_t entries[2];
  for (bool update : {false, true}) {
    fx::gradient_tape tape{fx::persistent};
    tape.watch(x);
    const std::uint64_t version = layer.moving_mean().version();
    fx::tensor<double> loss = fx::reduce_sum(fx::square(layer.call(x, true, update)));
    entries[update] = tape.entries();
    CHECK(layer.moving_mean().version() == version + (update ? 1 : 0));
    auto grads = tape.gradient(loss, layer.trainable_variables());
    REQUIRE(grads.size() == 2);
    CHECK(grads[0].shape() == fx::shape{3});
    CHECK(grads[1].shape() == fx::shape{3});
  }
  CHECK(entries[0] == entries[1]);
  CHECK(entries[0] > 0);

  // A forward accumulator watching x does not see the update either: the moving mean gets no tangent.
  fx::forward_accumulator acc(x, fx::ones_like(x));
  const fx::tensor<double> y = layer(x, true);
  CHECK(acc.has(y.id()));
  CHECK_FALSE(acc.has(layer.moving_mean().peek().id()));
}

TEST_CASE("batch_norm: variables, names, and channels on another axis") {
  nn::batch_norm<> layer{"bn"};
  layer.build(fx::shape{3, 3, 8});
  std::vector<std::string> names;
  for (auto* v : layer.variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"bn/gamma", "bn/beta", "bn/moving_mean", "bn/moving_variance"});
  CHECK(layer.trainable_variables().size() == 2);
  CHECK(layer.non_trainable_variables().size() == 2);
  CHECK(layer.count_params() == 16);
  CHECK(layer.gamma().peek().to_vector() == std::vector<float>(8, 1.f));
  CHECK(layer.moving_variance().peek().to_vector() == std::vector<float>(8, 1.f));

  // Channels first (Keras's axis = 1): (batch, C, L) normalized over batch and L.
  fx::random::generator gen{2};
  nn::batch_norm<1, double> first;
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4}, gen);
  const fx::tensor<double> y = first(x, true);
  // The same numbers as channels last after moving the axis.
  nn::batch_norm<-1, double> last;
  const fx::tensor<double> xt = fx::transpose(x, {0, 2, 1});
  const fx::tensor<double> yt = last(xt, true);
  check_all_close(fx::tensor<double>(fx::transpose(y, {0, 2, 1})).to_vector(), yt.to_vector());
  check_all_close(first.moving_mean().peek().to_vector(), last.moving_mean().peek().to_vector());
  CHECK(first.gamma().shape() == fx::shape{3});
}

TEST_CASE("batch_norm: in a sequential model, settings are kept and the activation is fused") {
  fx::random::generator gen{9};
  auto net = nn::sequential(gen, nn::typed_input<double, 5>{}, nn::dense<4>{}, nn::batch_norm<>{0.5, 1e-2},
                            nn::relu{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<4>>);
  auto& bn = net.layer<1>();
  CHECK(bn.momentum() == 0.5);
  CHECK(bn.epsilon() == 1e-2);
  CHECK(bn.name() == "batch_normalization");
  const fx::tensor<double> x = fx::random::normal<double>({6, 5}, gen);
  const fx::tensor<double> y = net(x, /*training=*/true);
  const fx::tensor<double> h = net.layer<0>()(x);
  const std::vector<double> hv = h.to_vector();
  const channel_stats st = naive_stats(hv, 4);
  std::vector<double> want = naive_normalize(hv, st.mean, st.variance, std::vector<double>(4, 1.0),
                                             std::vector<double>(4, 0.0), 1e-2);
  for (double& v : want) v = std::max(v, 0.0);
  check_all_close(y.to_vector(), want);
  for (std::size_t c = 0; c < 4; ++c)
    CHECK(bn.moving_mean().peek().to_vector()[c] == doctest::Approx(st.mean[c] * 0.5).epsilon(1e-12));
  CHECK(net.non_trainable_variables().size() == 2);
  CHECK(net.trainable_variables().size() == 4);
}

TEST_CASE("batch_norm: errors name the layer and the shapes") {
  nn::batch_norm<> layer;
  layer.build(fx::shape{4});
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 5})),
                       "batch_norm 'batch_normalization': the input has 5 channels on axis 1, the layer was built "
                       "for 4 (input shape (2, 5))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({4})),
                       "batch_norm 'batch_normalization': expects input of shape (batch, ..., channels) with the "
                       "channel axis -1, got (4,)",
                       fx::shape_error);
  CHECK_THROWS_AS(nn::batch_norm<>(1.5), fx::invalid_argument);
  CHECK_THROWS_AS(nn::batch_norm<>(0.9, 0.0), fx::invalid_argument);
  CHECK_THROWS_AS(nn::batch_norm<>{}.gamma(), fx::error);
}

TEST_CASE("batch_norm options: Keras's initializers, momentum and epsilon, against a naive loop") {
  namespace init = nn::initializers;
  fx::random::generator gen{12};
  nn::batch_norm<-1, double> layer{{.momentum = 0.8,
                                    .epsilon = 1e-2,
                                    .beta_initializer = init::constant(0.5),
                                    .gamma_initializer = init::constant(2.0),
                                    .moving_mean_initializer = init::constant(0.25),
                                    .moving_variance_initializer = init::constant(3.0),
                                    .name = "bn"}};
  CHECK(layer.momentum() == 0.8);
  CHECK(layer.epsilon() == 1e-2);
  CHECK(layer.name() == "bn");
  const fx::tensor<double> x = fx::random::normal<double>({5, 3}, gen, 1.0, 2.0);
  const std::vector<double> xv = x.to_vector();
  // Inference first: the moving statistics as drawn.
  check_all_close(layer(x).to_vector(), naive_normalize(xv, std::vector<double>(3, 0.25), std::vector<double>(3, 3.0),
                                                        std::vector<double>(3, 2.0), std::vector<double>(3, 0.5), 1e-2));
  const channel_stats st = naive_stats(xv, 3);
  check_all_close(layer(x, true).to_vector(), naive_normalize(xv, st.mean, st.variance, std::vector<double>(3, 2.0),
                                                              std::vector<double>(3, 0.5), 1e-2));
  for (std::size_t c = 0; c < 3; ++c) {
    CHECK(layer.moving_mean().peek().to_vector()[c] == doctest::Approx(0.25 * 0.8 + st.mean[c] * 0.2).epsilon(1e-12));
    CHECK(layer.moving_variance().peek().to_vector()[c] == doctest::Approx(3.0 * 0.8 + st.variance[c] * 0.2).epsilon(1e-12));
  }

  // A drawn gamma: initialize() draws the values a fresh build draws from the same generator,
  // into the same variables.
  nn::batch_norm<-1, double> drawn{{.gamma_initializer = init::random_normal(1.0, 0.1)}};
  fx::random::generator g1{5}, g2{5};
  drawn.build(fx::shape{4}, g1);
  const std::uint64_t id = drawn.gamma().id();
  const auto first = drawn.gamma().peek().to_vector();
  CHECK(first != std::vector<double>(4, 1.0));
  const auto want = init::random_normal(1.0, 0.1).operator()<double>(fx::shape{4}, g2).to_vector();
  CHECK(first == want);
  drawn.gamma().assign(fx::zeros<double>({4}));
  fx::random::generator g3{5};
  drawn.initialize(g3);
  CHECK(drawn.gamma().id() == id);
  CHECK(drawn.gamma().peek().to_vector() == first);
}

TEST_CASE("batch_norm options: scale = false and center = false leave no gamma and no beta") {
  fx::random::generator gen{13};
  nn::batch_norm<-1, double> layer{{.center = false, .scale = false, .name = "bn"}};
  layer.build(fx::shape{3});
  std::vector<std::string> names;
  for (auto* v : layer.variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"bn/moving_mean", "bn/moving_variance"});
  CHECK(layer.trainable_variables().empty());
  CHECK(layer.count_params() == 0);
  CHECK_THROWS_WITH_AS(layer.gamma(), "batch_norm 'bn': the layer has no gamma (it was made with scale = false)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(layer.beta(), "batch_norm 'bn': the layer has no beta (it was made with center = false)",
                       fx::invalid_argument);
  const fx::tensor<double> x = fx::random::normal<double>({6, 3}, gen, 0.5, 2.0);
  const std::vector<double> xv = x.to_vector();
  const channel_stats st = naive_stats(xv, 3);
  // Bitwise the default layer's output, whose gamma is ones and beta zeros.
  nn::batch_norm<-1, double> plain;
  const auto trained = layer(x, true).to_vector();
  CHECK(trained == plain(x, true).to_vector());
  check_all_close(trained,
                  naive_normalize(xv, st.mean, st.variance, std::vector<double>(3, 1.0), std::vector<double>(3, 0.0), 1e-3));
  CHECK(layer(x).to_vector() == plain(x).to_vector());
  CHECK(layer.moving_mean().peek().to_vector() == plain.moving_mean().peek().to_vector());

  // Only beta: the gradients with respect to the input and beta, against finite differences, in
  // training and inference; a tape's gradient list has beta alone.
  nn::batch_norm<-1, double> shift{{.scale = false}};
  shift.build(fx::shape{3});
  REQUIRE(shift.trainable_variables().size() == 1);
  CHECK(shift.trainable_variables()[0]->name() == "batch_normalization/beta");
  const fx::tensor<double> b = fx::random::normal<double>({3}, gen);
  for (bool training : {true, false}) {
    CAPTURE(training);
    auto r = fx::testing::check_gradients(
        [&](const auto& xi, const auto& bi) {
          shift.beta().assign(bi);
          return shift.call(xi, training, /*update=*/false);
        },
        x, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

TEST_CASE("batch_norm options: gamma's and beta's regularizers and constraints") {
  namespace reg = nn::regularizers;
  namespace con = nn::constraints;
  fx::random::generator gen{14};
  nn::batch_norm<-1, double> layer{{.beta_regularizer = reg::l1(0.2),
                                    .gamma_regularizer = reg::l2(0.1),
                                    .beta_constraint = con::max_norm(0.5),
                                    .gamma_constraint = con::non_neg()}};
  layer.build(fx::shape{3});
  CHECK(layer.gamma().regularizer() == reg::l2(0.1));
  CHECK(layer.beta().regularizer() == reg::l1(0.2));
  CHECK(layer.gamma().constraint() == con::non_neg());
  CHECK_FALSE(layer.moving_mean().regularizer());
  layer.gamma().assign(fx::from_vector(std::vector<double>{0.5, -1.0, 2.0}, {3}));
  layer.beta().assign(fx::from_vector(std::vector<double>{0.3, -0.4, 0.1}, {3}));
  const double want = 0.1 * (0.25 + 1.0 + 4.0) + 0.2 * (0.3 + 0.4 + 0.1);
  CHECK(layer.regularization_loss().item() == doctest::Approx(want).epsilon(1e-14));

  // An SGD step with gradients that push gamma below zero and beta's norm above 0.5: the optimizer
  // projects both after the update.
  fx::optim::sgd opt{1.0};
  auto vars = layer.trainable_variables();
  opt.apply_gradients({fx::from_vector(std::vector<double>{1.0, 0.0, 0.5}, {3}),
                       fx::from_vector(std::vector<double>{-0.7, 0.0, 0.0}, {3})},
                      vars);
  CHECK(layer.gamma().peek().to_vector() == std::vector<double>{0.0, 0.0, 1.5});
  const std::vector<double> beta{1.0, -0.4, 0.1};
  const double n = std::sqrt(1.0 + 0.16 + 0.01), scale = 0.5 / (1e-7 + n);
  check_all_close(layer.beta().peek().to_vector(), {beta[0] * scale, beta[1] * scale, beta[2] * scale}, 1e-14);
}

TEST_CASE("batch_norm options: a sequential model of double keeps them; bad options are refused") {
  namespace init = nn::initializers;
  fx::random::generator gen{15};
  auto net = nn::sequential(gen, nn::typed_input<double, 4>{}, nn::dense<3>{},
                            nn::batch_norm<>{{.momentum = 0.5, .scale = false,
                                              .moving_variance_initializer = init::constant(2.0), .name = "bn"}});
  auto& bn = net.layer<1>();
  CHECK(bn.momentum() == 0.5);
  CHECK_FALSE(bn.options().scale);
  CHECK(bn.name() == "bn");
  CHECK(bn.moving_variance().peek().to_vector() == std::vector<double>(3, 2.0));
  CHECK(net.trainable_variables().size() == 3);  // dense/kernel, dense/bias, bn/beta

  CHECK_THROWS_WITH_AS(nn::batch_norm<>({.scale = false, .gamma_regularizer = nn::regularizers::l2(0.1)}),
                       "batch_norm 'batch_normalization': a gamma_regularizer with scale = false has no gamma to act on",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::batch_norm<>({.center = false, .beta_constraint = nn::constraints::non_neg(), .name = "b"}),
                       "batch_norm 'b': a beta_constraint with center = false has no beta to act on", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::batch_norm<>({.epsilon = std::nan(""), .name = "b"}),
                       "batch_norm 'b': epsilon = nan is not positive and finite", fx::invalid_argument);
  CHECK_THROWS_AS(nn::batch_norm<>({.beta_regularizer = fx::regularizer{-1.0, 0.0}}), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::batch_norm<>({.momentum = -0.1, .name = "b"}), "batch_norm 'b': momentum = -0.100000 is not in [0, 1]",
                       fx::invalid_argument);
  // A constraint's axis gamma does not have: refused when the layer is built, which leaves it unbuilt.
  nn::batch_norm<> bad{{.gamma_constraint = nn::constraints::max_norm(1.0, {1})}};
  CHECK_THROWS_AS(bad.build(fx::shape{3}), fx::invalid_argument);
  CHECK_FALSE(bad.built());
}

TEST_CASE("batch_norm: an empty braced list is Keras's defaults, not a momentum of 0") {
  // batch_norm<>{{}} once chose the momentum constructor ({} is a double 0): moving statistics
  // that forget everything but the last batch. The options constructor takes it now.
  nn::batch_norm<> braced{{}};
  CHECK(braced.momentum() == 0.99);
  CHECK(braced.options().epsilon == 1e-3);
  CHECK(nn::batch_norm<>{}.momentum() == 0.99);
  // The scalar constructors still take a momentum of any arithmetic type.
  CHECK(nn::batch_norm<>{0.9}.momentum() == 0.9);
  CHECK(nn::batch_norm<>{0.5f, 1e-2}.options().epsilon == 1e-2);
  CHECK(nn::batch_norm<>{1}.momentum() == 1.0);
  CHECK(nn::batch_norm<>{"bn"}.name() == "bn");
  static_assert(!std::is_convertible_v<double, nn::batch_norm<>>);  // still explicit
}
