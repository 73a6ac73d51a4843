// The check shared by layer tests with state a compiled step must replay (dropout masks): the
// tape-based step of one copy of a model against nn::compile_step of another.
#pragma once

#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cstdint>

#include "../test_util.hpp"

namespace compiled_check {

namespace fx = fluxion;

/// One tape-based training step of `model`: the loss, then opt's update. The tape ends with the
/// step: one still recording would watch another model's variables too, and a recurrent layer that
/// two tapes record takes its step statements instead of the fused cell, which round differently
/// (stop 48).
template <class Model, class Opt, class LossFn, class X, class Y>
fx::tensor<typename Model::value_type> tape_step(Model& model, Opt& opt, LossFn& loss_fn, const X& x, const Y& y) {
  fx::gradient_tape tape;
  fx::tensor<typename Model::value_type> loss = loss_fn(model(x, true), y);
  auto vars = model.trainable_variables();
  opt.apply_gradients(tape.gradient(loss, vars), vars);
  return loss;
}

/// `steps` steps of SGD(0.1) with sparse softmax cross-entropy: a tape-based step of `a`, a compiled
/// step of `b` (built alike): their losses and then their variables equal, bitwise when rtol is 0.
template <class Model, class X>
void against_tape(Model& a, Model& b, const X& x, const fx::tensor<std::int32_t>& labels, int steps, double rtol = 0) {
  auto loss_fn = [](const auto& logits, const auto& y) { return fx::losses::sparse_softmax_cross_entropy(logits, y); };
  fx::optim::sgd opt_a{0.1}, opt_b{0.1};
  auto step = fluxion::nn::compile_step(b, opt_b, loss_fn);
  for (int s = 0; s < steps; ++s) {
    CAPTURE(s);
    const auto la = tape_step(a, opt_a, loss_fn, x, labels);
    const auto lb = step(x, labels);
    if (rtol == 0) CHECK(la.item() == lb.item());
    else CHECK(la.item() == doctest::Approx(lb.item()).epsilon(rtol));
  }
  auto va = a.variables(), vb = b.variables();
  REQUIRE(va.size() == vb.size());
  for (std::size_t i = 0; i < va.size(); ++i) {
    CAPTURE(i);
    if (rtol == 0) CHECK(va[i]->peek().to_vector() == vb[i]->peek().to_vector());
    else test::check_close(vb[i]->peek().to_vector(), va[i]->peek().to_vector(), rtol);
  }
}

}  // namespace compiled_check
