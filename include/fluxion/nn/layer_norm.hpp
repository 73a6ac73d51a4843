// fx::nn::layer_norm: Keras's LayerNormalization over the last axis.
//
//   fx::nn::layer_norm ln;                            // epsilon 1e-3, as Keras
//   fx::tensor<float> y = ln(x);                      // x: (batch, ..., features), same shape out
//   ln.gamma().shape();                               // (features): ones; ln.beta(): zeros
//
// Each example's last axis is normalized with its own mean and biased variance, y = gamma (x -
// mean) / sqrt(var + epsilon) + beta, the same in training and inference: two reductions, then one
// fused statement (with the activation that follows in a sequential model as its epilogue).
#pragma once

#include <optional>
#include <string>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../tensor/creation.hpp"
#include "module.hpp"

namespace fluxion::nn {

template <class T = float, class Device = cpu>
class layer_norm : public layer_base<layer_norm<T, Device>, T, Device> {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::layer_norm<T>: T must be a floating-point type.");
  using base = layer_base<layer_norm<T, Device>, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  /// Keras's supports_masking: a sequential model passes a mask through this layer (it keeps the time axis).
  static constexpr bool supports_masking = true;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "layer_normalization";
  template <class U, class D = cpu>
  using rebind = layer_norm<U, D>;
  template <index_t... D>
  static static_shape<D...> output_shape(static_shape<D...>) {
    return {};
  }

  explicit layer_norm(double epsilon = 1e-3, std::string name = {})
      : base(name.empty() ? base_name : std::move(name)), m_epsilon(epsilon) {
    if (!(epsilon > 0.0))
      throw invalid_argument("layer_norm '" + this->m_name + "': epsilon = " + std::to_string(epsilon) +
                             " is not positive");
  }
  explicit layer_norm(std::string name) : layer_norm(1e-3, std::move(name)) {}
  /// The same layer for another element type; the variables are created when it is built.
  template <class U, class D>
    requires(!std::is_same_v<layer_norm<U, D>, layer_norm>)
  explicit layer_norm(const layer_norm<U, D>& other) : layer_norm(other.epsilon(), other.name()) {}

  double epsilon() const noexcept { return m_epsilon; }

  bool built() const noexcept { return m_gamma.has_value(); }
  void build(const fluxion::shape& per_example, random::generator& /*gen*/ = random::global_generator()) {
    if (per_example.rank() < 1)
      throw shape_error("layer_norm '" + this->m_name + "': the input needs at least one axis of features");
    m_features = per_example[per_example.rank() - 1];
    m_gamma.emplace(ones<T, Device>({m_features}), this->m_name + "/gamma");
    m_beta.emplace(zeros<T, Device>({m_features}), this->m_name + "/beta");
  }
  void initialize(random::generator&) {
    if (!built()) return;
    m_gamma->assign(ones<T, Device>({m_features}));
    m_beta->assign(zeros<T, Device>({m_features}));
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
    const fluxion::shape& s = e.shape();
    if (!built() && s.rank() >= 2) build(fluxion::shape{s[s.rank() - 1]});
    if (s.rank() < 2 || s[s.rank() - 1] != m_features)
      throw shape_error("layer_norm '" + this->m_name + "': expects input of shape (batch, ..., " +
                        (built() ? std::to_string(m_features) : std::string("features")) + "), got " + to_string(s));
    const tensor<T, Device> xt = fluxion::detail::materialize_asserted<T, Device>(e);
    const tensor<T, Device> mean = reduce_mean(xt, -1, keepdims);
    const tensor<T, Device> variance = reduce_mean(square(xt - mean), -1, keepdims);
    return tensor<T, Device>(epilogue((xt - mean) * rsqrt(variance + static_cast<T>(m_epsilon)) * *m_gamma + *m_beta));
  }

  variable<T, Device>& gamma() { return this->require_built(m_gamma, "layer_norm", "gamma"); }
  variable<T, Device>& beta() { return this->require_built(m_beta, "layer_norm", "beta"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_gamma, "gamma");
    this->visit(prefix, f, m_beta, "beta");
  }

 private:
  double m_epsilon;
  index_t m_features = 0;
  std::optional<variable<T, Device>> m_gamma, m_beta;
};

}  // namespace fluxion::nn
