// fx::optim::adagrad: per-coordinate learning rates from the sum of squared gradients (Keras's
// Adagrad).
//
//   fx::optim::adagrad opt{0.01};
//   fx::optim::adagrad custom{{.learning_rate = 0.1, .initial_accumulator_value = 0.0, .epsilon = 1e-10}};
//   opt.apply_gradients(tape.gradient(loss, vars), vars);
//
// One slot per variable, `accumulator` (a, starting at initial_accumulator_value):
//   a = a + g^2
//   w = w - learning_rate * g / sqrt(a + epsilon)
// Defaults as in Keras: learning_rate 0.001, initial_accumulator_value 0.1, epsilon 1e-7.
//
// PyTorch's torch.optim.Adagrad puts epsilon outside the square root, w -= lr * g / (sqrt(a) + eps),
// starts the accumulator at 0 by default (eps 1e-10), and has an lr_decay with no Keras
// counterpart. With epsilon = 0 on both sides and the same initial_accumulator_value the two agree
// (tests/optim/peer.test.cpp).
#pragma once

#include "optimizer.hpp"

namespace fluxion::optim {

struct adagrad_options {
  schedule learning_rate = 0.001;
  double initial_accumulator_value = 0.1;  // >= 0
  double epsilon = 1e-7;                   // >= 0, inside the square root
  double weight_decay = 0.0;               // decoupled, as Keras's weight_decay
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

// Use the alias `adagrad` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_adagrad : public optimizer {
 public:
  using options = adagrad_options;

  basic_adagrad() : basic_adagrad(options{}) {}
  explicit basic_adagrad(schedule learning_rate) : basic_adagrad(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_adagrad(options o)
      : optimizer("adagrad", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps),
        m_initial_accumulator_value(o.initial_accumulator_value), m_epsilon(o.epsilon) {
    detail::check_non_negative("adagrad", "initial_accumulator_value", m_initial_accumulator_value);
    detail::check_non_negative("adagrad", "epsilon", m_epsilon);
  }

  double initial_accumulator_value() const noexcept { return m_initial_accumulator_value; }
  double epsilon() const noexcept { return m_epsilon; }

  std::vector<slot_spec> update_slot_specs() const override { return {{"accumulator", m_initial_accumulator_value}}; }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  template <class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    T lr, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = s[0] + g * g;
      w = w - (V(lr) * g) / detail::sqrt_of(s[0] + V(epsilon));
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    detail::fused_update<1>(b, c, step<T>{static_cast<T>(c.learning_rate), static_cast<T>(m_epsilon)});
  }

  double m_initial_accumulator_value;
  double m_epsilon;
};

using adagrad = basic_adagrad<>;

}  // namespace fluxion::optim
