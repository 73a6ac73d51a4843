// fx::nn::layer_norm: Keras's LayerNormalization over the last axis.
//
//   fx::nn::layer_norm ln;                            // epsilon 1e-3, as Keras
//   fx::tensor<float> y = ln(x);                      // x: (batch, ..., features), same shape out
//   ln.gamma().shape();                               // (features): ones; ln.beta(): zeros
//
// Each example's last axis is normalized with its own mean and biased variance, y = gamma (x -
// mean) / sqrt(var + epsilon) + beta, the same in training and inference: two reductions, then one
// fused statement (with the activation that follows in a sequential model as its epilogue).
//
// Keras's other arguments are nn::layer_norm_options: center = false leaves no beta and scale =
// false no gamma (beta() and gamma() throw; the statement adds a constant 0 and multiplies by a
// constant 1, which no tape watches), the two initializers, and gamma's and beta's regularizers and
// constraints (kept on the variables). rms_scaling = true is Keras 3's RMS normalization (RMSNorm,
// as LLaMA's): y = gamma x / sqrt(mean(x^2) + epsilon), with gamma only (center and scale are
// ignored, as Keras ignores them: no beta variable), one reduction and one statement.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../tensor/creation.hpp"
#include "module.hpp"

namespace fluxion::nn {

/// Keras's LayerNormalization arguments beyond the axis (the last), in its order, with its defaults:
///
///   fx::nn::layer_norm{{.epsilon = 1e-6}}
///   fx::nn::layer_norm{{.rms_scaling = true}}                 // RMSNorm: gamma x / rms(x)
///   fx::nn::layer_norm{{.center = false, .gamma_regularizer = fx::nn::regularizers::l2(1e-4)}}
struct layer_norm_options {
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  bool rms_scaling = false;
  initializer beta_initializer = initializers::zeros();
  initializer gamma_initializer = initializers::ones();
  regularizer beta_regularizer = {};
  regularizer gamma_regularizer = {};
  constraint beta_constraint = {};
  constraint gamma_constraint = {};
  std::string name = {};
};

namespace detail {

/// layer_norm's statement on `x` over its last axis, the activation that follows applied in the
/// same pass (with `rms`, x / rms(x) * gamma). A function of T, Device and the epilogue only, so
/// that the library holds the float cpu ones (nn/prebuilt.hpp); Config as batch_normalize's.
template <class T, class Device, class Epilogue, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> layer_normalize(const tensor<T, Device>& x, variable<T, Device>& gamma, variable<T, Device>& beta,
                                  T eps, bool rms, const Epilogue& epilogue) {
  if (rms) {
    const tensor<T, Device> mean_square = reduce_mean(square(x), -1, keepdims);
    return tensor<T, Device>(epilogue(x * rsqrt(mean_square + eps) * gamma));
  }
  const tensor<T, Device> mean = reduce_mean(x, -1, keepdims);
  const tensor<T, Device> variance = reduce_mean(square(x - mean), -1, keepdims);
  return tensor<T, Device>(epilogue((x - mean) * rsqrt(variance + eps) * gamma + beta));
}

}  // namespace detail

template <class T = float, class Device = cpu>
class layer_norm : public detail::affine_norm<layer_norm<T, Device>, T, Device, layer_norm_options> {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::layer_norm<T>: T must be a floating-point type.");
  using base = detail::affine_norm<layer_norm<T, Device>, T, Device, layer_norm_options>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  /// Keras's supports_masking: a sequential model passes a mask through this layer (it keeps the time axis).
  static constexpr bool supports_masking = true;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "layer_normalization";
  static constexpr const char* layer_text = "layer_norm";
  template <class U, class D = cpu>
  using rebind = layer_norm<U, D>;
  template <index_t... D>
  static static_shape<D...> output_shape(static_shape<D...>) {
    return {};
  }

  layer_norm() : layer_norm(layer_norm_options{}) {}
  /// A template, so that layer_norm{{}} takes the options (Keras's defaults), not an epsilon of 0.
  template <class E>
    requires std::is_arithmetic_v<E>
  explicit layer_norm(E epsilon, std::string name = {})
      : layer_norm(layer_norm_options{.epsilon = static_cast<double>(epsilon), .name = std::move(name)}) {}
  template <layer_name S>
  explicit layer_norm(S&& name) : layer_norm(layer_norm_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: layer_norm{{.epsilon = 1e-6, .rms_scaling = true}}. With rms_scaling, Keras
  /// ignores center and scale: the layer has gamma and no beta.
  explicit layer_norm(layer_norm_options options)
      : base(std::move(options), [this](layer_norm_options& o) {
          if (!o.rms_scaling) return;
          if (o.beta_regularizer || o.beta_constraint)
            throw invalid_argument(this->text() + ": a beta_regularizer or beta_constraint with rms_scaling = true has "
                                                  "no beta to act on (RMS normalization scales by gamma only)");
          o.center = false;
          o.scale = true;
        }) {}
  /// The same layer for another element type; the variables are created when it is built.
  template <class U, class D>
    requires(!std::is_same_v<layer_norm<U, D>, layer_norm>)
  explicit layer_norm(const layer_norm<U, D>& other) : layer_norm(other.options()) {}

  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() < 1)
      throw shape_error(this->text() + ": the input needs at least one axis of features");
    this->build_gamma_beta(per_example[per_example.rank() - 1], gen);
  }

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::layer_norm: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as layer_norm<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::layer_norm: the input is on another device than the layer's variables; move it "
                  "with fluxion::to<Device>, or declare the layer as layer_norm<T, Device>.");
    const tensor<T, Device> xt = this->checked_input(e, "features");
    return detail::layer_normalize(xt, *this->m_gamma, *this->m_beta, static_cast<T>(this->m_options.epsilon),
                                   this->m_options.rms_scaling, epilogue);
  }
};

}  // namespace fluxion::nn
