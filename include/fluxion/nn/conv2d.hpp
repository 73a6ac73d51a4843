// fx::nn::conv2d<Filters, Kernel, Padding, Stride, Dilation>: Keras's Conv2D over NHWC input.
//
//   fx::nn::conv2d<32, 5, fx::nn::same> conv;      // 32 filters of 5x5, stride 1
//   fx::tensor<float> y = conv(x);                 // (batch, 28, 28, 1) -> (batch, 28, 28, 32)
//   conv.kernel().shape();                         // (5, 5, 1, 32): (height, width, in, out)
//
// The kernel is glorot-uniform (fan_in = k*k*in, fan_out = k*k*out) and the bias zeros, as in
// Keras, unless nn::layer_options say otherwise (conv2d<32, 3, same>{{.use_bias = false}}). The convolution runs on the packed kernels of backend/cpu/conv.hpp; bias and the
// activation that follows in a sequential model are one fused pass over its output.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <optional>
#include <string>

#include "../expr/conv.hpp"
#include "../tensor/creation.hpp"

namespace fluxion::nn {

/// Keras's padding names, as template arguments: conv2d<32, 5, fx::nn::same>.
inline constexpr padding same = padding::same;
inline constexpr padding valid = padding::valid;

namespace detail {
/// Output extent of a window of `kernel` (dilated) over `in` positions.
consteval index_t window_output(index_t in, index_t kernel, index_t stride, index_t dilation, padding pad) {
  const index_t span = dilation * (kernel - 1) + 1;
  if (pad == padding::same) return (in + stride - 1) / stride;
  return in >= span ? (in - span) / stride + 1 : 0;
}

/// Inference on the cpu with nothing recording: conv2d(x, W) + b and the activation `fused` names,
/// applied by the kernel as it stores its output (batch-1 conv 1 -> 32: 11 -> 5.6 us). W is the
/// kernel variable's value seen with shape `kernel_shape` (height, width, in, out): conv1d's
/// (kernel, in, out) is (1, kernel, in, out).
template <class T, class Fused>
tensor<T, cpu> conv2d_fused_inference(const tensor<T, cpu>& x, const tensor<T, cpu>& kernel, const fluxion::shape& kernel_shape,
                                      const tensor<T, cpu>& bias, spatial2d strides, padding pad, spatial2d dilations) {
  namespace k = fluxion::detail::kernels;
  const auto s = fluxion::detail::conv2d_geometry_of(x.shape(), kernel_shape, strides, pad, dilations);
  tensor<T, cpu> out(fluxion::detail::shape_of(fluxion::detail::window_role::output, s));
  // The weights are read again unchanged until an update gives them a new id: a 5x5 filter's
  // Winograd transform is made once (batch-1 conv 32 -> 64: see conv2d_forward_reused_filter).
  k::conv2d_forward_reused_filter<T>(s, x.data(), kernel.data(), kernel.id(), out.mutable_data(),
                                     {bias.data(), Fused::activation});
  return out;
}

/// The statement of every conv2d layer of element type T: epilogue(conv2d(x, W) + b). One instance
/// serves all such layers of a program (see dense_forward in nn/dense.hpp).
template <class T, class Epilogue, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> conv2d_forward(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                 const variable<T, Device>& bias, spatial2d strides, padding pad, spatial2d dilations,
                                 const Epilogue& epilogue) {
  using fused = kernel_epilogue<Epilogue>;
  if constexpr (fused::fusable && std::is_same_v<Device, cpu>) {
    if (nothing_records())
      return conv2d_fused_inference<T, fused>(x, kernel.peek(), kernel.shape(), bias.peek(), strides, pad, dilations);
  }
  return tensor<T, Device>(epilogue(fluxion::conv2d(x, kernel, strides, pad, dilations) + bias));
}
/// What conv1d, conv2d, conv2d_transpose, depthwise_conv2d and separable_conv2d share: a kernel and a bias of Filters, built on the
/// first input of rank Rank + 1 ((batch, height, width, channels), or (batch, steps, channels) for
/// Rank 2), Keras's names, the input's checks. Derived gives base_name and initial_kernel(gen,
/// in_channels).
template <class Derived, index_t Filters, class T, class Device, int Rank = 3>
class kernel_bias_layer : public layer_base<Derived, T, Device> {
  using base = layer_base<Derived, T, Device>;
  static constexpr const char* layout = Rank == 3 ? "(batch, height, width, channels)" : "(batch, steps, channels)";

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;

  bool built() const noexcept { return m_kernel.has_value(); }
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() != Rank)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name + "': expects " + layout +
                        " input, got (batch, " + to_string(per_example).substr(1));
    m_in = per_example[Rank - 1];
    detail::built_or_none(m_kernel, m_bias, [&] {
      m_kernel.emplace(static_cast<const Derived&>(*this).initial_kernel(gen, m_in),
                       this->m_name + "/" + kernel_name());
      m_bias.emplace(initial_bias(gen), this->m_name + "/bias", m_options.use_bias);
      detail::attach(*m_kernel, m_options.kernel_regularizer, m_options.kernel_constraint);
      if (m_options.use_bias) detail::attach(*m_bias, m_options.bias_regularizer, m_options.bias_constraint);
    });
  }
  void initialize(random::generator& gen) {
    if (!built()) return;
    m_kernel->assign(static_cast<const Derived&>(*this).initial_kernel(gen, m_in));
    m_bias->assign(initial_bias(gen));
  }

  variable<T, Device>& kernel() { return this->require_built(m_kernel, Derived::base_name, kernel_name()); }
  variable<T, Device>& bias() {
    detail::require_bias(m_options, Derived::base_name, this->m_name);
    return this->require_built(m_bias, Derived::base_name, "bias");
  }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_kernel, kernel_name());
    if (m_options.use_bias) this->visit(prefix, f, m_bias, "bias");
  }

  /// The options the layer was made with (Keras's use_bias, initializers, regularizers), under its
  /// current name.
  layer_options options() const {
    layer_options o = m_options;
    o.name = this->m_name;
    return o;
  }

  // The constructors of every kernel-and-bias layer, which each inherits (`using ...::kernel_bias_layer;`).
  kernel_bias_layer() : kernel_bias_layer(layer_options{}) {}
  /// A name of its own (a template, so that a braced list of options never reads as a string).
  template <layer_name S>
  explicit kernel_bias_layer(S&& name) : kernel_bias_layer(layer_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's use_bias, initializers and regularizers: conv2d<32, 3, same>{{.use_bias = false}}.
  explicit kernel_bias_layer(layer_options options)
      : base(options.name.empty() ? Derived::base_name : options.name), m_options(std::move(options)) {
    detail::check_layer_options(Derived::base_name, this->m_name, m_options, kernel_option_name());
  }
  /// The same layer for another element type or device (a sequential model's input decides them).
  template <class Other>
    requires(!std::is_same_v<Other, Derived> && std::is_same_v<typename Other::template rebind<T, Device>, Derived>)
  explicit kernel_bias_layer(const Other& other) : kernel_bias_layer(other.options()) {}

 protected:

  /// A kernel of shape s from the kernel_initializer (Keras's fans of s), on Device.
  tensor<T, Device> draw_kernel(const fluxion::shape& s, random::generator& gen) const {
    return detail::draw_weight<T, Device>(m_options.kernel_initializer, s, gen);
  }
  /// The bias, or with use_bias = false the zeros the statement adds (not a trainable variable).
  tensor<T, Device> initial_bias(random::generator& gen) const {
    if (!m_options.use_bias) return zeros<T, Device>({bias_extent()});
    return detail::draw_weight<T, Device>(m_options.bias_initializer, {bias_extent()}, gen);
  }

  /// Keras's name of the kernel's options: `kernel` (kernel_initializer, ...), or
  /// Derived::kernel_option (`depthwise`: depthwise_initializer, ...).
  static constexpr const char* kernel_option_name() {
    if constexpr (requires { Derived::kernel_option; }) return Derived::kernel_option;
    else return "kernel";
  }
  /// Keras's name of the kernel variable: `kernel`, or Derived::kernel_variable
  /// (`depthwise_kernel`).
  static constexpr const char* kernel_name() {
    if constexpr (requires { Derived::kernel_variable; }) return Derived::kernel_variable;
    else return "kernel";
  }
  /// The bias's extent: Filters, or Derived::bias_channels(in) where the output's channels follow
  /// the input's (a depthwise convolution's in * multiplier).
  index_t bias_extent() const {
    if constexpr (requires { Derived::bias_channels(index_t{}); }) return Derived::bias_channels(m_in);
    else return Filters;
  }

  /// Builds the layer on its first input; throws unless `s` is (batch, ..., m_in) of rank Rank + 1.
  void check_input(const fluxion::shape& s) {
    if (s.rank() != Rank + 1)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name + "': expects input of shape " + layout +
                        ", got " + to_string(s));
    if (!built()) static_cast<Derived&>(*this).build(fluxion::shape(s.begin() + 1, s.end()));
    if (s[Rank] != m_in)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name + "': the input has " +
                        std::to_string(s[Rank]) + " channels, the layer was built for " + std::to_string(m_in) +
                        " (input shape " + to_string(s) + ")");
  }
  index_t m_in = 0;
  layer_options m_options;
  std::optional<variable<T, Device>> m_kernel, m_bias;
};
}  // namespace detail

template <index_t Filters, index_t Kernel, padding Padding = padding::valid, index_t Stride = 1, index_t Dilation = 1,
          class T = float, class Device = cpu>
class conv2d
    : public detail::kernel_bias_layer<conv2d<Filters, Kernel, Padding, Stride, Dilation, T, Device>, Filters, T, Device> {
  static_assert(Filters > 0 && Kernel > 0 && Stride > 0 && Dilation > 0,
                "fluxion::nn::conv2d<Filters, Kernel, Padding, Stride, Dilation>: every size must be positive.");
  static_assert(Stride == 1 || Dilation == 1,
                "fluxion::nn::conv2d: a stride and a dilation both above 1 are not supported (as in Keras).");

 public:
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "conv2d";
  template <class U, class D = cpu>
  using rebind = conv2d<Filters, Kernel, Padding, Stride, Dilation, U, D>;

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::check_extents<sizeof...(D) == 3, "conv2d", "input rank", sizeof...(D), "rank", 3>::value,
                  "fluxion::nn::conv2d: the input must be (height, width, channels) per example (rank 3); "
                  "reshape it first, e.g. with fluxion::nn::reshape<28, 28, 1>.");
    if constexpr (sizeof...(D) == 3) {
      constexpr std::array<index_t, 3> in{D...};
      constexpr index_t span = Dilation * (Kernel - 1) + 1;
      static_assert(detail::check_extents<Padding == padding::same || in[0] >= span, "conv2d", "input height", in[0],
                                          "kernel height (dilated)", span>::value &&
                        detail::check_extents<Padding == padding::same || in[1] >= span, "conv2d", "input width",
                                              in[1], "kernel width (dilated)", span>::value,
                    "fluxion::nn::conv2d: with valid padding the kernel must fit inside the input; use "
                    "fluxion::nn::same padding, or a smaller kernel.");
      return static_shape<detail::window_output(in[0], Kernel, Stride, Dilation, Padding),
                          detail::window_output(in[1], Kernel, Stride, Dilation, Padding), Filters>{};
    } else {
      return static_shape<1, 1, Filters>{};
    }
  }

  /// conv2d(), conv2d("name"), conv2d({.use_bias = false, ...}) (nn::layer_options), and the same
  /// layer for another element type or device.
  using conv2d::kernel_bias_layer::kernel_bias_layer;

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::conv2d: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::conv2d: the input is on another device than the layer's variables; move it with "
                  "fluxion::to<Device>, or declare the layer with that device.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);  // the convolution would materialize it anyway
    this->check_input(in.shape());
    return detail::conv2d_forward<T, Epilogue>(in, *this->m_kernel, *this->m_bias, Stride, Padding, Dilation,
                                               epilogue);
  }

  /// The layer's statement, unevaluated: epilogue(conv2d(x, W) + b), the expression operator()
  /// materializes (nn::compiled_step differentiates it from its type, with no tape).
  template <class Epilogue = detail::identity>
  auto statement(const tensor<T, Device>& in, const Epilogue& epilogue = {}) {
    this->check_input(in.shape());
    return epilogue(fluxion::conv2d(in, this->m_kernel->peek(), Stride, Padding, Dilation) + this->m_bias->peek());
  }

  /// The kernel (height, width, in, out), glorot-uniform unless the options say otherwise.
  tensor<T, Device> initial_kernel(random::generator& gen, index_t in) const {
    return this->draw_kernel({Kernel, Kernel, in, Filters}, gen);
  }
};

}  // namespace fluxion::nn
