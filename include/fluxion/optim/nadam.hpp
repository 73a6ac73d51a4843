// fx::optim::nadam: Adam with Nesterov momentum and Dozat's momentum schedule (Keras's Nadam).
//
//   fx::optim::nadam opt{0.002};
//   fx::optim::nadam custom{{.learning_rate = 0.002, .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7}};
//
// Two slots per variable, `momentum` and `velocity` (Keras's names), from zero. At step t
// (iterations() + 1), with u_s = beta_1 (1 - 0.5 * 0.96^(0.004 s)) and P_t = u_1 u_2 ... u_t:
//   m = m + (g - m) * (1 - beta_1)
//   v = v + (g^2 - v) * (1 - beta_2)
//   m_hat = u_{t+1} m / (1 - P_t u_{t+1}) + (1 - u_t) g / (1 - P_t)
//   w = w - learning_rate * m_hat / (sqrt(v / (1 - beta_2^t)) + epsilon)
// Defaults as in Keras: learning_rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7. P_t is a
// function of the step (Keras keeps it in a variable; here it follows iterations(), so a restored
// checkpoint needs nothing more). PyTorch's torch.optim.NAdam with momentum_decay 0.004 has the same
// schedule, but version 1.13 (Debian's) multiplies u_t into the next product twice, P_t u_t u_{t+1}
// (tests/fixtures/optim/make_fixtures.py); the tests check Keras's formula with a naive loop.
#pragma once

#include <cmath>
#include <cstdint>

#include "optimizer.hpp"

namespace fluxion::optim {

struct nadam_options {
  schedule learning_rate = 0.001;
  double beta_1 = 0.9;    // in [0, 1)
  double beta_2 = 0.999;  // in [0, 1)
  double epsilon = 1e-7;  // >= 0
  double weight_decay = 0.0;  // decoupled, as Keras's weight_decay
  // Keras's gradient clipping (optim::gradient_clipping): at most one, 0 is off.
  double clipnorm = 0.0;
  double clipvalue = 0.0;
  double global_clipnorm = 0.0;
  // Keras's moving average of the weights (optim::moving_average): off unless use_ema.
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::int64_t ema_overwrite_frequency = 0;  // 0: never (Keras's None)
  // Keras's gradient accumulation: k >= 2 updates at every k-th call, from the mean of the k
  // calls' gradients (optimizer::gradient_accumulation_steps); 0 or 1: at every call.
  std::int64_t gradient_accumulation_steps = 0;
};

// Use the alias `nadam` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_nadam : public optimizer {
 public:
  using options = nadam_options;

  basic_nadam() : basic_nadam(options{}) {}
  explicit basic_nadam(schedule learning_rate) : basic_nadam(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_nadam(options o)
      : optimizer("nadam", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_beta_1(o.beta_1),
        m_beta_2(o.beta_2), m_epsilon(o.epsilon) {
    detail::check_unit_interval("nadam", "beta_1", m_beta_1, /*closed=*/false);
    detail::check_unit_interval("nadam", "beta_2", m_beta_2, /*closed=*/false);
    detail::check_non_negative("nadam", "epsilon", m_epsilon);
  }

  double beta_1() const noexcept { return m_beta_1; }
  double beta_2() const noexcept { return m_beta_2; }
  double epsilon() const noexcept { return m_epsilon; }

  std::vector<slot_spec> update_slot_specs() const override { return {{"momentum", 0.0}, {"velocity", 0.0}}; }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T momentum_rate, gradient_rate, one_minus_beta_1, one_minus_beta_2, velocity_scale, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = s[0] + (g - s[0]) * V(one_minus_beta_1);
      s[1] = s[1] + (g * g - s[1]) * V(one_minus_beta_2);
      w = w - (s[0] * V(momentum_rate) + g * V(gradient_rate)) / (detail::sqrt_of(s[1] * V(velocity_scale)) + V(epsilon));
    )
  };

 private:
  /// u_s, the momentum at step s.
  double momentum_at(double s) const { return m_beta_1 * (1 - 0.5 * std::pow(0.96, 0.004 * s)); }
  /// P_t = u_1 ... u_t: the cached product, extended by one factor from the previous step (or
  /// recomputed when iterations() jumped); the float and double lists of one call share it.
  double product_through(std::int64_t t) const {
    if (t == m_product_step) return m_product;
    if (t != m_product_step + 1) {
      m_product = 1;
      for (std::int64_t s = 1; s < t; ++s) m_product *= momentum_at(static_cast<double>(s));
    }
    m_product *= momentum_at(static_cast<double>(t));
    m_product_step = t;
    return m_product;
  }

  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    const std::int64_t t = c.iteration + 1;
    const double u_t = momentum_at(static_cast<double>(t)), u_next = momentum_at(static_cast<double>(t + 1));
    const double product = product_through(t);
    const double lr = c.learning_rate;
    detail::fused_update<2>(b, c, step<T>{static_cast<T>(lr * u_next / (1 - product * u_next)),
                                          static_cast<T>(lr * (1 - u_t) / (1 - product)), static_cast<T>(1 - m_beta_1),
                                          static_cast<T>(1 - m_beta_2),
                                          static_cast<T>(1 / (1 - std::pow(m_beta_2, static_cast<double>(t)))),
                                          static_cast<T>(m_epsilon)});
  }

  double m_beta_1;
  double m_beta_2;
  double m_epsilon;
  mutable std::int64_t m_product_step = 0;  // P_t for t = m_product_step is m_product
  mutable double m_product = 1;
};

using nadam = basic_nadam<>;

}  // namespace fluxion::optim
