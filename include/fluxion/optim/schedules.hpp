// Learning-rate schedules: a learning rate as a function of the optimizer's iteration count,
// with the semantics of Keras's keras.optimizers.schedules.
//
//   fx::optim::adam opt{fx::optim::exponential_decay(0.01, /*decay_steps=*/1000, /*decay_rate=*/0.96)};
//   opt.learning_rate();   // 0.01 now; 0.01 * 0.96^(k / 1000) after k calls to apply_gradients
//   fx::optim::sgd sgd{fx::optim::piecewise_constant({100, 200}, {0.1, 0.01, 0.001})};
//   fx::optim::adam cos{fx::optim::cosine_decay(1e-3, 10000, /*alpha=*/0.1)};
//
// An optimizer evaluates its schedule at `updates()`, the number of updates so far: the number of
// apply_gradients calls (`iterations()`), as in Keras, unless the optimizer accumulates gradients
// over k calls (gradient_accumulation_steps), where Keras's still counts calls and fluxion's
// counts updates, so that the schedule is the one of a k times larger batch. fx::optim::schedule holds either a constant or any callable taking the
// step (std::int64_t) and returning the rate, so a user's own function works as well.
// Values are computed in double (Keras computes them in float32).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/error.hpp"

namespace fluxion::optim {

namespace detail {
/// The shortest text that reads back as `x`: 0.001, 1e-07, -0.5.
inline std::string format_number(double x) {
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, x).ptr);
}
}  // namespace detail

/// A learning rate: a constant, or a function of the optimizer's iteration count.
class schedule {
 public:
  schedule(double constant) : m_constant(constant) {}  // NOLINT: a number is a constant schedule
  template <class F>
    requires(!std::is_arithmetic_v<std::remove_cvref_t<F>> && !std::is_same_v<std::remove_cvref_t<F>, schedule> &&
             std::is_invocable_r_v<double, const std::remove_cvref_t<F>&, std::int64_t>)
  schedule(F&& function) : m_function(std::forward<F>(function)) {}  // NOLINT: as for a constant

  /// The learning rate at `step` (the optimizer's updates()).
  double operator()(std::int64_t step) const { return m_function ? m_function(step) : m_constant; }
  bool is_constant() const noexcept { return !m_function; }

 private:
  double m_constant = 0;
  std::function<double(std::int64_t)> m_function;
};

/// initial_learning_rate * decay_rate ^ (step / decay_steps); with `staircase`, the exponent is
/// rounded down, so the rate drops in steps every decay_steps iterations.
class exponential_decay {
 public:
  exponential_decay(double initial_learning_rate, std::int64_t decay_steps, double decay_rate, bool staircase = false)
      : m_initial(initial_learning_rate), m_decay_steps(decay_steps), m_decay_rate(decay_rate), m_staircase(staircase) {
    if (decay_steps <= 0)
      throw invalid_argument("exponential_decay: decay_steps = " + std::to_string(decay_steps) + " must be positive");
    if (!(decay_rate >= 0) || !std::isfinite(decay_rate))
      throw invalid_argument("exponential_decay: decay_rate = " + detail::format_number(decay_rate) +
                             " must be finite and non-negative");
  }
  double operator()(std::int64_t step) const {
    double p = static_cast<double>(step) / static_cast<double>(m_decay_steps);
    if (m_staircase) p = std::floor(p);
    return m_initial * std::pow(m_decay_rate, p);
  }

 private:
  double m_initial;
  std::int64_t m_decay_steps;
  double m_decay_rate;
  bool m_staircase;
};

/// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i],
/// and values.back() after the last boundary. Needs one more value than boundaries.
class piecewise_constant {
 public:
  piecewise_constant(std::vector<std::int64_t> boundaries, std::vector<double> values)
      : m_boundaries(std::move(boundaries)), m_values(std::move(values)) {
    if (m_values.size() != m_boundaries.size() + 1)
      throw invalid_argument("piecewise_constant: " + std::to_string(m_boundaries.size()) + " boundaries need " +
                             std::to_string(m_boundaries.size() + 1) + " values, not " +
                             std::to_string(m_values.size()));
    for (std::size_t i = 1; i < m_boundaries.size(); ++i)
      if (m_boundaries[i] <= m_boundaries[i - 1])
        throw invalid_argument("piecewise_constant: boundaries must increase, but boundaries[" + std::to_string(i) +
                               "] = " + std::to_string(m_boundaries[i]) + " follows " +
                               std::to_string(m_boundaries[i - 1]));
  }
  double operator()(std::int64_t step) const {
    // The first boundary >= step: its index is the index of the value.
    const auto it = std::lower_bound(m_boundaries.begin(), m_boundaries.end(), step);
    return m_values[static_cast<std::size_t>(it - m_boundaries.begin())];
  }

 private:
  std::vector<std::int64_t> m_boundaries;
  std::vector<double> m_values;
};

/// initial_learning_rate * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha):
/// from the initial rate down to alpha times it over decay_steps, then constant.
/// (Keras's warmup_target and warmup_steps are not offered.)
class cosine_decay {
 public:
  cosine_decay(double initial_learning_rate, std::int64_t decay_steps, double alpha = 0.0)
      : m_initial(initial_learning_rate), m_decay_steps(decay_steps), m_alpha(alpha) {
    if (decay_steps <= 0)
      throw invalid_argument("cosine_decay: decay_steps = " + std::to_string(decay_steps) + " must be positive");
    if (!(alpha >= 0 && alpha <= 1))
      throw invalid_argument("cosine_decay: alpha = " + detail::format_number(alpha) + " is not in [0, 1]");
  }
  double operator()(std::int64_t step) const {
    const double completed = static_cast<double>(std::min(step, m_decay_steps)) / static_cast<double>(m_decay_steps);
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * completed));
    return m_initial * ((1 - m_alpha) * cosine + m_alpha);
  }

 private:
  double m_initial;
  std::int64_t m_decay_steps;
  double m_alpha;
};

}  // namespace fluxion::optim
