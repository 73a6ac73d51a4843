// fx::nn::batch_norm's hand-written backward pass (fx::custom_gradient), which programs with the
// default autodiff settings use in training (order 1, no forward mode): gradients against finite
// differences (double), alone and with a relu after it in a sequential model, with rows of several
// positions, of all of them and of one (batch_norm.test.cpp turns forward mode on, so it checks
// the tape's rules for the same statements).
#define FLUXION_FORWARD_MODE 0
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <vector>

#include "norm_checks.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;
using test::reverse_only;

TEST_CASE("batch_norm backward: the hand-written pass against finite differences, in training") {
  fx::random::generator gen{4};
  // (2, 200, 3): 4 rows of 100 positions; (173, 3): rows of one (173 is prime); (5, 3) and
  // (2, 3, 2, 3): every position in one row.
  for (const fx::shape& s : {fx::shape{5, 3}, fx::shape{2, 3, 2, 3}, fx::shape{2, 200, 3}, fx::shape{173, 3}}) {
    CAPTURE(s);
    nn::batch_norm<-1, double> layer;
    layer.build(fx::shape(std::vector<fx::index_t>(s.begin() + 1, s.end())), gen);
    const fx::tensor<double> x = fx::random::normal<double>(s, gen, 0.5, 2.0);
    const fx::tensor<double> g = fx::random::uniform<double>({3}, gen, 0.5, 1.5), b = fx::random::normal<double>({3}, gen);
    auto r = fx::testing::check_gradients(
        [&](const auto& xi, const auto& gi, const auto& bi) {
          layer.gamma().assign(gi);
          layer.beta().assign(bi);
          return layer(xi, /*training=*/true);
        },
        reverse_only, x, g, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

TEST_CASE("batch_norm backward: with a relu after it in a sequential model, against finite differences") {
  fx::random::generator gen{5};
  auto net = nn::sequential(gen, nn::typed_input<double, 4, 6>{}, nn::batch_norm<-1, double>{}, nn::relu{});
  const fx::tensor<double> x = fx::random::normal<double>({3, 4, 6}, gen, 0.5, 2.0);
  auto r = fx::testing::check_gradients([&](const auto& xi) { return net(xi, /*training=*/true); }, reverse_only, x);
  CHECK_MESSAGE(r.ok, r.report);
  test::check_beta_counts_positive_outputs(net, x, 6);
}
