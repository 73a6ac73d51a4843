// fx::nn::conv2d_transpose<Filters, Kernel, Padding, Stride, Dilation>: Keras's Conv2DTranspose
// over NHWC input, the upsampling half of autoencoders, GAN generators and U-Nets.
//
//   fx::nn::conv2d_transpose<16, 3, fx::nn::same, 2> up;   // 16 filters of 3x3, stride 2
//   fx::tensor<float> y = up(x);                           // (batch, 7, 7, 32) -> (batch, 14, 14, 16)
//   up.kernel().shape();                                   // (3, 3, 16, 32): (height, width, out, in)
//
// The output extent is Keras's (output_padding None): with valid padding in * Stride +
// max(dilated Kernel - Stride, 0), with same padding in * Stride. The kernel is glorot-uniform
// (Keras's fans of its (height, width, out, in) shape: fan_in = k*k*Filters, fan_out = k*k*in) and
// the bias zeros. The statement is fx::conv2d_transpose(x, W) + b: the transposed convolution is
// conv2d's input-gradient kernel (backend/cpu/conv.hpp; cuDNN or im2col on fx::cuda), its
// gradients conv2d and conv2d's filter gradient.
#pragma once

#include "conv2d.hpp"

namespace fluxion::nn {

namespace detail {
/// The statement of every conv2d_transpose layer of element type T (one instance per program).
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> conv2d_transpose_forward(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                           const variable<T, Device>& bias, spatial2d strides, padding pad,
                                           spatial2d dilations) {
  return tensor<T, Device>(fluxion::conv2d_transpose(x, kernel, strides, pad, dilations) + bias);
}
}  // namespace detail

template <index_t Filters, index_t Kernel, padding Padding = padding::valid, index_t Stride = 1, index_t Dilation = 1,
          class T = float, class Device = cpu>
class conv2d_transpose
    : public detail::kernel_bias_layer<conv2d_transpose<Filters, Kernel, Padding, Stride, Dilation, T, Device>, Filters,
                                       T, Device> {
  static_assert(Filters > 0 && Kernel > 0 && Stride > 0 && Dilation > 0,
                "fluxion::nn::conv2d_transpose<Filters, Kernel, Padding, Stride, Dilation>: every size must be "
                "positive.");
  static_assert(Stride == 1 || Dilation == 1,
                "fluxion::nn::conv2d_transpose: a stride and a dilation both above 1 are not supported (as in "
                "Keras).");

 public:
  static constexpr const char* base_name = "conv2d_transpose";
  template <class U, class D = cpu>
  using rebind = conv2d_transpose<Filters, Kernel, Padding, Stride, Dilation, U, D>;

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(
        detail::check_extents<sizeof...(D) == 3, "conv2d_transpose", "input rank", sizeof...(D), "rank", 3>::value,
        "fluxion::nn::conv2d_transpose: the input must be (height, width, channels) per example (rank 3); reshape "
        "it first, e.g. with fluxion::nn::reshape<7, 7, 32>.");
    if constexpr (sizeof...(D) == 3) {
      constexpr std::array<index_t, 3> in{D...};
      return static_shape<fluxion::detail::transposed_output(in[0], Kernel, Stride, Dilation, Padding),
                          fluxion::detail::transposed_output(in[1], Kernel, Stride, Dilation, Padding), Filters>{};
    } else {
      return static_shape<1, 1, Filters>{};
    }
  }

  /// conv2d_transpose(), conv2d_transpose("name"), conv2d_transpose({.use_bias = false, ...})
  /// (nn::layer_options), and the same layer for another element type or device.
  using conv2d_transpose::kernel_bias_layer::kernel_bias_layer;

  template <class X>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::conv2d_transpose: the input's element type differs from the layer's; convert it "
                  "with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::conv2d_transpose: the input is on another device than the layer's variables; move "
                  "it with fluxion::to<Device>, or declare the layer with that device.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);
    this->check_input(in.shape());
    return detail::conv2d_transpose_forward<T>(in, *this->m_kernel, *this->m_bias, Stride, Padding, Dilation);
  }

  /// The kernel (height, width, out, in), glorot-uniform unless the options say otherwise (Keras's
  /// fans: fan_in k*k*Filters, fan_out k*k*in).
  tensor<T, Device> initial_kernel(random::generator& gen, index_t in) const {
    return this->draw_kernel({Kernel, Kernel, Filters, in}, gen);
  }
};

}  // namespace fluxion::nn
