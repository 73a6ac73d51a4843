// fx::optim::sgd: gradient descent, with optional momentum and Nesterov momentum (Keras's SGD).
//
//   fx::optim::sgd opt{0.1};                                     // w -= 0.1 * g
//   fx::optim::sgd nesterov{{.learning_rate = 0.01, .momentum = 0.9, .nesterov = true}};
//   opt.apply_gradients(tape.gradient(loss, vars), vars);
//
// With momentum, one slot per variable, `momentum` (m, starting at 0):
//   m = momentum * m - learning_rate * g
//   w = w + m                                   (nesterov: w = w + momentum * m - learning_rate * g)
// Without momentum there is no slot and w = w - learning_rate * g. Defaults as in Keras:
// learning_rate 0.01, momentum 0.
//
// PyTorch's torch.optim.SGD keeps b = momentum * b + g (b = g on the first step) and steps
// w -= lr * b (nesterov: w -= lr * (g + momentum * b)): the same weights while the learning rate
// is constant, since then m = -lr * b; they differ when a schedule changes the learning rate
// (Keras's velocity keeps the old rates, PyTorch's rescales the whole history). Its
// weight_decay is an L2 term added to the gradient, not Keras's decoupled decay, and dampening
// has no Keras counterpart.
#pragma once

#include "optimizer.hpp"

namespace fluxion::optim {

struct sgd_options {
  schedule learning_rate = 0.01;
  double momentum = 0.0;  // in [0, 1]
  bool nesterov = false;
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

// Use the alias `sgd` below (why a class template: see kernel_instantiation in optimizer.hpp).
template <class = void>
class basic_sgd : public optimizer {
 public:
  using options = sgd_options;

  basic_sgd() : basic_sgd(options{}) {}
  explicit basic_sgd(schedule learning_rate) : basic_sgd(options{.learning_rate = std::move(learning_rate)}) {}
  explicit basic_sgd(options o)
      : optimizer("sgd", std::move(o.learning_rate), o.weight_decay, clipping_of(o), ema_of(o), o.gradient_accumulation_steps), m_momentum(o.momentum), m_nesterov(o.nesterov) {
    detail::check_unit_interval("sgd", "momentum", m_momentum, /*closed=*/true);
  }

  double momentum() const noexcept { return m_momentum; }
  bool nesterov() const noexcept { return m_nesterov; }

  std::vector<slot_spec> update_slot_specs() const override {
    if (m_momentum == 0) return {};
    return {{"momentum", 0.0}};
  }

 protected:
  void update(detail::update_list<float> b, const detail::step_constants& c) const override { kernel(b, c); }
  void update(detail::update_list<double> b, const detail::step_constants& c) const override { kernel(b, c); }

 public:
  // Public, not private: nvcc instantiates device kernels with it.
  /// The per-element step, for xsimd batches on the cpu and for scalars on a device (a functor,
  /// since nvcc's host-device lambdas cannot be generic).
  template <class T, int Kind>  // 0: plain, 1: momentum, 2: Nesterov momentum
  struct step {
    T lr, momentum;
    FLUXION_OPTIMIZER_STEP(
      if constexpr (Kind == 0) {
        w = w - g * V(lr);
      } else {
        s[0] = s[0] * V(momentum) - g * V(lr);
        if constexpr (Kind == 2) w = w + (s[0] * V(momentum) - g * V(lr));
        else w = w + s[0];
      }
    )
  };

 private:
  template <class T>
  void kernel(detail::update_list<T> b, const detail::step_constants& c) const {
    const T lr = static_cast<T>(c.learning_rate), momentum = static_cast<T>(m_momentum);
    if (m_momentum == 0) detail::fused_update<0>(b, c, step<T, 0>{lr, momentum});
    else if (m_nesterov) detail::fused_update<1>(b, c, step<T, 2>{lr, momentum});
    else detail::fused_update<1>(b, c, step<T, 1>{lr, momentum});
  }

  double m_momentum;
  bool m_nesterov;
};

using sgd = basic_sgd<>;

}  // namespace fluxion::optim
