// fx::optim::adadelta: per-coordinate steps from running averages of squared gradients and squared
// updates (Keras's Adadelta, Zeiler 2012).
//
//   fx::optim::adadelta opt{1.0};
//   fx::optim::adadelta custom{{.learning_rate = 1.0, .rho = 0.95, .epsilon = 1e-6}};
//
// Two slots per variable, `accumulated_grad` and `accumulated_delta_var` (Keras's names), from zero:
//   a = rho * a + (1 - rho) * g^2
//   delta = -sqrt(d + epsilon) / sqrt(a + epsilon) * g
//   d = rho * d + (1 - rho) * delta^2
//   w = w + learning_rate * delta
// Defaults as in Keras: learning_rate 0.001, rho 0.95, epsilon 1e-7 (the paper and PyTorch use a
// rate of 1.0). PyTorch's torch.optim.Adadelta computes the same (tests/optim/peer.test.cpp).
#pragma once

#include "optimizer.hpp"

namespace fluxion::optim {

struct adadelta_options {
  schedule learning_rate = 0.001;
  double rho = 0.95;      // in [0, 1)
  double epsilon = 1e-7;  // > 0: with 0 and a zero start the update is always 0
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

// Use the alias `adadelta` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_adadelta : public optimizer {
 public:
  using options = adadelta_options;

  basic_adadelta() : basic_adadelta(options{}) {}
  explicit basic_adadelta(schedule learning_rate) : basic_adadelta(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_adadelta(options o)
      : optimizer("adadelta", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_rho(o.rho),
        m_epsilon(o.epsilon) {
    detail::check_unit_interval("adadelta", "rho", m_rho, /*closed=*/false);
    detail::check_non_negative("adadelta", "epsilon", m_epsilon);
    if (m_epsilon == 0)
      throw invalid_argument("adadelta: epsilon = 0 must be positive: the squared updates start at 0, so every update would be 0");
  }

  double rho() const noexcept { return m_rho; }
  double epsilon() const noexcept { return m_epsilon; }

  std::vector<slot_spec> update_slot_specs() const override { return {{"accumulated_grad", 0.0}, {"accumulated_delta_var", 0.0}}; }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T lr, rho, one_minus_rho, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = V(rho) * s[0] + V(one_minus_rho) * g * g;
      const V delta = detail::sqrt_of(s[1] + V(epsilon)) / detail::sqrt_of(s[0] + V(epsilon)) * g;
      s[1] = V(rho) * s[1] + V(one_minus_rho) * delta * delta;
      w = w - V(lr) * delta;
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    detail::fused_update<2>(b, c, step<T>{static_cast<T>(c.learning_rate), static_cast<T>(m_rho),
                                          static_cast<T>(1 - m_rho), static_cast<T>(m_epsilon)});
  }

  double m_rho;
  double m_epsilon;
};

using adadelta = basic_adadelta<>;

}  // namespace fluxion::optim
