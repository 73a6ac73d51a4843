// fx::nn::dense<Units>: Keras's Dense, y = x W + b along the last axis.
//
//   fx::nn::dense<10> fc;                        // built on its first call, from the input's width
//   fx::tensor<float> y = fc(x);                 // x: (batch, 784) -> (batch, 10)
//   fc.kernel().shape();                         // (784, 10), glorot-uniform; fc.bias(): zeros
//   fx::nn::dense<64> proj{{.use_bias = false, .kernel_initializer = "he_normal",
//                           .kernel_regularizer = fx::nn::regularizers::l2(1e-4)}};   // nn::layer_options
//
// Inside a sequential model the input width is known when the program compiles, and the layer is
// built with the model. On input of rank above 2 it applies to the last axis, as Keras's Dense.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <optional>
#include <string>

#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"

namespace fluxion::nn {

namespace detail {
/// The statement of every dense layer of element type T: epilogue(x W + b), along the last axis.
/// A function of tensors and variables, not of the layers' types or of the input's expression, so
/// that one instance (and one backward function) serves all dense layers of a program, and
/// FLUXION_PREBUILT_KERNELS can compile the common ones once (nn/prebuilt.hpp). Config keeps
/// programs built with other autodiff settings (core/config.hpp) from linking another's copy.
template <class T, class Epilogue, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> dense_forward(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                const variable<T, Device>& bias, const Epilogue& epilogue) {
  const fluxion::shape& s = x.shape();
  using fused = kernel_epilogue<Epilogue>;
  if constexpr (fused::fusable && std::is_same_v<Device, cpu> && fluxion::detail::kernels::gemm_scalar<T>) {
    // Inference: bias and relu in the GEMM's store (see kernel_epilogue, nn/module.hpp). Shapes
    // that do not match take the statement below, which reports them.
    const index_t in = kernel.shape()[0], units = kernel.shape()[1];
    if (nothing_records() && s.rank() >= 2 && s[s.rank() - 1] == in) {
      namespace k = fluxion::detail::kernels;
      std::vector<index_t> out_shape(s.begin(), s.end());
      out_shape.back() = units;
      tensor<T, Device> out{fluxion::shape(out_shape)};
      const index_t rows = x.size() / std::max<index_t>(in, 1);
      k::gemm<T>(k::transpose::no, k::transpose::no, rows, units, in, T(1), x.data(), in, kernel.peek().data(), units,
                 T(0), out.mutable_data(), units, {bias.peek().data(), fused::activation});
      return out;
    }
  }
  if (s.rank() == 2) return tensor<T, Device>(epilogue(matmul(x, kernel) + bias));
  std::vector<index_t> out(s.begin(), s.end());
  out.back() = kernel.shape()[1];
  const tensor<T, Device> flat = epilogue(matmul(reshape(x, {-1, kernel.shape()[0]}), kernel) + bias);
  return tensor<T, Device>(reshape(flat, out));
}
}  // namespace detail

template <index_t Units, class T = float, class Device = cpu>
class dense : public layer_base<dense<Units, T, Device>, T, Device> {
  static_assert(Units > 0, "fluxion::nn::dense<Units>: Units must be positive.");
  using base = layer_base<dense<Units, T, Device>, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  /// Keras's supports_masking: a sequential model passes a mask through this layer (it keeps the time axis).
  static constexpr bool supports_masking = true;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "dense";
  static constexpr index_t units = Units;
  template <class U, class D = cpu>
  using rebind = dense<Units, U, D>;
  /// The per-example output shape: the last extent becomes Units.
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return static_shape<(I + 1 == sizeof...(D) ? Units : std::array<index_t, sizeof...(D)>{D...}[I])...>{};
    }(std::make_index_sequence<sizeof...(D)>{});
  }

  dense() : dense(layer_options{}) {}
  template <layer_name S>
  explicit dense(S&& name) : dense(layer_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's use_bias, initializers and regularizers: dense<64>{{.use_bias = false}}.
  explicit dense(layer_options options)
      : base(options.name.empty() ? base_name : options.name), m_options(std::move(options)) {
    detail::check_layer_options(base_name, this->m_name, m_options);
  }
  /// The same layer for another element type or device (a sequential model's input decides them).
  template <class U, class D>
    requires(!std::is_same_v<dense<Units, U, D>, dense>)
  explicit dense(const dense<Units, U, D>& other) : dense(other.options()) {}

  /// The options the layer was made with, under its current name.
  layer_options options() const {
    layer_options o = m_options;
    o.name = this->m_name;
    return o;
  }

  bool built() const noexcept { return m_kernel.has_value(); }
  /// Creates the variables for inputs whose last extent is per_example's.
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() < 1)
      throw shape_error("dense '" + this->m_name + "': the input needs at least one axis of features");
    m_in = per_example[per_example.rank() - 1];
    detail::built_or_none(m_kernel, m_bias, [&] {
      m_kernel.emplace(initial_kernel(gen), this->m_name + "/kernel");
      m_bias.emplace(initial_bias(gen), this->m_name + "/bias", m_options.use_bias);
      detail::attach(*m_kernel, m_options.kernel_regularizer, m_options.kernel_constraint);
      if (m_options.use_bias) detail::attach(*m_bias, m_options.bias_regularizer, m_options.bias_constraint);
    });
  }
  /// Draws new initial values (the same shapes and variables).
  void initialize(random::generator& gen) {
    if (!built()) return;
    m_kernel->assign(initial_kernel(gen));
    m_bias->assign(initial_bias(gen));
  }

  /// y = epilogue(x W + b): a sequential model passes the activation that follows as the
  /// epilogue, so that bias and activation are one fused pass over the output.
  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::dense: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as dense<Units, T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::dense: the input is on another device than the layer's variables; move it with "
                  "fluxion::to<Device>, or declare the layer as dense<Units, T, Device>.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);  // matmul would materialize it anyway
    check_input(in.shape(), /*matrix=*/false);
    return detail::dense_forward<T, Epilogue>(in, *m_kernel, *m_bias, epilogue);
  }

  /// Whether statement() applies to per-example input shape S (rank 1; above, the layer reshapes).
  template <class S>
  static constexpr bool statement_for = S::rank == 1;
  /// The layer's statement on a batch of rank 2, unevaluated: epilogue(x W + b), the expression
  /// operator() materializes (nn::compiled_step differentiates it from its type, with no tape).
  template <class Epilogue = detail::identity>
  auto statement(const tensor<T, Device>& in, const Epilogue& epilogue = {}) {
    check_input(in.shape(), /*matrix=*/true);
    return epilogue(matmul(in, m_kernel->peek()) + m_bias->peek());
  }

  variable<T, Device>& kernel() { return this->require_built(m_kernel, "dense", "kernel"); }
  variable<T, Device>& bias() {
    detail::require_bias(m_options, base_name, this->m_name);
    return this->require_built(m_bias, "dense", "bias");
  }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_kernel, "kernel");
    if (m_options.use_bias) this->visit(prefix, f, m_bias, "bias");
  }

 private:
  tensor<T, Device> initial_kernel(random::generator& gen) const {
    return detail::draw_weight<T, Device>(m_options.kernel_initializer, {m_in, Units}, gen);
  }
  /// The bias, or with use_bias = false the zeros the statement adds (not a trainable variable).
  tensor<T, Device> initial_bias(random::generator& gen) const {
    if (!m_options.use_bias) return zeros<T, Device>({Units});
    return detail::draw_weight<T, Device>(m_options.bias_initializer, {Units}, gen);
  }

  /// Builds the layer on its first input; throws unless `s` is (batch, ..., m_in), or (batch, m_in)
  /// with `matrix`.
  void check_input(const fluxion::shape& s, bool matrix) {
    const bool rank_ok = matrix ? s.rank() == 2 : s.rank() >= 2;
    if (!built() && rank_ok) build(fluxion::shape{s[s.rank() - 1]});
    if (!rank_ok || s[s.rank() - 1] != m_in)
      throw shape_error("dense '" + this->m_name + "': expects input of shape (batch, " + (matrix ? "" : "..., ") +
                        (built() ? std::to_string(m_in) : std::string("features")) + "), got " + to_string(s));
  }

  index_t m_in = 0;
  layer_options m_options;
  std::optional<variable<T, Device>> m_kernel, m_bias;
};

}  // namespace fluxion::nn
