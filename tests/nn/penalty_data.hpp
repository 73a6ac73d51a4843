// What the penalty tests share (regularizers.test.cpp, activity_regularization.test.cpp): a few
// small batches of double inputs (6, 5) with labels of 3 classes, and their loss.
#pragma once

#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace penalty_data {

inline constexpr auto cross_entropy = [](const auto& logits, const auto& labels) {
  return fluxion::losses::sparse_softmax_cross_entropy(logits, labels);
};

using batch = std::pair<fluxion::tensor<double>, fluxion::tensor<std::int32_t>>;

/// n batches of 6 examples of 5 normal values, labelled (row + batch) % 3.
inline std::vector<batch> batches(int n, std::uint64_t seed) {
  fluxion::random::generator gen{seed};
  std::vector<batch> out;
  for (int i = 0; i < n; ++i) {
    std::vector<std::int32_t> y;
    for (int r = 0; r < 6; ++r) y.push_back((r + i) % 3);
    out.emplace_back(fluxion::random::normal<double>({6, 5}, gen), fluxion::from_vector(y, {6}));
  }
  return out;
}

/// One training step by hand on batch b: the tape's gradient of cross-entropy plus
/// net.regularization_loss() (the variables' penalties and the call's added losses), applied by
/// opt. Returns that loss.
template <class Net, class Optimizer>
double step_by_hand(Net& net, Optimizer& opt, const batch& b) {
  fluxion::gradient_tape tape;
  const fluxion::tensor<double> out = net(b.first, true);  // first: regularization_loss() reads what the call added
  const fluxion::tensor<double> loss = cross_entropy(out, b.second) + net.regularization_loss();
  auto vars = net.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss.item();
}

/// Every variable of `va` equals its namesake in `vb` within `epsilon` (relative).
inline void check_same_variables(const std::vector<fluxion::variable<double>*>& va,
                                 const std::vector<fluxion::variable<double>*>& vb, double epsilon) {
  REQUIRE(va.size() == vb.size());
  for (std::size_t i = 0; i < va.size(); ++i) {
    CAPTURE(va[i]->name());
    const auto a = va[i]->peek().to_vector(), b = vb[i]->peek().to_vector();
    REQUIRE(a.size() == b.size());
    for (std::size_t j = 0; j < a.size(); ++j) CHECK(a[j] == doctest::Approx(b[j]).epsilon(epsilon));
  }
}

/// Three Adam steps of `by_hand` (step_by_hand) and of `compiled` (nn::compile_step), twins: the
/// losses agree within 1e-14 and the variables after them within 1e-12.
template <class Net>
void check_compiled_step(Net& by_hand, Net& compiled) {
  fluxion::optim::adam opt_a{1e-2}, opt_b{1e-2};
  auto step = fluxion::nn::compile_step(compiled, opt_b, cross_entropy);
  for (const batch& b : batches(3, 8)) {
    const double la = step_by_hand(by_hand, opt_a, b);
    const fluxion::tensor<double> lb = step(b.first, b.second);
    CHECK(lb.item() == doctest::Approx(la).epsilon(1e-14));
  }
  check_same_variables(by_hand.variables(), compiled.variables(), 1e-12);
}

}  // namespace penalty_data
