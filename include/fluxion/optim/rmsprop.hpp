// fx::optim::rmsprop: gradients divided by a moving root mean square of recent gradients, with
// optional momentum and the centered variant (Keras's RMSprop).
//
//   fx::optim::rmsprop opt{1e-3};
//   fx::optim::rmsprop centered{{.learning_rate = 1e-3, .rho = 0.9, .momentum = 0.5, .centered = true}};
//   opt.apply_gradients(tape.gradient(loss, vars), vars);
//
// Slots per variable, in this order: `velocity` (v, from 0); `momentum` (p, from 0) when
// momentum > 0; `average_gradient` (a, from 0) when centered.
//   v = rho * v + (1 - rho) * g^2
//   a = rho * a + (1 - rho) * g                       (centered)
//   d = v - a^2 + epsilon   (centered)   or   v + epsilon
//   u = learning_rate * g / sqrt(d)
//   p = momentum * p + u,  w = w - p     (momentum > 0)   or   w = w - u
// Defaults as in Keras: learning_rate 0.001, rho 0.9, momentum 0, epsilon 1e-7, not centered.
//
// PyTorch's torch.optim.RMSprop (alpha = rho, default 0.99; eps 1e-8) puts epsilon outside the
// square root, u = g / (sqrt(d) + eps), and keeps the momentum buffer without the learning rate,
// p = momentum * p + u, w -= lr * p: with epsilon = 0 on both sides and a constant learning rate
// the two agree (tests/optim/peer.test.cpp).
#pragma once

#include "optimizer.hpp"

namespace fluxion::optim {

struct rmsprop_options {
  schedule learning_rate = 0.001;
  double rho = 0.9;       // in [0, 1)
  double momentum = 0.0;  // in [0, 1]
  double epsilon = 1e-7;  // >= 0, inside the square root
  bool centered = false;
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

// Use the alias `rmsprop` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_rmsprop : public optimizer {
 public:
  using options = rmsprop_options;

  basic_rmsprop() : basic_rmsprop(options{}) {}
  explicit basic_rmsprop(schedule learning_rate) : basic_rmsprop(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_rmsprop(options o)
      : optimizer("rmsprop", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_rho(o.rho), m_momentum(o.momentum),
        m_epsilon(o.epsilon), m_centered(o.centered) {
    detail::check_unit_interval("rmsprop", "rho", m_rho, /*closed=*/false);
    detail::check_unit_interval("rmsprop", "momentum", m_momentum, /*closed=*/true);
    detail::check_non_negative("rmsprop", "epsilon", m_epsilon);
  }

  double rho() const noexcept { return m_rho; }
  double momentum() const noexcept { return m_momentum; }
  double epsilon() const noexcept { return m_epsilon; }
  bool centered() const noexcept { return m_centered; }

  std::vector<slot_spec> update_slot_specs() const override {
    std::vector<slot_spec> s{{"velocity", 0.0}};
    if (m_momentum > 0) s.push_back({"momentum", 0.0});
    if (m_centered) s.push_back({"average_gradient", 0.0});
    return s;
  }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    const bool momentum = m_momentum > 0;
    if (momentum && m_centered) run<true, true>(b, c);
    else if (momentum) run<true, false>(b, c);
    else if (m_centered) run<false, true>(b, c);
    else run<false, false>(b, c);
  }

 public:
  // Public (not an implementation secret): nvcc instantiates kernels with it.
  template <bool Momentum, bool Centered, class T>
  struct step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
    static constexpr std::size_t average = Momentum ? 2 : 1;
    T lr, rho, one_minus_rho, momentum, epsilon;
    FLUXION_OPTIMIZER_STEP(
      s[0] = V(rho) * s[0] + V(one_minus_rho) * (g * g);
      V denominator;
      if constexpr (Centered) {
        s[average] = V(rho) * s[average] + V(one_minus_rho) * g;
        denominator = s[0] - s[average] * s[average] + V(epsilon);
      } else {
        denominator = s[0] + V(epsilon);
      }
      const V increment = (V(lr) * g) / detail::sqrt_of(denominator);
      if constexpr (Momentum) {
        s[1] = V(momentum) * s[1] + increment;
        w = w - s[1];
      } else {
        w = w - increment;
      }
    )
  };

 private:
  template <bool Momentum, bool Centered, class T>
  void run(detail::update_list<T> b, const detail::step_constants& c) const {
    constexpr std::size_t slots = 1 + Momentum + Centered;
    detail::fused_update<slots>(
        b, c,
        step<Momentum, Centered, T>{static_cast<T>(c.learning_rate), static_cast<T>(m_rho), static_cast<T>(1 - m_rho),
                                    static_cast<T>(m_momentum), static_cast<T>(m_epsilon)});
  }

  double m_rho;
  double m_momentum;
  double m_epsilon;
  bool m_centered;
};

using rmsprop = basic_rmsprop<>;

}  // namespace fluxion::optim
