// fx::optim::lion: the sign of an interpolated momentum as the step (Keras's Lion, Chen et al. 2023,
// "Symbolic Discovery of Optimization Algorithms").
//
//   fx::optim::lion opt{1e-4};   // typically 3-10x smaller than Adam's rate, with more weight decay
//   fx::optim::lion custom{{.learning_rate = 1e-4, .beta_1 = 0.9, .beta_2 = 0.99, .weight_decay = 0.01}};
//
// One slot per variable, `momentum` (Keras's name), from zero:
//   w = w - learning_rate * sign(beta_1 * m + (1 - beta_1) * g)
//   m = beta_2 * m + (1 - beta_2) * g
// Every coordinate moves by exactly the learning rate (or not at all, where the sign is 0). Defaults
// as in Keras: learning_rate 0.001, beta_1 0.9, beta_2 0.99; beta_1 must be in (0, 1], as Keras
// requires (0 would make it sign SGD).
#pragma once

#include "optimizer.hpp"

namespace fluxion::optim {

struct lion_options {
  schedule learning_rate = 0.001;
  double beta_1 = 0.9;   // in (0, 1]
  double beta_2 = 0.99;  // in [0, 1]
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

// Use the alias `lion` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_lion : public optimizer {
 public:
  using options = lion_options;

  basic_lion() : basic_lion(options{}) {}
  explicit basic_lion(schedule learning_rate) : basic_lion(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_lion(options o)
      : optimizer("lion", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_beta_1(o.beta_1),
        m_beta_2(o.beta_2) {
    if (!(m_beta_1 > 0 && m_beta_1 <= 1))
      throw invalid_argument("lion: beta_1 = " + detail::format_number(m_beta_1) +
                             " is not in (0, 1] (at 0 the optimizer is sign SGD)");
    detail::check_unit_interval("lion", "beta_2", m_beta_2, /*closed=*/true);
  }

  double beta_1() const noexcept { return m_beta_1; }
  double beta_2() const noexcept { return m_beta_2; }

  std::vector<slot_spec> update_slot_specs() const override { return {{"momentum", 0.0}}; }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T lr, beta_1, one_minus_beta_1, beta_2, one_minus_beta_2;
    FLUXION_OPTIMIZER_STEP(
      w = w - V(lr) * detail::sign_of(s[0] * V(beta_1) + g * V(one_minus_beta_1));
      s[0] = s[0] * V(beta_2) + g * V(one_minus_beta_2);
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    detail::fused_update<1>(b, c, step<T>{static_cast<T>(c.learning_rate), static_cast<T>(m_beta_1),
                                          static_cast<T>(1 - m_beta_1), static_cast<T>(m_beta_2),
                                          static_cast<T>(1 - m_beta_2)});
  }

  double m_beta_1;
  double m_beta_2;
};

using lion = basic_lion<>;

}  // namespace fluxion::optim
