// fx::nn::depthwise_conv2d and fx::nn::separable_conv2d: Keras's DepthwiseConv2D and
// SeparableConv2D over NHWC input, the convolutions of MobileNet, Xception and ConvNeXt.
//
//   fx::nn::depthwise_conv2d<3, fx::nn::same> dw;          // a 3x3 filter per channel, stride 1
//   fx::tensor<float> y = dw(x);                           // (batch, 28, 28, 32) -> (batch, 28, 28, 32)
//   dw.depthwise_kernel().shape();                         // (3, 3, 32, 1): (height, width, in, multiplier)
//   fx::nn::separable_conv2d<64, 3, fx::nn::same, 2> sep;  // depthwise 3x3 at stride 2, then 1x1 to 64
//   fx::tensor<float> z = sep(y);                          // (batch, 14, 14, 64)
//
// A depthwise convolution filters each input channel on its own (Multiplier filters each; output
// channel c * Multiplier + j), so it costs k*k multiplications an output instead of conv2d's
// k*k*in; the separable convolution then mixes the channels with a 1x1 convolution. As in Keras:
//   - depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier>: variables depthwise_kernel
//     (Kernel, Kernel, in, Multiplier) and bias (in * Multiplier);
//   - separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier>: variables
//     depthwise_kernel (Kernel, Kernel, in, Multiplier), pointwise_kernel (1, 1, in * Multiplier,
//     Filters) and bias (Filters);
//   - every kernel glorot-uniform with Keras's fans of its shape, the bias zeros;
//   - Keras's other arguments under Keras's names: nn::depthwise_conv2d_options (use_bias,
//     depthwise_initializer, bias_initializer, depthwise_regularizer, ...) and
//     nn::separable_conv2d_options (the same and pointwise_initializer, pointwise_regularizer,
//     pointwise_constraint).
// The statements are fx::depthwise_conv2d(x, W) + b and fx::separable_conv2d(x, D, P) + b, with the
// activation that follows in a sequential model fused into the same pass; the depthwise kernels are
// backend/cpu/depthwise_conv.hpp's (backend/cuda/window.hpp's on fx::cuda).
#pragma once

#include "conv2d.hpp"

namespace fluxion::nn {

/// Keras's DepthwiseConv2D arguments beyond its shape, in Keras's order, as designated initializers:
///
///   fx::nn::depthwise_conv2d<3, fx::nn::same>{{.use_bias = false,
///                                              .depthwise_initializer = fx::nn::initializers::he_normal(),
///                                              .depthwise_regularizer = fx::nn::regularizers::l2(4e-5)}}
///
/// The depthwise_* options act on the depthwise kernel as dense's kernel_* on its kernel
/// (nn::layer_options); Keras's activity_regularizer is not built.
struct depthwise_conv2d_options {
  bool use_bias = true;
  initializer depthwise_initializer = initializers::glorot_uniform();
  initializer bias_initializer = initializers::zeros();
  regularizer depthwise_regularizer = {};
  regularizer bias_regularizer = {};
  constraint depthwise_constraint = {};
  constraint bias_constraint = {};
  std::string name = {};
};

/// Keras's SeparableConv2D arguments beyond its shape, in Keras's order: the depthwise_* options act
/// on the depthwise kernel, the pointwise_* on the 1x1 kernel that mixes the channels.
///
///   fx::nn::separable_conv2d<64, 3, fx::nn::same>{{.pointwise_initializer = fx::nn::initializers::he_uniform(),
///                                                  .pointwise_constraint = fx::nn::constraints::max_norm(3)}}
struct separable_conv2d_options {
  bool use_bias = true;
  initializer depthwise_initializer = initializers::glorot_uniform();
  initializer pointwise_initializer = initializers::glorot_uniform();
  initializer bias_initializer = initializers::zeros();
  regularizer depthwise_regularizer = {};
  regularizer pointwise_regularizer = {};
  regularizer bias_regularizer = {};
  constraint depthwise_constraint = {};
  constraint pointwise_constraint = {};
  constraint bias_constraint = {};
  std::string name = {};
};

namespace detail {
/// The options of the depthwise kernel and the bias in kernel_bias_layer's terms: its kernel_* are
/// the depthwise_*.
template <class Options>
layer_options depthwise_layer_options(const Options& o) {
  return {.use_bias = o.use_bias,
          .kernel_initializer = o.depthwise_initializer,
          .bias_initializer = o.bias_initializer,
          .kernel_regularizer = o.depthwise_regularizer,
          .bias_regularizer = o.bias_regularizer,
          .kernel_constraint = o.depthwise_constraint,
          .bias_constraint = o.bias_constraint,
          .name = o.name};
}
/// The other way: `o`'s depthwise_* and bias options from kernel_bias_layer's, under `name`.
template <class Options>
Options depthwise_options_of(const layer_options& l, const std::string& name, Options o = {}) {
  o.use_bias = l.use_bias;
  o.depthwise_initializer = l.kernel_initializer;
  o.bias_initializer = l.bias_initializer;
  o.depthwise_regularizer = l.kernel_regularizer;
  o.bias_regularizer = l.bias_regularizer;
  o.depthwise_constraint = l.kernel_constraint;
  o.bias_constraint = l.bias_constraint;
  o.name = name;
  return o;
}

/// The statement of every depthwise_conv2d layer of element type T: epilogue(depthwise_conv2d(x, W) + b).
template <class T, class Epilogue, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> depthwise_conv2d_forward(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                           const variable<T, Device>& bias, spatial2d strides, padding pad,
                                           spatial2d dilations, const Epilogue& epilogue) {
  return tensor<T, Device>(epilogue(fluxion::depthwise_conv2d(x, kernel, strides, pad, dilations) + bias));
}
/// The statement of every separable_conv2d layer of element type T.
template <class T, class Epilogue, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> separable_conv2d_forward(const tensor<T, Device>& x, const variable<T, Device>& depthwise,
                                           const variable<T, Device>& pointwise, const variable<T, Device>& bias,
                                           spatial2d strides, padding pad, spatial2d dilations,
                                           const Epilogue& epilogue) {
  return tensor<T, Device>(epilogue(fluxion::separable_conv2d(x, depthwise, pointwise, strides, pad, dilations) + bias));
}

}  // namespace detail

template <index_t Kernel, padding Padding = padding::valid, index_t Stride = 1, index_t Dilation = 1,
          index_t Multiplier = 1, class T = float, class Device = cpu>
class depthwise_conv2d
    : public detail::kernel_bias_layer<depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier, T, Device>,
                                       Multiplier, T, Device> {
  static_assert(Kernel > 0 && Stride > 0 && Dilation > 0 && Multiplier > 0,
                "fluxion::nn::depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier>: every size must be "
                "positive.");
  static_assert(Stride == 1 || Dilation == 1,
                "fluxion::nn::depthwise_conv2d: a stride and a dilation both above 1 are not supported (as in "
                "Keras).");
  using base = detail::kernel_bias_layer<depthwise_conv2d, Multiplier, T, Device>;

 public:
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "depthwise_conv2d";
  static constexpr const char* kernel_variable = "depthwise_kernel";
  static constexpr const char* kernel_option = "depthwise";
  template <class U, class D = cpu>
  using rebind = depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier, U, D>;

  /// The bias (and output) channels for `in` input channels.
  static constexpr index_t bias_channels(index_t in) { return in * Multiplier; }

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(
        detail::check_extents<sizeof...(D) == 3, "depthwise_conv2d", "input rank", sizeof...(D), "rank", 3>::value,
        "fluxion::nn::depthwise_conv2d: the input must be (height, width, channels) per example (rank 3); reshape "
        "it first, e.g. with fluxion::nn::reshape<28, 28, 1>.");
    if constexpr (sizeof...(D) == 3) {
      constexpr std::array<index_t, 3> in{D...};
      constexpr index_t span = Dilation * (Kernel - 1) + 1;
      static_assert(detail::check_extents<Padding == padding::same || in[0] >= span, "depthwise_conv2d",
                                          "input height", in[0], "kernel height (dilated)", span>::value &&
                        detail::check_extents<Padding == padding::same || in[1] >= span, "depthwise_conv2d",
                                              "input width", in[1], "kernel width (dilated)", span>::value,
                    "fluxion::nn::depthwise_conv2d: with valid padding the kernel must fit inside the input; use "
                    "fluxion::nn::same padding, or a smaller kernel.");
      return static_shape<detail::window_output(in[0], Kernel, Stride, Dilation, Padding),
                          detail::window_output(in[1], Kernel, Stride, Dilation, Padding), in[2] * Multiplier>{};
    } else {
      return static_shape<1, 1, 1>{};
    }
  }

  depthwise_conv2d() : depthwise_conv2d(depthwise_conv2d_options{}) {}
  template <layer_name S>
  explicit depthwise_conv2d(S&& name)
      : depthwise_conv2d(depthwise_conv2d_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: depthwise_conv2d<3, same>{{.use_bias = false, .depthwise_initializer = ...}}.
  explicit depthwise_conv2d(const depthwise_conv2d_options& options) : base(detail::depthwise_layer_options(options)) {}
  /// nn::layer_options, which these layers took before stop 81: one error that names the right type.
  template <class O>
    requires std::is_same_v<O, layer_options>
  explicit depthwise_conv2d(const O&) {
    static_assert(!std::is_same_v<O, layer_options>,
                  "fluxion::nn::depthwise_conv2d takes fluxion::nn::depthwise_conv2d_options, with Keras's names "
                  "(.depthwise_initializer, .depthwise_regularizer, .depthwise_constraint), not "
                  "fluxion::nn::layer_options.");
  }
  /// The same layer for another element type or device (a sequential model's input decides them).
  template <class U, class D>
    requires(!std::is_same_v<depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier, U, D>, depthwise_conv2d>)
  explicit depthwise_conv2d(const depthwise_conv2d<Kernel, Padding, Stride, Dilation, Multiplier, U, D>& other)
      : depthwise_conv2d(other.options()) {}

  /// The options the layer was made with, under its current name.
  depthwise_conv2d_options options() const {
    return detail::depthwise_options_of<depthwise_conv2d_options>(this->m_options, this->m_name);
  }

  /// Keras's name for kernel(): (Kernel, Kernel, in, Multiplier).
  variable<T, Device>& depthwise_kernel() { return this->kernel(); }

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::depthwise_conv2d: the input's element type differs from the layer's; convert it "
                  "with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::depthwise_conv2d: the input is on another device than the layer's variables; move "
                  "it with fluxion::to<Device>, or declare the layer with that device.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);
    this->check_input(in.shape());
    return detail::depthwise_conv2d_forward<T, Epilogue>(in, *this->m_kernel, *this->m_bias, Stride, Padding,
                                                         Dilation, epilogue);
  }

  /// The layer's statement, unevaluated (nn::compiled_step differentiates it from its type).
  template <class Epilogue = detail::identity>
  auto statement(const tensor<T, Device>& in, const Epilogue& epilogue = {}) {
    this->check_input(in.shape());
    return epilogue(fluxion::depthwise_conv2d(in, this->m_kernel->peek(), Stride, Padding, Dilation) +
                    this->m_bias->peek());
  }

  /// Keras's glorot-uniform kernel (height, width, in, multiplier): fan_in k*k*in, fan_out
  /// k*k*multiplier.
  tensor<T, Device> initial_kernel(random::generator& gen, index_t in) const {
    return this->draw_kernel({Kernel, Kernel, in, Multiplier}, gen);
  }
};

template <index_t Filters, index_t Kernel, padding Padding = padding::valid, index_t Stride = 1, index_t Dilation = 1,
          index_t Multiplier = 1, class T = float, class Device = cpu>
class separable_conv2d
    : public detail::kernel_bias_layer<
          separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier, T, Device>, Filters, T, Device> {
  static_assert(Filters > 0 && Kernel > 0 && Stride > 0 && Dilation > 0 && Multiplier > 0,
                "fluxion::nn::separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier>: every size "
                "must be positive.");
  static_assert(Stride == 1 || Dilation == 1,
                "fluxion::nn::separable_conv2d: a stride and a dilation both above 1 are not supported (as in "
                "Keras).");
  using base = detail::kernel_bias_layer<separable_conv2d, Filters, T, Device>;

 public:
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "separable_conv2d";
  static constexpr const char* kernel_variable = "depthwise_kernel";
  static constexpr const char* kernel_option = "depthwise";
  template <class U, class D = cpu>
  using rebind = separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier, U, D>;

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(
        detail::check_extents<sizeof...(D) == 3, "separable_conv2d", "input rank", sizeof...(D), "rank", 3>::value,
        "fluxion::nn::separable_conv2d: the input must be (height, width, channels) per example (rank 3); reshape "
        "it first, e.g. with fluxion::nn::reshape<28, 28, 1>.");
    if constexpr (sizeof...(D) == 3) {
      constexpr std::array<index_t, 3> in{D...};
      constexpr index_t span = Dilation * (Kernel - 1) + 1;
      static_assert(detail::check_extents<Padding == padding::same || in[0] >= span, "separable_conv2d",
                                          "input height", in[0], "kernel height (dilated)", span>::value &&
                        detail::check_extents<Padding == padding::same || in[1] >= span, "separable_conv2d",
                                              "input width", in[1], "kernel width (dilated)", span>::value,
                    "fluxion::nn::separable_conv2d: with valid padding the kernel must fit inside the input; use "
                    "fluxion::nn::same padding, or a smaller kernel.");
      return static_shape<detail::window_output(in[0], Kernel, Stride, Dilation, Padding),
                          detail::window_output(in[1], Kernel, Stride, Dilation, Padding), Filters>{};
    } else {
      return static_shape<1, 1, Filters>{};
    }
  }

  separable_conv2d() : separable_conv2d(separable_conv2d_options{}) {}
  template <layer_name S>
  explicit separable_conv2d(S&& name)
      : separable_conv2d(separable_conv2d_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: separable_conv2d<64, 3, same>{{.depthwise_initializer = ...,
  /// .pointwise_initializer = ...}}.
  explicit separable_conv2d(const separable_conv2d_options& options)
      : base(detail::depthwise_layer_options(options)),
        m_pointwise_initializer(options.pointwise_initializer),
        m_pointwise_regularizer(options.pointwise_regularizer),
        m_pointwise_constraint(options.pointwise_constraint) {
    detail::check_regularizer(std::string(base_name) + " '" + this->m_name + "'", "pointwise_regularizer",
                              m_pointwise_regularizer);
  }
  /// nn::layer_options, which these layers took before stop 81: one error that names the right type.
  template <class O>
    requires std::is_same_v<O, layer_options>
  explicit separable_conv2d(const O&) {
    static_assert(!std::is_same_v<O, layer_options>,
                  "fluxion::nn::separable_conv2d takes fluxion::nn::separable_conv2d_options, with Keras's names "
                  "(.depthwise_initializer, .pointwise_initializer, ...), not fluxion::nn::layer_options.");
  }
  /// The same layer for another element type or device (a sequential model's input decides them).
  template <class U, class D>
    requires(!std::is_same_v<separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier, U, D>,
                             separable_conv2d>)
  explicit separable_conv2d(const separable_conv2d<Filters, Kernel, Padding, Stride, Dilation, Multiplier, U, D>& other)
      : separable_conv2d(other.options()) {}

  /// The options the layer was made with, under its current name.
  separable_conv2d_options options() const {
    return detail::depthwise_options_of<separable_conv2d_options>(
        this->m_options, this->m_name,
        {.pointwise_initializer = m_pointwise_initializer,
         .pointwise_regularizer = m_pointwise_regularizer,
         .pointwise_constraint = m_pointwise_constraint});
  }

  /// Builds the depthwise kernel and the bias (kernel_bias_layer) and the pointwise kernel.
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    base::build(per_example, gen);
    m_pointwise.emplace(initial_pointwise(gen), this->m_name + "/pointwise_kernel");
    detail::attach(*m_pointwise, m_pointwise_regularizer, m_pointwise_constraint);
  }
  void initialize(random::generator& gen) {
    if (!this->built()) return;
    base::initialize(gen);
    m_pointwise->assign(initial_pointwise(gen));
  }

  /// Keras's names: (Kernel, Kernel, in, Multiplier) and (1, 1, in * Multiplier, Filters).
  variable<T, Device>& depthwise_kernel() { return this->kernel(); }
  variable<T, Device>& pointwise_kernel() { return this->require_built(m_pointwise, base_name, "pointwise_kernel"); }

  /// Keras's order: depthwise_kernel, pointwise_kernel, bias.
  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, this->m_kernel, "depthwise_kernel");
    this->visit(prefix, f, m_pointwise, "pointwise_kernel");
    if (this->m_options.use_bias) this->visit(prefix, f, this->m_bias, "bias");
  }

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::separable_conv2d: the input's element type differs from the layer's; convert it "
                  "with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::separable_conv2d: the input is on another device than the layer's variables; move "
                  "it with fluxion::to<Device>, or declare the layer with that device.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);
    this->check_input(in.shape());
    return detail::separable_conv2d_forward<T, Epilogue>(in, *this->m_kernel, *m_pointwise, *this->m_bias, Stride,
                                                         Padding, Dilation, epilogue);
  }

  /// The layer's statement, unevaluated (nn::compiled_step differentiates it from its type).
  template <class Epilogue = detail::identity>
  auto statement(const tensor<T, Device>& in, const Epilogue& epilogue = {}) {
    this->check_input(in.shape());
    return epilogue(fluxion::separable_conv2d(in, this->m_kernel->peek(), m_pointwise->peek(), Stride, Padding,
                                              Dilation) +
                    this->m_bias->peek());
  }

  /// Keras's glorot-uniform depthwise kernel (height, width, in, multiplier).
  tensor<T, Device> initial_kernel(random::generator& gen, index_t in) const {
    return this->draw_kernel({Kernel, Kernel, in, Multiplier}, gen);
  }

 private:
  /// The pointwise kernel (1, 1, in * Multiplier, Filters) from its initializer (Keras's glorot-uniform
  /// by default).
  tensor<T, Device> initial_pointwise(random::generator& gen) const {
    const index_t mid = this->m_in * Multiplier;
    return detail::draw_weight<T, Device>(m_pointwise_initializer, {1, 1, mid, Filters}, gen);
  }
  initializer m_pointwise_initializer;
  regularizer m_pointwise_regularizer;
  constraint m_pointwise_constraint;
  std::optional<variable<T, Device>> m_pointwise;
};

}  // namespace fluxion::nn
