// Activations: as functions of expressions (fx::softmax, fx::log_softmax, fx::gelu, next to the
// fx::relu, fx::sigmoid and fx::tanh of expr/) and as layers of a sequential model.
//
//   auto p = fx::softmax(logits);                       // along the last axis
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<128>{}, fx::nn::gelu{},
//                                 fx::nn::dense<10>{}, fx::nn::log_softmax{});
//
// Activation layers are elementwise along their input, so a sequential model fuses each one into
// the statement of the layer before it: dense + bias + relu is one matmul and one fused pass.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <cmath>
#include <string>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"

namespace fluxion {

/// exp(x - logsumexp(x)) along `axis`: stable at any magnitude of x.
template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto softmax(X&& x, int axis = -1) {
  auto e = detail::as_expr<X>(std::forward<X>(x));
  return exp(e - reduce_logsumexp(e, axis, keepdims));
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
#undef FLUXION_ACTIVATION_LAYER

}  // namespace fluxion::nn
