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
// `model.losses`: a frozen layer's weights add nothing. fx::fit and fx::evaluate add it to the
// loss they report and differentiate; nn::compile_step adds its value and its gradient, 2 l2 w +
// l1 sign(w) (|w|'s derivative 0 at 0, as TensorFlow's).
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

/// The sum of the penalties of `vars` (a model's trainable_variables()), a scalar: l1 sum(|w|) +
/// l2 sum(w^2) for each variable that has one, read as a tape sees it (differentiable), 0 when none
/// has. Config: as the layers' statements (nn/prebuilt.hpp compiles the float one once).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> regularization_loss(const std::vector<variable<T, Device>*>& vars) {
  tensor<T, Device> total = zeros<T, Device>(shape{});
  for (const auto* v : vars) {
    const regularizer& r = v->regularizer();
    // One statement whatever the terms: a program compiles one penalty (and its backward rule).
    if (r) total = tensor<T, Device>(total + reduce_sum(static_cast<T>(r.l1) * abs(*v) + static_cast<T>(r.l2) * square(*v)));
  }
  return total;
}

}  // namespace fluxion::nn
