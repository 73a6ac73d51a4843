// fx::nn::group_norm and instance_norm: values against a naive loop, gradients against finite
// differences (double), a sequential model with a fused activation, Keras's options, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <vector>
#include "norm_checks.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

using test::reverse_only;

/// x of shape (batch, positions..., channels): each example's group of channels / groups
/// neighbouring channels, over every position, normalized with its mean and biased variance.
std::vector<double> naive_group_norm(const std::vector<double>& x, const fx::shape& s, int groups,
                                     const std::vector<double>& gamma, const std::vector<double>& beta, double eps) {
  const std::size_t c = static_cast<std::size_t>(s[s.rank() - 1]), n = static_cast<std::size_t>(s[0]);
  const std::size_t positions = x.size() / (n * c), per = c / static_cast<std::size_t>(groups);
  std::vector<double> y(x.size());
  for (std::size_t b = 0; b < n; ++b)
    for (std::size_t g = 0; g < static_cast<std::size_t>(groups); ++g) {
      auto at = [&](std::size_t p, std::size_t k) { return (b * positions + p) * c + g * per + k; };
      const double count = static_cast<double>(positions * per);
      double mean = 0, var = 0;
      for (std::size_t p = 0; p < positions; ++p)
        for (std::size_t k = 0; k < per; ++k) mean += x[at(p, k)] / count;
      for (std::size_t p = 0; p < positions; ++p)
        for (std::size_t k = 0; k < per; ++k) var += (x[at(p, k)] - mean) * (x[at(p, k)] - mean) / count;
      for (std::size_t p = 0; p < positions; ++p)
        for (std::size_t k = 0; k < per; ++k)
          y[at(p, k)] = gamma[g * per + k] * (x[at(p, k)] - mean) / std::sqrt(var + eps) + beta[g * per + k];
    }
  return y;
}

template <int Groups>
void check_values(const fx::shape& s, int groups, double eps, fx::random::generator& gen) {
  CAPTURE(s);
  CAPTURE(groups);
  nn::group_norm<Groups, double> layer{{.epsilon = eps}};
  const fx::index_t c = s[s.rank() - 1];
  const fx::tensor<double> x = fx::random::normal<double>(s, gen, 1.0, 3.0);
  const fx::tensor<double> gamma = fx::random::uniform<double>({c}, gen, 0.5, 2.0), beta = fx::random::normal<double>({c}, gen);
  layer.build(fx::shape{c});
  layer.gamma().assign(gamma);
  layer.beta().assign(beta);
  CHECK(layer.groups() == groups);
  const fx::tensor<double> y = layer(x), y_training = layer(x, true);
  CHECK(y.shape() == s);
  CHECK(y.to_vector() == y_training.to_vector());  // no batch statistics: the same in training
  const auto want = naive_group_norm(x.to_vector(), s, groups, gamma.to_vector(), beta.to_vector(), eps);
  const auto got = y.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("group_norm: values against a naive loop, for images, sequences, vectors, one group and instances") {
  fx::random::generator gen{1};
  check_values<4>({2, 3, 5, 8}, 4, 1e-3, gen);   // NHWC images, groups of 2 channels
  check_values<2>({3, 7, 6}, 2, 1e-2, gen);      // (batch, steps, channels)
  check_values<3>({4, 6}, 3, 1e-3, gen);         // (batch, channels): each example's groups alone
  check_values<1>({2, 2, 3, 4}, 1, 1e-3, gen);   // one group: all of an example (layer_norm over h, w, c)
  check_values<-1>({2, 3, 3, 5}, 5, 1e-5, gen);  // instance normalization
  check_values<32>({2, 2, 2, 64}, 32, 1e-3, gen);  // Keras's default groups
  // The statements see rows of at most 512 values: tile positions at a time (the largest divisor).
  check_values<8>({2, 12, 128}, 8, 1e-3, gen);  // 3 rows of 4 positions an example
  check_values<4>({2, 11, 64}, 4, 1e-3, gen);   // 11 positions, prime: one position a row
  check_values<4>({2, 3, 1024}, 4, 1e-3, gen);  // more channels than a row holds: one position a row
}

TEST_CASE("group_norm: gradients with respect to the input, gamma and beta") {
  fx::random::generator gen{6};
  auto check = [&](auto layer, const fx::shape& s) {
    CAPTURE(s);
    const fx::index_t c = s[s.rank() - 1];
    layer.build(fx::shape{c});
    const fx::tensor<double> x = fx::random::normal<double>(s, gen, 0.5, 2.0);
    const fx::tensor<double> g = fx::random::uniform<double>({c}, gen, 0.5, 1.5), b = fx::random::normal<double>({c}, gen);
    auto r = fx::testing::check_gradients(
        [&](const auto& xi, const auto& gi, const auto& bi) {
          layer.gamma().assign(gi);
          layer.beta().assign(bi);
          return layer(xi);
        },
        reverse_only, x, g, b);
    CHECK_MESSAGE(r.ok, r.report);
  };
  check(nn::group_norm<2, double>{}, fx::shape{2, 3, 2, 4});
  check(nn::group_norm<3, double>{}, fx::shape{3, 6});
  check(nn::instance_norm<double>{}, fx::shape{2, 4, 3});
  check(nn::group_norm<4, double>{}, fx::shape{1, 12, 64});  // 2 rows of 6 positions
  check(nn::group_norm<4, double>{}, fx::shape{1, 11, 64});  // 11 positions, prime: one a row
}

TEST_CASE("group_norm: in a sequential model, checked at compile time, with an activation after it, Keras's names") {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::typed_input<double, 4, 4, 6>{}, nn::group_norm<3, double>{}, nn::relu{},
                            nn::instance_norm<double>{}, nn::flatten{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<96>>);
  const fx::tensor<double> x = fx::random::normal<double>({2, 4, 4, 6}, gen);
  nn::group_norm<3, double> alone;
  nn::instance_norm<double> second;
  const auto y = net(x).to_vector();
  const auto want = fx::tensor<double>(second(fx::relu(alone(x)))).to_vector();
  REQUIRE(y.size() == want.size());
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-13));
  auto vars = net.trainable_variables();
  REQUIRE(vars.size() == 4);
  CHECK(vars[0]->name() == "group_normalization/gamma");
  CHECK(vars[1]->name() == "group_normalization/beta");
  CHECK(vars[2]->name() == "group_normalization_1/gamma");
  CHECK(net.layer<2>().groups() == 6);
  CHECK(net.summary().find("group_normalization") != std::string::npos);
  // A model of float rebinds the layer and keeps its options.
  auto f = nn::sequential(gen, nn::input<5, 8>{}, nn::group_norm<4>{{.epsilon = 0.25, .center = false, .name = "gn"}});
  CHECK(f.layer<0>().epsilon() == 0.25);
  CHECK(f.layer<0>().name() == "gn");
  CHECK(f.trainable_variables().size() == 1);
}

TEST_CASE("group_norm: with a relu after it in a sequential model (fused into the cpu kernel), against finite differences") {
  fx::random::generator gen{7};
  auto net = nn::sequential(gen, nn::typed_input<double, 5, 6>{}, nn::group_norm<2, double>{}, nn::relu{});
  const fx::tensor<double> x = fx::random::normal<double>({3, 5, 6}, gen, 0.5, 2.0);
  auto r = fx::testing::check_gradients([&](const auto& xi) { return net(xi, /*training=*/true); }, reverse_only, x);
  CHECK_MESSAGE(r.ok, r.report);
  test::check_beta_counts_positive_outputs(net, x, 6);
  // The same output as the layer and a relu apart.
  nn::group_norm<2, double> alone;
  const auto want = fx::tensor<double>(fx::relu(alone(x))).to_vector(), y = net(x).to_vector();
  REQUIRE(y.size() == want.size());
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-13));
}

TEST_CASE("group_norm options: center, scale, initializers, regularizers and constraints") {
  namespace init = nn::initializers;
  fx::random::generator gen{8};
  const fx::tensor<double> x = fx::random::normal<double>({3, 2, 4}, gen, 1.0, 3.0);
  nn::group_norm<2, double> plain;
  {
    nn::group_norm<2, double> layer{{.center = false, .scale = false, .name = "gn"}};
    CHECK(layer(x).to_vector() == plain(x).to_vector());  // the ones and zeros it holds, bitwise
    CHECK(layer.variables().empty());
    CHECK_THROWS_WITH_AS(layer.gamma(), "group_norm 'gn': the layer has no gamma (it was made with scale = false)",
                         fx::invalid_argument);
    CHECK_THROWS_WITH_AS(layer.beta(), "group_norm 'gn': the layer has no beta (it was made with center = false)",
                         fx::invalid_argument);
  }
  nn::group_norm<2, double> layer{{.center = false,
                                   .gamma_initializer = init::constant(2.0),
                                   .gamma_regularizer = nn::regularizers::l2(0.5),
                                   .gamma_constraint = nn::constraints::non_neg()}};
  const auto y = fx::tensor<double>(layer(x)).to_vector();
  const auto want = naive_group_norm(x.to_vector(), x.shape(), 2, std::vector<double>(4, 2.0), std::vector<double>(4, 0.0), 1e-3);
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-12));
  REQUIRE(layer.trainable_variables().size() == 1);
  CHECK(layer.regularization_loss().item() == doctest::Approx(0.5 * 4 * 4.0).epsilon(1e-14));
  fx::optim::sgd opt{1.0};
  auto vars = layer.trainable_variables();
  opt.apply_gradients({fx::from_vector(std::vector<double>{3.0, 1.0, 0.0, -1.0}, {4})}, vars);
  CHECK(layer.gamma().peek().to_vector() == std::vector<double>{0.0, 1.0, 2.0, 3.0});  // non_neg clipped -1 to 0
  // A new draw keeps the variables.
  const auto* before = &layer.gamma();
  layer.initialize(gen);
  CHECK(&layer.gamma() == before);
  CHECK(layer.gamma().peek().to_vector() == std::vector<double>(4, 2.0));
}

TEST_CASE("group_norm: errors name the layer, the groups and the shapes") {
  nn::group_norm<4> gn{"gn"};
  CHECK_THROWS_WITH_AS(gn(fx::zeros<float>({2, 3, 6})),
                       "group_norm 'gn': 4 groups do not divide the input's 6 channels (its last axis) into groups of "
                       "equal size",
                       fx::shape_error);
  CHECK_FALSE(gn.built());
  gn(fx::zeros<float>({2, 3, 8}));
  CHECK_THROWS_WITH_AS(gn(fx::zeros<float>({2, 3, 4})), "group_norm 'gn': expects input of shape (batch, ..., 8), got (2, 3, 4)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(gn(fx::zeros<float>({8})), "group_norm 'gn': expects input of shape (batch, ..., 8), got (8,)",
                       fx::shape_error);
  nn::group_norm<2> unbuilt{"u"};
  CHECK_THROWS_AS(unbuilt.gamma(), fx::error);
  CHECK_THROWS_WITH_AS(nn::group_norm<2>({.epsilon = -1.0, .name = "g"}), "group_norm 'g': epsilon = -1.000000 is not positive and finite",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(nn::group_norm<2>({.scale = false, .gamma_constraint = nn::constraints::non_neg(), .name = "g"}),
                       "group_norm 'g': a gamma_constraint with scale = false has no gamma to act on", fx::invalid_argument);
  // An empty batch keeps its shape.
  CHECK(gn(fx::zeros<float>({0, 3, 8})).shape() == fx::shape{0, 3, 8});
}
