// fx::optim::adamax: Adam with the infinity norm in place of the second moment (Keras's Adamax).
//
//   fx::optim::adamax opt{0.002};
//   fx::optim::adamax custom{{.learning_rate = 0.002, .beta_1 = 0.9, .beta_2 = 0.999, .epsilon = 1e-7}};
//
// Two slots per variable, `m` and `u` (Keras's names), from zero; at step t (iterations() + 1):
//   m = m + (g - m) * (1 - beta_1)
//   u = max(beta_2 * u, |g|)
//   w = w - learning_rate * m / ((1 - beta_1^t) * (u + epsilon))
// Defaults as in Keras: learning_rate 0.001, beta_1 0.9, beta_2 0.999, epsilon 1e-7. PyTorch's
// torch.optim.Adamax adds epsilon inside the max instead; with epsilon 0 the two agree
// (tests/optim/peer.test.cpp).
#pragma once

#include <cmath>

#include "optimizer.hpp"

namespace fluxion::optim {

struct adamax_options {
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

// Use the alias `adamax` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_adamax : public optimizer {
 public:
  using options = adamax_options;

  basic_adamax() : basic_adamax(options{}) {}
  explicit basic_adamax(schedule learning_rate) : basic_adamax(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_adamax(options o)
      : optimizer("adamax", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_beta_1(o.beta_1),
        m_beta_2(o.beta_2), m_epsilon(o.epsilon) {
    detail::check_unit_interval("adamax", "beta_1", m_beta_1, /*closed=*/false);
    detail::check_unit_interval("adamax", "beta_2", m_beta_2, /*closed=*/false);
    detail::check_non_negative("adamax", "epsilon", m_epsilon);
  }

  double beta_1() const noexcept { return m_beta_1; }
  double beta_2() const noexcept { return m_beta_2; }
  double epsilon() const noexcept { return m_epsilon; }

  std::vector<slot_spec> update_slot_specs() const override { return {{"m", 0.0}, {"u", 0.0}}; }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T alpha, one_minus_beta_1, beta_2, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = s[0] + (g - s[0]) * V(one_minus_beta_1);
      s[1] = detail::max_of(V(beta_2) * s[1], detail::abs_of(g));
      w = w - (s[0] * V(alpha)) / (s[1] + V(epsilon));
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    const double t = static_cast<double>(c.iteration) + 1;
    detail::fused_update<2>(b, c, step<T>{static_cast<T>(c.learning_rate / (1 - std::pow(m_beta_1, t))),
                                          static_cast<T>(1 - m_beta_1), static_cast<T>(m_beta_2),
                                          static_cast<T>(m_epsilon)});
  }

  double m_beta_1;
  double m_beta_2;
  double m_epsilon;
};

using adamax = basic_adamax<>;

}  // namespace fluxion::optim
