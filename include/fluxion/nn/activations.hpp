// Activations: as functions of expressions (fx::softmax, fx::log_softmax, fx::gelu, fx::elu,
// fx::selu, fx::leaky_relu, fx::relu6, fx::silu, fx::softsign, fx::mish, next to the fx::relu,
// fx::sigmoid, fx::tanh and fx::softplus of expr/) and as layers of a sequential model, Keras's
// set (swish is silu's other name).
//
//   auto p = fx::softmax(logits);                       // along the last axis
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<128>{}, fx::nn::gelu{},
//                                 fx::nn::dense<10>{}, fx::nn::log_softmax{});
//   fx::nn::leaky_relu{0.1}                             // Keras's LeakyReLU(negative_slope=0.1)
//
// Activation layers are elementwise along their input, so a sequential model fuses each one into
// the statement of the layer before it: dense + bias + relu is one matmul and one fused pass.
//
// Kinks follow TensorFlow's gradients: leaky_relu'(0) = alpha, elu'(0) = alpha, relu6'(0) =
// relu6'(6) = 0. The branch a where() does not take is clamped so that it stays finite (elu's
// expm1 reads min(x, 0)): its zero gradient is never 0 * inf. NaN goes through every one.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <cmath>
#include <string>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"

namespace fluxion {

namespace detail {

/// softmax's statements on a tensor along axis `ax` (normalized): one instance per element type and
/// device in a program, whatever expression the operand came from (prebuilt for float with
/// FLUXION_PREBUILT_KERNELS, nn/prebuilt.hpp); Config as logsumexp_of's.
///
/// With first derivatives in reverse mode only (the default settings) its gradient is written by
/// hand (fx::custom_gradient): dx = y (dy - sum(dy y)), one reduction and one statement, where the
/// tape's rules for exp(x - logsumexp(x)) took several (stop 89). The value, on the cpu over rows
/// of four vectors or more (and over any axis but the last), takes PyTorch's passes: the maximum,
/// e = exp(x - max) written once, its sum, and e times the sum's reciprocal. As exp(x -
/// logsumexp(x)) the exponential ran twice, in the sum and in the result: 1.8x LibTorch's time
/// over 64 classes. Shorter rows (and other devices, where a pass costs more than an
/// exponential) keep exp(x - logsumexp(x)): their sum gathers a column of rows at a time, from a
/// small buffer that the exponentials fill, where a written e was read back from memory
/// (1.2-1.5x slower over 10, 16 and 32 classes). Nothing here is offered to autodiff: its
/// statements compile their kernels only. With higher orders or forward mode, the tape
/// differentiates exp(x - logsumexp(x)) with its own rules instead.
template <class T, class D, int Config = autodiff_config>
tensor<T, D> softmax_of(const tensor<T, D>& x, int ax) {
#if FLUXION_MAX_DERIVATIVE_ORDER == 1 && !FLUXION_FORWARD_MODE
  auto eval = [](const auto& e) { return materialize_unrecorded(e); };
  auto f = custom_gradient([&](const tensor<T, D>& in) {
    // A non-finite maximum shifts by 0, as logsumexp_of's: all -inf gives NaN (0 / 0), as PyTorch.
    const tensor<T, D> m = eval(reduce_max(in, ax, keepdims));
    const tensor<T, D> shift = eval(where(is_finite(m), m, T(0)));
    bool exp_once = false;
    if constexpr (std::is_same_v<D, cpu> && simd::vector_type_v<T>) {
      // From four vectors the evaluator folds each row's sum by vectors (reduce_short_rows).
      constexpr index_t folded_rows = 4 * static_cast<index_t>(simd::batch<T>::size);
      exp_once = ax != in.shape().rank() - 1 || in.shape()[ax] >= folded_rows;
    }
    tensor<T, D> y;
    if (exp_once) {
      const tensor<T, D> e = eval(exp(in - shift));
      y = eval(e * eval(T(1) / eval(reduce_sum(e, ax, keepdims))));
    } else {
      // logsumexp_of's statements, unrecorded: calling it instantiated its recorded ones too, 9%
      // more GGC memory for a header-only program without a loss (stop 89).
      y = eval(exp(in - eval(log(eval(reduce_sum(exp(in - shift), ax, keepdims))) + shift)));
    }
    auto backward = [y, ax, eval](const tensor<T, D>& dy) {
      return eval(y * (dy - eval(reduce_sum(dy * y, ax, keepdims))));
    };
    return std::pair{std::move(y), backward};
  });
  return f(x);
#else
  return materialize(exp(x - logsumexp_of<T, D>(x, 1u << ax, true)));
#endif
}

}  // namespace detail

/// exp(x - logsumexp(x)) along `axis`: stable at any magnitude of x. A tensor, as TensorFlow's op
/// returns: a fused statement would compute the exponential twice (detail::softmax_of).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto softmax(X&& x, int axis = -1) {
  using E = detail::expr_t<X>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  static_assert(std::is_floating_point_v<T>, "fluxion::softmax: the operand must be float or double.");
  if constexpr (std::is_floating_point_v<T>) {  // no second error after the assertion's
    E e = detail::as_expr<X>(std::forward<X>(x));
    const int ax = normalize_axis(axis, e.shape().rank(), "softmax");
    return detail::softmax_of<T, D>(detail::materialize(e), ax);
  } else {
    return tensor<T, D>();
  }
}

/// x - logsumexp(x) along `axis`.
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto log_softmax(X&& x, int axis = -1) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  return e - reduce_logsumexp(e, axis, keepdims);
}

/// The Gaussian error linear unit, exactly: x * (1 + erf(x / sqrt(2))) / 2 (Keras's default,
/// approximate=False).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto gelu(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  return T(0.5) * e * (T(1) + erf(e * T(0.70710678118654752440)));
}

/// Keras's elu: x where x > 0, alpha (exp(x) - 1) elsewhere.
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto elu(X&& x, double alpha = 1.0) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  return where(e > T(0), e, T(alpha) * expm1(minimum(e, T(0))));
}

/// The scaled elu of self-normalizing networks (Klambauer et al. 2017), with Keras's constants.
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto selu(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  constexpr double alpha = 1.6732632423543772848170429916717, scale = 1.0507009873554804934193349852946;
  return where(e > T(0), T(scale) * e, T(scale * alpha) * expm1(minimum(e, T(0))));
}

/// x where x > 0, alpha x elsewhere (tf.nn.leaky_relu and keras.activations.leaky_relu: alpha
/// 0.2; the nn::leaky_relu layer defaults to Keras's LeakyReLU layer, 0.3).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto leaky_relu(X&& x, double alpha = 0.2) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  return where(e > T(0), e, T(alpha) * e);
}

/// min(max(x, 0), 6), with a zero gradient at both kinks, as tf.nn.relu6.
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto relu6(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  return where(e >= T(6), T(6), relu(e));
}

/// x sigmoid(x) (swish).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto silu(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  return e * sigmoid(e);
}

/// x / (1 + |x|).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto softsign(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  using T = value_type_t<decltype(e)>;
  return e / (T(1) + abs(e));
}

/// x tanh(softplus(x)) (Misra 2019).
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto mish(X&& x) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  return e * tanh(softplus(e));
}

}  // namespace fluxion

namespace fluxion::nn {

namespace detail {
/// An activation layer: identity shape, elementwise, no variables.
template <class Derived>
struct activation_layer : stateless_layer<Derived> {
  static constexpr bool elementwise = true;
  static constexpr bool device_generic = true;
  template <index_t... D>
  static static_shape<D...> output_shape(static_shape<D...>);
  explicit activation_layer(std::string n) : stateless_layer<Derived>(std::move(n)) {}
};
}  // namespace detail

#define FLUXION_ACTIVATION_LAYER(layer_name, keras_name, body)              \
  struct layer_name : detail::activation_layer<layer_name> {                \
    static constexpr const char* base_name = keras_name;                    \
    explicit layer_name(std::string n = {}) : activation_layer(n.empty() ? keras_name : std::move(n)) {} \
    template <class X>                                                      \
    auto operator()(X&& x, bool /*training*/ = false) const {               \
      return body(std::forward<X>(x));                                      \
    }                                                                       \
  };

FLUXION_ACTIVATION_LAYER(relu, "relu", ::fluxion::relu)
namespace detail {
template <>
struct kernel_epilogue<nn::relu> {
  static constexpr bool fusable = true;
  static constexpr auto activation = fluxion::detail::kernels::activation::relu;
};
}  // namespace detail
FLUXION_ACTIVATION_LAYER(sigmoid, "sigmoid", ::fluxion::sigmoid)
FLUXION_ACTIVATION_LAYER(tanh, "tanh", ::fluxion::tanh)
FLUXION_ACTIVATION_LAYER(softmax, "softmax", ::fluxion::softmax)
FLUXION_ACTIVATION_LAYER(log_softmax, "log_softmax", ::fluxion::log_softmax)
FLUXION_ACTIVATION_LAYER(gelu, "gelu", ::fluxion::gelu)
FLUXION_ACTIVATION_LAYER(selu, "selu", ::fluxion::selu)
FLUXION_ACTIVATION_LAYER(relu6, "relu6", ::fluxion::relu6)
FLUXION_ACTIVATION_LAYER(silu, "silu", ::fluxion::silu)
FLUXION_ACTIVATION_LAYER(softplus, "softplus", ::fluxion::softplus)
FLUXION_ACTIVATION_LAYER(softsign, "softsign", ::fluxion::softsign)
FLUXION_ACTIVATION_LAYER(mish, "mish", ::fluxion::mish)
#undef FLUXION_ACTIVATION_LAYER
/// swish is silu (Keras has both names).
using swish = silu;

/// Activation layers with a slope: Keras's ELU(alpha = 1) and LeakyReLU(negative_slope = 0.3).
#define FLUXION_SLOPED_ACTIVATION_LAYER(layer_name, keras_name, default_alpha)                          \
  struct layer_name : detail::activation_layer<layer_name> {                                            \
    static constexpr const char* base_name = keras_name;                                                \
    explicit layer_name(double alpha = default_alpha, std::string n = {})                               \
        : activation_layer(n.empty() ? keras_name : std::move(n)), m_alpha(alpha) {                     \
      if (!std::isfinite(alpha))                                                                        \
        throw invalid_argument(std::string(keras_name) + ": alpha must be finite, got " + std::to_string(alpha)); \
    }                                                                                                   \
    double alpha() const noexcept { return m_alpha; }                                                   \
    template <class X>                                                                                  \
    auto operator()(X&& x, bool /*training*/ = false) const {                                           \
      return ::fluxion::layer_name(std::forward<X>(x), m_alpha);                                        \
    }                                                                                                   \
                                                                                                        \
   private:                                                                                             \
    double m_alpha;                                                                                     \
  };
FLUXION_SLOPED_ACTIVATION_LAYER(elu, "elu", 1.0)
FLUXION_SLOPED_ACTIVATION_LAYER(leaky_relu, "leaky_relu", 0.3)
#undef FLUXION_SLOPED_ACTIVATION_LAYER

/// Keras's Rescaling: x * scale + offset, elementwise, as the first layer of an image model whose
/// pixels are 0-255 (nn::rescaling{1.0 / 255}) or -1-1 (nn::rescaling{1.0 / 127.5, -1.0}). Fused
/// into the statement of the layer before it where there is one, as an activation is. The input
/// must be float or double (cast integer pixels with fluxion::cast<float> first).
struct rescaling : detail::activation_layer<rescaling> {
  static constexpr const char* base_name = "rescaling";
  explicit rescaling(double scale, double offset = 0.0, std::string n = {})
      : activation_layer(n.empty() ? base_name : std::move(n)), m_scale(scale), m_offset(offset) {
    if (!std::isfinite(scale) || !std::isfinite(offset))
      throw invalid_argument("rescaling '" + name() + "': scale = " + std::to_string(scale) +
                             " and offset = " + std::to_string(offset) + " must be finite");
  }
  double scale() const noexcept { return m_scale; }
  double offset() const noexcept { return m_offset; }
  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    static_assert(std::is_floating_point_v<T>,
                  "fluxion::nn::rescaling: the input must be float or double; convert integer pixels with "
                  "fluxion::cast<float>(x) first (Keras casts them to the layer's float type).");
    return e * static_cast<T>(m_scale) + static_cast<T>(m_offset);
  }

 private:
  double m_scale, m_offset;
};

}  // namespace fluxion::nn
