// Checks shared by the normalization layers' tests.
#pragma once

#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

namespace test {

/// In a sequential model whose last two layers are a normalization (gamma, beta) and a relu, the
/// gradient of sum(y) with respect to beta counts, for each of the `features`, the positive y's:
/// the relu passes the gradient where y is positive.
template <class Net>
void check_beta_counts_positive_outputs(Net& net, const fluxion::tensor<double>& x, std::size_t features) {
  auto vars = net.trainable_variables();
  REQUIRE(vars.size() == 2);
  fluxion::gradient_tape tape;
  const fluxion::tensor<double> y = net(x, /*training=*/true);
  const auto grads = tape.gradient(fluxion::reduce_sum(y), vars);
  const auto yv = y.to_vector();
  std::vector<double> want_db(features, 0.0);
  for (std::size_t i = 0; i < yv.size(); ++i)
    if (yv[i] > 0) want_db[i % features] += 1.0;
  const auto db = grads[1].to_vector();
  REQUIRE(db.size() == features);
  for (std::size_t j = 0; j < features; ++j) CHECK(db[j] == doctest::Approx(want_db[j]));
}

}  // namespace test
