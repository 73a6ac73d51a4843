// Keras's weight constraints: a projection of a variable's value that the optimizer applies after
// each update.
//
//   fx::nn::dense<256> fc{{.kernel_constraint = fx::nn::constraints::max_norm(3)}};   // each unit's
//   // incoming weights (axis 0 of the (in, 256) kernel) keep a norm of at most 3, as dropout papers do
//   fx::nn::conv2d<64, 3> conv{{.kernel_constraint = fx::nn::constraints::max_norm(2, {0, 1, 2})}};
//
// Keras 3's set and defaults: max_norm(max_value = 2, axes = {0}), min_max_norm(min_value = 0,
// max_value = 1, rate = 1, axes = {0}), unit_norm(axes = {0}), non_neg(). The constraint is a
// fluxion::constraint kept on the variable (variable::set_constraint attaches one to any
// variable); every fx::optim optimizer applies it in apply_gradients once the variable is updated
// (after the moving average, as Keras's apply()), so fit, compile_step, data_parallel and a loop
// of your own all keep it. With gradient accumulation, only at the steps that update.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../tensor/variable.hpp"

namespace fluxion::nn::constraints {

namespace detail {
inline void check_bound(double v, const char* name, const char* what) {
  if (!(v >= 0) || !std::isfinite(v))
    throw invalid_argument(std::string("constraints::") + name + ": " + what + " = " + fluxion::detail::value_text(v) +
                           " must be finite and not negative");
}
}  // namespace detail

/// Keras's MaxNorm: the norms over `axes` at most max_value.
inline constraint max_norm(double max_value = 2, std::vector<int> axes = {0}) {
  detail::check_bound(max_value, "max_norm", "max_value");
  return {constraint::kind::max_norm, 0, max_value, 1, std::move(axes)};
}
/// Keras's MinMaxNorm: the norms over `axes` moved by `rate` towards [min_value, max_value].
inline constraint min_max_norm(double min_value = 0, double max_value = 1, double rate = 1, std::vector<int> axes = {0}) {
  detail::check_bound(min_value, "min_max_norm", "min_value");
  detail::check_bound(max_value, "min_max_norm", "max_value");
  if (min_value > max_value)
    throw invalid_argument("constraints::min_max_norm: min_value = " + fluxion::detail::value_text(min_value) +
                           " is above max_value = " + fluxion::detail::value_text(max_value));
  if (!(rate >= 0 && rate <= 1))
    throw invalid_argument("constraints::min_max_norm: rate = " + fluxion::detail::value_text(rate) + " must be in [0, 1]");
  return {constraint::kind::min_max_norm, min_value, max_value, rate, std::move(axes)};
}
/// Keras's UnitNorm: the norms over `axes` 1.
inline constraint unit_norm(std::vector<int> axes = {0}) { return {constraint::kind::unit_norm, 1, 1, 1, std::move(axes)}; }
/// Keras's NonNeg: negative values become 0.
inline constraint non_neg() { return {constraint::kind::non_neg, 0, 0, 1, {}}; }

}  // namespace fluxion::nn::constraints
