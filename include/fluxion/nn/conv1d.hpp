// Keras's one-dimensional convolution and pooling over (batch, steps, channels):
// fx::nn::conv1d<Filters, Kernel, Padding, Stride, Dilation>, max_pool1d<Pool, Stride, Padding> and
// avg_pool1d<Pool, Stride, Padding>.
//
//   fx::nn::conv1d<64, 3, fx::nn::causal, 1, 2> conv;  // 64 filters of 3 steps, dilated by 2;
//                                                       // step t sees only steps <= t (WaveNet)
//   fx::tensor<float> y = conv(x);                      // (batch, 100, 16) -> (batch, 100, 64)
//   conv.kernel().shape();                              // (3, 16, 64): (kernel, in, out), as Keras's
//   auto net = fx::nn::sequential(gen, fx::nn::input<100, 16>{}, fx::nn::conv1d<32, 5>{}, fx::nn::relu{},
//                                 fx::nn::max_pool1d<2>{}, fx::nn::global_avg_pool1d{}, fx::nn::dense<1>{});
//
// Padding is fx::nn::valid, fx::nn::same, or fx::nn::causal (Keras's padding="causal": zeros before
// the first step, dilation * (kernel - 1) of them, so that no output sees a later input). Each is
// conv2d (or the 2-D pool) over the input viewed as (batch, 1, steps, channels), with the kernel
// viewed as (1, kernel, in, out): views of the same buffers, so every device, the tape's backward
// rules and forward mode are conv2d's. The kernel is glorot-uniform (fan_in = kernel * in, fan_out =
// kernel * out) and the bias zeros, as in Keras.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <array>
#include <optional>
#include <string>
#include <type_traits>

#include "../expr/conv.hpp"
#include "../expr/indexing.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "conv2d.hpp"
#include "initializers.hpp"
#include "pooling.hpp"

namespace fluxion::nn {

/// Keras's padding="causal" for conv1d: conv1d<32, 3, fx::nn::causal>.
struct causal_padding {
  constexpr bool operator==(const causal_padding&) const = default;
};
inline constexpr causal_padding causal{};

namespace detail {

/// Whether P (a conv1d or pool1d Padding argument) is one of valid, same and causal.
template <auto P>
inline constexpr bool padding_1d_v = std::is_same_v<std::remove_cvref_t<decltype(P)>, padding> || std::is_same_v<std::remove_cvref_t<decltype(P)>, causal_padding>;

/// The padding conv2d gets for a 1-D Padding: causal pads the input itself, then convolves as valid.
template <auto P>
constexpr padding padding_2d() {
  if constexpr (std::is_same_v<std::remove_cvref_t<decltype(P)>, causal_padding>) return padding::valid;
  else return P;
}
template <auto P>
inline constexpr bool is_causal_v = std::is_same_v<std::remove_cvref_t<decltype(P)>, causal_padding>;
/// Whether P is valid padding (the kernel must fit inside the input).
template <auto P>
constexpr bool is_valid_padding() {
  if constexpr (is_causal_v<P>) return false;
  else return P == padding::valid;
}

/// Output steps of a 1-D window over `in` steps (causal: as same, ceil(in / stride)).
template <auto P>
consteval index_t window_output_1d(index_t in, index_t kernel, index_t stride, index_t dilation) {
  if constexpr (is_causal_v<P>) return (in + stride - 1) / stride;
  else return window_output(in, kernel, stride, dilation, P);
}

/// x (batch, steps, channels) as (batch, 1, steps', channels), steps' = steps + `left` zeros before
/// the first step. Through reshape and pad expressions, so that tapes see the views.
template <class T, class Device>
tensor<T, Device> as_rows(const tensor<T, Device>& x, index_t left) {
  const auto& s = x.shape();
  if (left == 0) return tensor<T, Device>(fluxion::reshape(x, {s[0], 1, s[1], s[2]}));
  return tensor<T, Device>(fluxion::reshape(fluxion::pad(x, {{0, 0}, {left, 0}, {0, 0}}), {s[0], 1, s[1] + left, s[2]}));
}

/// (batch, 1, steps, channels) back to (batch, steps, channels).
template <class T, class Device>
tensor<T, Device> from_rows(const tensor<T, Device>& y) {
  const auto& s = y.shape();
  return tensor<T, Device>(fluxion::reshape(y, {s[0], s[2], s[3]}));
}

/// Throws unless `s` is (batch, steps, channels).
inline void check_sequence_input(const fluxion::shape& s, const char* layer, const std::string& name) {
  if (s.rank() != 3)
    throw shape_error(std::string(layer) + " '" + name + "': expects input of shape (batch, steps, channels), got " +
                      to_string(s));
}

/// The 1-D pools: pool_layer's 2-D pool over (batch, 1, steps, channels).
template <class Derived, bool Max, index_t Pool, index_t Stride, auto Padding>
struct pool1d_layer : stateless_layer<Derived> {
  static_assert(Pool > 0 && Stride > 0, "fluxion::nn::max_pool1d, avg_pool1d: the pool size and stride must be positive.");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(Padding)>, padding>,
                "fluxion::nn::max_pool1d, avg_pool1d: the padding is fluxion::nn::valid or fluxion::nn::same.");
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = Max ? "max_pool1d" : "avg_pool1d";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(check_extents<sizeof...(D) == 2, Max ? fixed_string("max_pool1d") : fixed_string("avg_pool1d"),
                                "input rank", sizeof...(D), "rank", 2>::value,
                  "fluxion::nn::max_pool1d, avg_pool1d: the input must be (steps, channels) per example (rank 2).");
    if constexpr (sizeof...(D) == 2) {
      constexpr std::array<index_t, 2> in{D...};
      static_assert(check_extents<Padding == padding::same || in[0] >= Pool,
                                  Max ? fixed_string("max_pool1d") : fixed_string("avg_pool1d"), "input steps", in[0],
                                  "pool size", Pool>::value,
                    "fluxion::nn::max_pool1d, avg_pool1d: with valid padding the pool window must fit inside the "
                    "input; use a smaller pool, or fluxion::nn::same padding.");
      return static_shape<window_output(in[0], Pool, Stride, 1, Padding), in[1]>{};
    } else {
      return static_shape<1, 1>{};
    }
  }

  explicit pool1d_layer(std::string n) : stateless_layer<Derived>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    const auto in = fluxion::detail::materialize(fluxion::detail::as_expr<X>(std::forward<X>(x)));
    check_sequence_input(in.shape(), base_name, this->m_name);
    return from_rows(pool_forward<Max>(as_rows(in, 0), spatial2d{1, Pool}, spatial2d{1, Stride}, Padding));
  }
};

}  // namespace detail

/// Keras's Conv1D: Filters filters of Kernel steps over (batch, steps, channels) input, with
/// padding valid, same or causal, and a stride or a dilation (not both above 1, as in Keras).
template <index_t Filters, index_t Kernel, auto Padding = padding::valid, index_t Stride = 1, index_t Dilation = 1,
          class T = float, class Device = cpu>
class conv1d
    : public detail::kernel_bias_layer<conv1d<Filters, Kernel, Padding, Stride, Dilation, T, Device>, Filters, T, Device, 2> {
  static_assert(detail::padding_1d_v<Padding>,
                "fluxion::nn::conv1d<Filters, Kernel, Padding>: the padding is fluxion::nn::valid, fluxion::nn::same "
                "or fluxion::nn::causal.");
  static_assert(Filters > 0 && Kernel > 0 && Stride > 0 && Dilation > 0,
                "fluxion::nn::conv1d<Filters, Kernel, Padding, Stride, Dilation>: every size must be positive.");
  static_assert(Stride == 1 || Dilation == 1,
                "fluxion::nn::conv1d: a stride and a dilation both above 1 are not supported (as in Keras).");
  static constexpr index_t span = Dilation * (Kernel - 1) + 1;
  static constexpr index_t causal_left = detail::is_causal_v<Padding> ? span - 1 : 0;

 public:
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "conv1d";
  template <class U, class D = cpu>
  using rebind = conv1d<Filters, Kernel, Padding, Stride, Dilation, U, D>;

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::check_extents<sizeof...(D) == 2, "conv1d", "input rank", sizeof...(D), "rank", 2>::value,
                  "fluxion::nn::conv1d: the input must be (steps, channels) per example (rank 2); reshape it first, "
                  "e.g. with fluxion::nn::reshape<100, 1>.");
    if constexpr (sizeof...(D) == 2) {
      constexpr std::array<index_t, 2> in{D...};
      static_assert(detail::check_extents<!detail::is_valid_padding<Padding>() || in[0] >= span, "conv1d", "input steps",
                                          in[0], "kernel size (dilated)", span>::value,
                    "fluxion::nn::conv1d: with valid padding the kernel must fit inside the input; use "
                    "fluxion::nn::same or fluxion::nn::causal padding, or a smaller kernel.");
      return static_shape<detail::window_output_1d<Padding>(in[0], Kernel, Stride, Dilation), Filters>{};
    } else {
      return static_shape<1, Filters>{};
    }
  }

  /// conv1d(), conv1d("name"), conv1d({.use_bias = false, ...}) (nn::layer_options), and the same
  /// layer for another element type or device.
  using conv1d::kernel_bias_layer::kernel_bias_layer;

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::conv1d: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::conv1d: the input is on another device than the layer's variables; move it with "
                  "fluxion::to<Device>, or declare the layer with that device.");
    const tensor<T, Device> in = fluxion::detail::materialize_asserted<T, Device>(e);
    this->check_input(in.shape());
    if (detail::is_valid_padding<Padding>() && in.shape()[1] < span)
      throw shape_error("conv1d '" + this->m_name + "': the input's " + std::to_string(in.shape()[1]) +
                        " steps are fewer than the kernel's " + std::to_string(span) +
                        " (dilated) with valid padding (input shape " + to_string(in.shape()) + ")");
    const tensor<T, Device> rows = detail::as_rows(in, causal_left);
    using fused = detail::kernel_epilogue<Epilogue>;
    if constexpr (fused::fusable && std::is_same_v<Device, cpu>) {
      if (detail::nothing_records())  // inference: bias and relu in conv2d's store
        return detail::from_rows(detail::conv2d_fused_inference<T, fused>(
            rows, this->m_kernel->peek(), fluxion::shape{1, Kernel, this->m_in, Filters}, this->m_bias->peek(),
            spatial2d{1, Stride}, detail::padding_2d<Padding>(), spatial2d{1, Dilation}));
    }
    const auto kernel = fluxion::reshape(*this->m_kernel, {1, Kernel, this->m_in, Filters});
    const tensor<T, Device> y(epilogue(fluxion::conv2d(rows, kernel, spatial2d{1, Stride}, detail::padding_2d<Padding>(),
                                                       spatial2d{1, Dilation}) +
                                       *this->m_bias));
    return detail::from_rows(y);
  }

  /// The kernel (kernel, in, out), glorot-uniform unless the options say otherwise.
  tensor<T, Device> initial_kernel(random::generator& gen, index_t in) const {
    return this->draw_kernel({Kernel, in, Filters}, gen);
  }
};

/// Keras's MaxPooling1D: the maximum of each window of Pool steps (stride Pool unless given).
template <index_t Pool, index_t Stride = Pool, auto Padding = padding::valid>
struct max_pool1d : detail::pool1d_layer<max_pool1d<Pool, Stride, Padding>, true, Pool, Stride, Padding> {
  explicit max_pool1d(std::string n = {}) : max_pool1d::pool1d_layer(std::move(n)) {}
};
/// Keras's AveragePooling1D: the mean of each window of Pool steps (with same padding, of the
/// steps inside the input).
template <index_t Pool, index_t Stride = Pool, auto Padding = padding::valid>
struct avg_pool1d : detail::pool1d_layer<avg_pool1d<Pool, Stride, Padding>, false, Pool, Stride, Padding> {
  explicit avg_pool1d(std::string n = {}) : avg_pool1d::pool1d_layer(std::move(n)) {}
};

}  // namespace fluxion::nn
