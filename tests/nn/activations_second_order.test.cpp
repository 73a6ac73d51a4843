// fx::softmax with higher orders and forward mode, where it is exp(x - logsumexp(x)) differentiated
// by the tape's and the accumulators' rules (with the default settings its backward pass is written
// by hand: activations.test.cpp): tangents, gradients and Hessian-vector products against central
// differences (double).
#define FLUXION_MAX_DERIVATIVE_ORDER 2
#define FLUXION_FORWARD_MODE 1
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/nn/activations.hpp>

#include <doctest/doctest.h>

#include "../test_util.hpp"

namespace fx = fluxion;

TEST_CASE("softmax at order 2 with forward mode: gradients, tangents and Hessian-vector products along any axis") {
  const fx::tensor<double> x = test::random_tensor<double>({3, 4}, 51, -3.0, 3.0);
  for (int axis : {0, 1, -1}) {
    CAPTURE(axis);
    auto first = fx::testing::check_gradients([&](const auto& a) { return fx::softmax(a, axis); }, x);
    CHECK_MESSAGE(first.ok, first.report);
    auto second = fx::testing::check_second_order([&](const auto& a) { return fx::softmax(a, axis); }, x);
    CHECK_MESSAGE(second.ok, second.report);
  }
  // A softmax inside a longer function: a product of two softmaxes of an expression.
  auto r = fx::testing::check_second_order(
      [](const auto& a) { return fx::softmax(a * a, 0) * fx::softmax(a - 1.0, 1); }, x);
  CHECK_MESSAGE(r.ok, r.report);
}
