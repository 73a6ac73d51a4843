// Keras's weight regularizers: a penalty on a variable's value that training adds to the loss.
//
//   fx::nn::dense<256> fc{{.kernel_regularizer = fx::nn::regularizers::l2(1e-4)}};
//   fx::fit(net, opt, loss_fn, data);                    // the loss is loss_fn's + 1e-4 sum(W^2)
//
//   // A loop of your own adds it, as Keras's `loss + sum(model.losses)`:
//   fx::gradient_tape tape;
//   fx::tensor<float> loss = loss_fn(net(x, true), y) + net.regularization_loss();
//
// l1(a) is a sum(|w|), l2(a) a sum(w^2) (no 1/2: Keras's), l1_l2(a, b) both; Keras's defaults
// (0.01, and 0 for l1_l2's). The penalty is a fluxion::regularizer kept on the variable
// (variable::set_regularizer attaches one to any variable, as Keras's add_weight(regularizer=));
// a model's regularization_loss() is the sum over its trainable variables, as Keras's
// `model.losses`: a frozen layer's weights add nothing. fx::fit, fx::evaluate and nn::compile_step
// add its value to the loss they report, and fit and compile_step its gradient, 2 l2 w + l1 sign(w)
// (|w|'s derivative 0 at 0, as TensorFlow's), to the variables' gradients, without recording the
// penalty on the tape: a program that trains through them compiles no backward rule for it.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "../tensor.hpp"
#include "../tensor/creation.hpp"

namespace fluxion::nn {

namespace regularizers {

namespace detail {
inline double checked(double v, const char* name, const char* what) {
  if (!(v >= 0) || !std::isfinite(v))
    throw invalid_argument(std::string("regularizers::") + name + ": " + what + " = " + fluxion::detail::value_text(v) +
                           " must be finite and not negative");
  return v;
}
}  // namespace detail

/// Keras's L1: l1 * sum(|w|).
inline regularizer l1(double l1 = 0.01) { return {detail::checked(l1, "l1", "l1"), 0}; }
/// Keras's L2: l2 * sum(w^2).
inline regularizer l2(double l2 = 0.01) { return {0, detail::checked(l2, "l2", "l2")}; }
/// Keras's L1L2: l1 * sum(|w|) + l2 * sum(w^2).
inline regularizer l1_l2(double l1 = 0, double l2 = 0) {
  return {detail::checked(l1, "l1_l2", "l1"), detail::checked(l2, "l1_l2", "l2")};
}

}  // namespace regularizers

/// Whether any of `vars` has a penalty.
template <class T, class Device>
bool has_regularizers(const std::vector<variable<T, Device>*>& vars) {
  for (const auto* v : vars)
    if (v->regularizer()) return true;
  return false;
}

namespace detail {
/// total plus the penalty of each of `vars` that has one, recorded by no tape: fit's, evaluate's
/// and compile_step's loss plus the penalties. They add the penalties' gradients themselves
/// (add_penalty_gradients), so a program compiles no backward rule for them. Config: as the
/// layers' statements (nn/prebuilt.hpp compiles the float ones once).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> with_penalties(tensor<T, Device> total, const std::vector<variable<T, Device>*>& vars) {
  for (const auto* v : vars) {
    const regularizer& r = v->regularizer();
    const tensor<T, Device>& w = v->peek();
    if (!r) continue;
    // The terms first, then the sum of a tensor: no reduction of an expression, whose backward
    // rule the program would compile (boundaries compile theirs even where nothing records).
    const tensor<T, Device> terms =
        fluxion::detail::materialize_unrecorded(static_cast<T>(r.l1) * abs(w) + static_cast<T>(r.l2) * square(w));
    total = fluxion::detail::materialize_unrecorded(total + reduce_sum(terms));
  }
  return total;
}

/// gradients[i] += l1 sign(w) + (2 l2) w for each vars[i] with a penalty, the gradient the tape's
/// rules give regularization_loss() (a none gradient, a variable the loss does not read, becomes
/// the penalty's alone).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
void add_penalty_gradients(std::vector<tensor<T, Device>>& gradients, const std::vector<variable<T, Device>*>& vars) {
  for (std::size_t i = 0; i < vars.size() && i < gradients.size(); ++i) {
    const regularizer& r = vars[i]->regularizer();
    if (!r || !vars[i]->trainable()) continue;
    const tensor<T, Device>& w = vars[i]->peek();
    const T l1 = static_cast<T>(r.l1), l2x2 = static_cast<T>(r.l2) * T(2);
    if (gradients[i].is_none() || gradients[i].shape() != w.shape())
      gradients[i] = fluxion::detail::materialize_unrecorded(l1 * sign(w) + l2x2 * w);
    else
      gradients[i] = fluxion::detail::materialize_unrecorded(gradients[i] + (l1 * sign(w) + l2x2 * w));
  }
}
}  // namespace detail

/// The sum of the penalties of `vars` (a model's trainable_variables()), a scalar: l1 sum(|w|) +
/// l2 sum(w^2) for each variable that has one, read as a tape sees it (differentiable), 0 when none
/// has.
template <class T, class Device>
tensor<T, Device> regularization_loss(const std::vector<variable<T, Device>*>& vars) {
  tensor<T, Device> total = zeros<T, Device>(shape{});
  for (const auto* v : vars)
    if (const regularizer& r = v->regularizer())  // one statement whatever the terms
      total = tensor<T, Device>(total + reduce_sum(static_cast<T>(r.l1) * abs(*v) + static_cast<T>(r.l2) * square(*v)));
  return total;
}

}  // namespace fluxion::nn
