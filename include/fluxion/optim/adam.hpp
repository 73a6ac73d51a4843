// fx::optim::adam and fx::optim::adamw: adaptive moment estimation, optionally AMSGrad, and its
// variant with decoupled weight decay (Keras's Adam and AdamW).
//
//   fx::optim::adam opt{1e-3};
//   fx::optim::adam ams{{.learning_rate = 1e-3, .beta_2 = 0.99, .amsgrad = true}};
//   fx::optim::adamw decoupled{{.learning_rate = 1e-3, .weight_decay = 0.01}};
//   opt.apply_gradients(tape.gradient(loss, vars), vars);
//
// Slots per variable, in this order: `momentum` (m, from 0), `velocity` (v, from 0), and
// `velocity_hat` (from 0) with amsgrad. At step t = iterations() + 1:
//   alpha = learning_rate * sqrt(1 - beta_2^t) / (1 - beta_1^t)
//   m = m + (g - m) * (1 - beta_1)
//   v = v + (g^2 - v) * (1 - beta_2)
//   v_hat = max(v_hat, v)                                  (amsgrad; then v_hat replaces v below)
//   w = w - m * alpha / (sqrt(v) + epsilon)
// adamw first applies w = w - w * weight_decay * learning_rate (so does any optimizer given a
// weight_decay). Defaults as in Keras: learning_rate 0.001, beta_1 0.9, beta_2 0.999, epsilon
// 1e-7, no amsgrad; adamw's weight_decay 0.004. alpha is computed in double and rounded to the
// variable's type (Keras computes it in the variable's type).
//
// PyTorch's torch.optim.Adam and AdamW divide by sqrt(v) / sqrt(1 - beta_2^t) + eps: its epsilon
// is Keras's divided by sqrt(1 - beta_2^t), which changes every step, so the two agree exactly
// only with epsilon = 0 (tests/optim/peer.test.cpp); PyTorch's default eps is 1e-8. Its Adam's
// weight_decay is an L2 term added to the gradient (not decoupled); its AdamW's is decoupled, as
// here, with a default of 0.01.
#pragma once

#include <cmath>

#include "optimizer.hpp"

namespace fluxion::optim {

struct adam_options {
  schedule learning_rate = 0.001;
  double beta_1 = 0.9;    // in [0, 1)
  double beta_2 = 0.999;  // in [0, 1)
  double epsilon = 1e-7;  // >= 0, outside the square root ("epsilon hat")
  bool amsgrad = false;
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

struct adamw_options {
  schedule learning_rate = 0.001;
  double weight_decay = 0.004;
  double beta_1 = 0.9;
  double beta_2 = 0.999;
  double epsilon = 1e-7;
  bool amsgrad = false;
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

// Use the alias `adam` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_adam : public optimizer {
 public:
  using options = adam_options;

  basic_adam() : basic_adam(options{}) {}
  explicit basic_adam(schedule learning_rate) : basic_adam(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_adam(options o) : basic_adam("adam", std::move(o)) {}

  double beta_1() const noexcept { return m_beta_1; }
  double beta_2() const noexcept { return m_beta_2; }
  double epsilon() const noexcept { return m_epsilon; }
  bool amsgrad() const noexcept { return m_amsgrad; }

  std::vector<slot_spec> update_slot_specs() const override {
    std::vector<slot_spec> s{{"momentum", 0.0}, {"velocity", 0.0}};
    if (m_amsgrad) s.push_back({"velocity_hat", 0.0});
    return s;
  }

 protected:
  basic_adam(std::string name, options o)
      : optimizer(std::move(name), std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_beta_1(o.beta_1),
        m_beta_2(o.beta_2), m_epsilon(o.epsilon), m_amsgrad(o.amsgrad) {
    detail::check_unit_interval(this->name().c_str(), "beta_1", m_beta_1, /*closed=*/false);
    detail::check_unit_interval(this->name().c_str(), "beta_2", m_beta_2, /*closed=*/false);
    detail::check_non_negative(this->name().c_str(), "epsilon", m_epsilon);
  }

  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T alpha, one_minus_beta_1, one_minus_beta_2, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = s[0] + (g - s[0]) * V(one_minus_beta_1);
      s[1] = s[1] + (g * g - s[1]) * V(one_minus_beta_2);
      V v = s[1];
      if constexpr (std::tuple_size_v<S> == 3) {  // amsgrad
        s[2] = detail::max_of(s[2], s[1]);
        v = s[2];
      }
      w = w - (s[0] * V(alpha)) / (detail::sqrt_of(v) + V(epsilon));
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    const double t = static_cast<double>(c.iteration) + 1;
    const step<T> s{static_cast<T>(c.learning_rate * std::sqrt(1 - std::pow(m_beta_2, t)) / (1 - std::pow(m_beta_1, t))),
                    static_cast<T>(1 - m_beta_1), static_cast<T>(1 - m_beta_2), static_cast<T>(m_epsilon)};
    if (m_amsgrad) detail::fused_update<3>(b, c, s);
    else detail::fused_update<2>(b, c, s);
  }

  double m_beta_1;
  double m_beta_2;
  double m_epsilon;
  bool m_amsgrad;
};

using adam = basic_adam<>;

/// Adam with decoupled weight decay, 0.004 by default (Keras's AdamW). Use the alias `adamw` below.
template <class = void>
class basic_adamw : public adam {
 public:
  using options = adamw_options;

  basic_adamw() : basic_adamw(options{}) {}
  explicit basic_adamw(schedule learning_rate) : basic_adamw(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_adamw(options o)
      : adam("adamw", adam_options{.learning_rate = std::move(o.learning_rate),
                             .beta_1 = o.beta_1,
                             .beta_2 = o.beta_2,
                             .epsilon = o.epsilon,
                             .amsgrad = o.amsgrad,
                             .weight_decay = o.weight_decay,
                             .clipnorm = o.clipnorm,
                             .clipvalue = o.clipvalue,
                             .global_clipnorm = o.global_clipnorm,
                             .use_ema = o.use_ema,
                             .ema_momentum = o.ema_momentum,
                             .ema_overwrite_frequency = o.ema_overwrite_frequency,
                             .gradient_accumulation_steps = o.gradient_accumulation_steps}) {}
};

using adamw = basic_adamw<>;

}  // namespace fluxion::optim
