// 2-D convolution, depthwise and separable convolution, transposed convolution and pooling over
// NHWC tensors, as tf.nn.conv2d, tf.nn.depthwise_conv2d, tf.nn.separable_conv2d,
// tf.nn.conv2d_transpose, tf.nn.max_pool2d and tf.nn.avg_pool2d.
//
//   fx::tensor<float> x = fx::random::normal<float>({64, 28, 28, 1}, gen);  // (batch, height, width, channels)
//   fx::tensor<float> w = fx::random::normal<float>({5, 5, 1, 32}, gen);    // (height, width, in, out)
//   auto y = fx::conv2d(x, w, /*strides=*/1, fx::padding::same);           // (64, 28, 28, 32)
//   auto p = fx::max_pool2d(fx::relu(y), /*ksize=*/2, /*strides=*/2);       // (64, 14, 14, 32)
//   fx::tensor<float> u = fx::random::normal<float>({3, 3, 16, 32}, gen);   // (height, width, out, in)
//   auto z = fx::conv2d_transpose(p, u, /*strides=*/2, fx::padding::same);  // (64, 28, 28, 16)
//   fx::tensor<float> d = fx::random::normal<float>({3, 3, 16, 1}, gen);    // (height, width, in, multiplier)
//   auto v = fx::depthwise_conv2d(z, d, 1, fx::padding::same);             // (64, 28, 28, 16)
//
// Each op is a kernel boundary, a window_expr: its operands are materialized and the CPU kernels
// of backend/cpu/conv.hpp, depthwise_conv.hpp and pool.hpp compute it. The ops that make up their gradients (the
// input and filter gradients of conv2d, the routing of max pooling's gradient ...) are
// window_exprs as well, each with vjp and jvp rules (autodiff/conv.hpp), so gradients of these
// gradients work to any order. On fx::cuda the same ops run the kernels of
// backend/cuda/window.hpp.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../backend/cpu/conv.hpp"
#include "../backend/cpu/depthwise_conv.hpp"
#include "../backend/cpu/pool.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"

namespace fluxion {

/// TensorFlow's padding: `valid` uses only windows that lie inside the input; `same` pads with
/// zeros (which pooling ignores) so that the output has ceil(input / stride) positions.
using padding = detail::kernels::padding_mode;

/// A (height, width) pair: strides, dilations and pooling windows. One number sets both.
struct spatial2d {
  index_t height = 1, width = 1;
  constexpr spatial2d() = default;
  constexpr spatial2d(index_t both) : height(both), width(both) {}  // NOLINT: implicit, as TF's ints
  constexpr spatial2d(index_t h, index_t w) : height(h), width(w) {}
};

namespace detail {

using conv2d_geometry = kernels::conv2d_shape;
using pool2d_geometry = kernels::pool2d_shape;
using depthwise2d_geometry = kernels::depthwise2d_shape;

/// The role of each tensor of a window op; shape_of gives its shape in a geometry.
enum class window_role { input, filters, output };

inline fluxion::shape shape_of(window_role r, const conv2d_geometry& s) {
  switch (r) {
    case window_role::input: return {s.batch, s.in_h, s.in_w, s.in_c};
    case window_role::filters: return {s.filter_h, s.filter_w, s.in_c, s.out_c};
    default: return {s.batch, s.out_h, s.out_w, s.out_c};
  }
}
inline fluxion::shape shape_of(window_role r, const depthwise2d_geometry& s) {
  switch (r) {
    case window_role::input: return {s.batch, s.in_h, s.in_w, s.channels};
    case window_role::filters: return {s.filter_h, s.filter_w, s.channels, s.multiplier};
    default: return {s.batch, s.out_h, s.out_w, s.out_c()};
  }
}
inline fluxion::shape shape_of(window_role r, const pool2d_geometry& s) {
  if (r == window_role::input) return {s.batch, s.in_h, s.in_w, s.channels};
  return {s.batch, s.out_h, s.out_w, s.channels};
}

/// y = the value of `h` at the first maximal element of `x` in each window, the element
/// max_pool2d_backward routes the gradient to: the adjoint of that routing in the gradient, which
/// gives max pooling its second derivatives and its jvp.
template <class T>
void max_pool2d_select(const pool2d_geometry& s, const T* x, const T* h, T* y) {
  const index_t c = s.channels, image = s.in_h * s.in_w * c;
  kernels::pool_detail::for_each_output_row(s, [&](index_t n, index_t oh) {
    const T* xn = x + n * image;
    const T* hn = h + n * image;
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      T* out = y + ((n * s.out_h + oh) * s.out_w + ow) * c;
      const auto win = kernels::pool_detail::span_of(s, oh, ow);
      for (index_t ch = 0; ch < c; ++ch) {
        if (win.count() == 0) {
          out[ch] = T(0);
          continue;
        }
        index_t best = (win.h0 * s.in_w + win.w0) * c + ch;
        for (index_t ih = win.h0; ih < win.h1; ++ih)
          for (index_t iw = win.w0; iw < win.w1; ++iw) {
            const index_t at = (ih * s.in_w + iw) * c + ch;
            if (math::beats_max(xn[at], xn[best])) best = at;  // ties keep the earlier, as the kernels do
          }
        out[ch] = hn[best];
      }
    }
  });
}

}  // namespace detail

/// The ops of window_expr, as one table: the op, its geometry, its kernel, the role of its result
/// and the roles of its operands. The kernel is called as kernel(geometry, operands..., result).
#define FLUXION_WINDOW_OP(tag, geometry_type, kernel, result_role, ...)      \
  struct tag {                                                              \
    using enum detail::window_role;                                         \
    static constexpr const char* name = #tag;                               \
    using geometry = detail::geometry_type;                                 \
    static constexpr detail::window_role result = result_role;              \
    static constexpr std::array operands{__VA_ARGS__};                      \
    template <class... P>                                                   \
    static void run(const geometry& s, P*... p) {                           \
      detail::kernel(s, p...);                                              \
    }                                                                       \
  };

namespace window_ops {

FLUXION_WINDOW_OP(conv2d, conv2d_geometry, kernels::conv2d_forward, output, input, filters)
// The input and filter gradients of conv2d: their operand `output` is the output's gradient.
FLUXION_WINDOW_OP(conv2d_input_gradient, conv2d_geometry, kernels::conv2d_backward_input, input, output, filters)
FLUXION_WINDOW_OP(conv2d_filter_gradient, conv2d_geometry, kernels::conv2d_backward_filter, filters, input, output)

FLUXION_WINDOW_OP(depthwise_conv2d, depthwise2d_geometry, kernels::depthwise_conv2d_forward, output, input, filters)
FLUXION_WINDOW_OP(depthwise_conv2d_input_gradient, depthwise2d_geometry, kernels::depthwise_conv2d_backward_input, input,
                  output, filters)
FLUXION_WINDOW_OP(depthwise_conv2d_filter_gradient, depthwise2d_geometry, kernels::depthwise_conv2d_backward_filter,
                  filters, input, output)

FLUXION_WINDOW_OP(max_pool2d, pool2d_geometry, kernels::max_pool2d_forward, output, input)
// (input, output gradient): each window's gradient goes to its first maximal element.
FLUXION_WINDOW_OP(max_pool2d_gradient, pool2d_geometry, kernels::max_pool2d_backward, input, input, output)
// (input, values shaped as the input): each window's value at the input's first maximal element.
FLUXION_WINDOW_OP(max_pool2d_select, pool2d_geometry, max_pool2d_select, output, input, input)

FLUXION_WINDOW_OP(avg_pool2d, pool2d_geometry, kernels::avg_pool2d_forward, output, input)
// (output gradient): each window's gradient shared equally among its elements.
FLUXION_WINDOW_OP(avg_pool2d_gradient, pool2d_geometry, kernels::avg_pool2d_backward, input, output)

}  // namespace window_ops

#undef FLUXION_WINDOW_OP

namespace detail {
template <class>
inline constexpr bool no_window_kernel = false;
/// Op's kernel on a device other than the cpu: run(geometry, operands..., result), specialized by
/// the device's backend (backend/cuda/window.hpp for fx::cuda).
template <class Device, class Op>
struct window_kernel {
  static_assert(no_window_kernel<Device>,
                "fluxion: this device has no kernels for conv2d and pooling; include its header (for "
                "fluxion::cuda, <fluxion/cuda.hpp>)");
};
}  // namespace detail

/// A sliding-window op over NHWC operands: Op (a window_ops tag) with its geometry, computed by
/// Op's CPU kernel once its operands are materialized.
template <class Op, class... A>
struct window_expr : detail::boundary_expr<window_expr<Op, A...>, value_type_t<std::tuple_element_t<0, std::tuple<A...>>>,
                                           device_t<std::tuple_element_t<0, std::tuple<A...>>>> {
  using T = value_type_t<std::tuple_element_t<0, std::tuple<A...>>>;
  using D = device_t<std::tuple_element_t<0, std::tuple<A...>>>;
  using geometry_type = typename Op::geometry;
  std::tuple<A...> operands;
  geometry_type geometry;
  fluxion::shape m_shape;

  explicit window_expr(const geometry_type& g, A... a)
      : operands(std::move(a)...), geometry(g), m_shape(detail::shape_of(Op::result, g)) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (check_operand(I, std::get<I>(operands).shape(), detail::shape_of(std::get<I>(Op::operands), g)), ...);
    }(std::index_sequence_for<A...>{});
  }
  const fluxion::shape& shape() const { return m_shape; }

  tensor<T, D> compute() const {
    tensor<T, D> out(m_shape);
    std::apply(
        [&](const auto&... a) {
          if constexpr (std::is_same_v<D, cpu>) Op::run(geometry, detail::materialize(a).data()..., out.mutable_data());
          else detail::window_kernel<D, Op>::run(geometry, detail::materialize(a).data()..., out.mutable_data());
        },
        operands);
    return out;
  }

 private:
  // The public functions build consistent operands; this guards the kernels' raw pointers.
  static void check_operand(std::size_t i, const fluxion::shape& got, const fluxion::shape& want) {
    if (got != want)
      throw shape_error(std::string(Op::name) + ": operand " + std::to_string(i) + " has shape " + to_string(got) +
                        ", expected " + to_string(want));
  }
};

namespace detail {

template <class T>
inline constexpr bool is_window_scalar_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

inline void require_nhwc(const char* op, const char* operand, const char* layout, const fluxion::shape& s) {
  if (s.rank() != 4)
    throw shape_error(std::string(op) + ": " + operand + " must have rank 4 " + layout + ", got shape " + to_string(s));
}

inline void require_input_nhwc(const char* op, const fluxion::shape& s) {
  require_nhwc(op, "input", "(batch, height, width, channels)", s);
}

// TensorFlow rejects `valid` windows larger than the input instead of giving an empty output.
inline void require_window_fits(const char* op, bool fits, const std::string& window, const fluxion::shape& input) {
  if (!fits)
    throw shape_error(std::string(op) + ": with valid padding the window " + window + " is larger than the input " +
                      to_string(input));
}

inline std::string window_text(index_t h, index_t w) { return std::to_string(h) + "x" + std::to_string(w); }

inline conv2d_geometry conv2d_geometry_of(const fluxion::shape& x, const fluxion::shape& w, spatial2d strides,
                                          padding pad, spatial2d dilations) {
  require_input_nhwc("conv2d", x);
  require_nhwc("conv2d", "filters", "(height, width, in_channels, out_channels)", w);
  if (x[3] != w[2])
    throw shape_error("conv2d: input " + to_string(x) + " has " + std::to_string(x[3]) + " channels but filters " +
                      to_string(w) + " expect " + std::to_string(w[2]));
  if (w[0] < 1 || w[1] < 1) throw shape_error("conv2d: filters " + to_string(w) + " have an empty window");
  const conv2d_geometry s = kernels::conv2d_tf_shape(x[0], x[1], x[2], x[3], w[0], w[1], w[3], pad, strides.height,
                                                     strides.width, dilations.height, dilations.width);
  const index_t span_h = (w[0] - 1) * dilations.height + 1, span_w = (w[1] - 1) * dilations.width + 1;
  require_window_fits("conv2d", pad == padding::same || (x[1] >= span_h && x[2] >= span_w),
                      window_text(span_h, span_w) + " of filters " + to_string(w) + " at dilation " +
                          window_text(dilations.height, dilations.width),
                      x);
  return s;
}

inline depthwise2d_geometry depthwise2d_geometry_of(const fluxion::shape& x, const fluxion::shape& w,
                                                    spatial2d strides, padding pad, spatial2d dilations) {
  require_input_nhwc("depthwise_conv2d", x);
  require_nhwc("depthwise_conv2d", "filters", "(height, width, in_channels, channel_multiplier)", w);
  if (x[3] != w[2])
    throw shape_error("depthwise_conv2d: input " + to_string(x) + " has " + std::to_string(x[3]) +
                      " channels but filters " + to_string(w) + " expect " + std::to_string(w[2]) +
                      " (their third axis; a depthwise filter is (height, width, in_channels, channel_multiplier))");
  if (w[0] < 1 || w[1] < 1 || w[3] < 1)
    throw shape_error("depthwise_conv2d: filters " + to_string(w) +
                      (w[3] < 1 ? " have a channel multiplier of 0" : " have an empty window"));
  const depthwise2d_geometry s = kernels::depthwise2d_tf_shape(x[0], x[1], x[2], x[3], w[0], w[1], w[3], pad,
                                                               strides.height, strides.width, dilations.height,
                                                               dilations.width);
  const index_t span_h = (w[0] - 1) * dilations.height + 1, span_w = (w[1] - 1) * dilations.width + 1;
  require_window_fits("depthwise_conv2d", pad == padding::same || (x[1] >= span_h && x[2] >= span_w),
                      window_text(span_h, span_w) + " of filters " + to_string(w) + " at dilation " +
                          window_text(dilations.height, dilations.width),
                      x);
  return s;
}

inline pool2d_geometry pool2d_geometry_of(const char* op, const fluxion::shape& x, spatial2d ksize, spatial2d strides,
                                          padding pad) {
  require_input_nhwc(op, x);
  const kernels::window_extent h = kernels::tf_window(op, x[1], ksize.height, strides.height, 1, pad);
  const kernels::window_extent w = kernels::tf_window(op, x[2], ksize.width, strides.width, 1, pad);
  require_window_fits(op, pad == padding::same || (x[1] >= ksize.height && x[2] >= ksize.width),
                      window_text(ksize.height, ksize.width), x);
  return {x[0],           x[1],          x[2],         x[3],         ksize.height, ksize.width,
          strides.height, strides.width, h.pad_before, w.pad_before, h.out,        w.out};
}

template <class Op, class X>
auto pool2d(X&& input, spatial2d ksize, spatial2d strides, padding pad) {
  using EX = expr_t<X>;
  static_assert(is_window_scalar_v<value_type_t<EX>>,
                "fluxion::max_pool2d, avg_pool2d: the element type must be float or double; convert with "
                "fluxion::cast<float>.");
  EX x = as_expr<X>(std::forward<X>(input));
  const pool2d_geometry s = pool2d_geometry_of(Op::name, x.shape(), ksize, strides, pad);
  return window_expr<Op, EX>(s, std::move(x));
}

template <class X>
concept window_operand = is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>;

/// Keras's deconv_output_length without output_padding: the extent a transposed convolution makes
/// from `in` positions (valid: in * stride + max(span - stride, 0); same: in * stride).
constexpr index_t transposed_output(index_t in, index_t kernel, index_t stride, index_t dilation, padding pad) {
  const index_t span = dilation * (kernel - 1) + 1;
  if (pad == padding::same) return in * stride;
  return in * stride + (span > stride ? span - stride : 0);
}

/// The geometry of the conv2d whose input gradient conv2d_transpose computes: from the output
/// (batch, out_h, out_w, filters[2]) to x (batch, height, width, filters[3]). x and w have rank 4
/// (conv2d_transpose_of checks it first).
inline conv2d_geometry conv2d_transpose_geometry_of(const fluxion::shape& x, const fluxion::shape& w, index_t out_h,
                                                    index_t out_w, spatial2d strides, padding pad, spatial2d dilations) {
  if (x[3] != w[3])
    throw shape_error("conv2d_transpose: input " + to_string(x) + " has " + std::to_string(x[3]) +
                      " channels but filters " + to_string(w) + " expect " + std::to_string(w[3]) +
                      " (their last axis; a transposed convolution's filters are (height, width, out, in))");
  if (w[0] < 1 || w[1] < 1) throw shape_error("conv2d_transpose: filters " + to_string(w) + " have an empty window");
  if (strides.height < 1 || strides.width < 1 || dilations.height < 1 || dilations.width < 1)
    throw invalid_argument("conv2d_transpose: strides " + window_text(strides.height, strides.width) +
                           " and dilations " + window_text(dilations.height, dilations.width) + " must be positive");
  const conv2d_geometry s = kernels::conv2d_tf_shape(x[0], out_h, out_w, w[2], w[0], w[1], w[3], pad, strides.height,
                                                     strides.width, dilations.height, dilations.width);
  if (out_h < 1 || out_w < 1 || s.out_h != x[1] || s.out_w != x[2])
    throw shape_error("conv2d_transpose: an output of " + window_text(out_h, out_w) + " cannot come from input " +
                      to_string(x) + ": conv2d with filters " + to_string(w) + ", strides " +
                      window_text(strides.height, strides.width) + " and " +
                      (pad == padding::same ? "same" : "valid") + " padding maps it to " +
                      window_text(out_h < 1 || out_w < 1 ? 0 : s.out_h, out_h < 1 || out_w < 1 ? 0 : s.out_w) +
                      ", not " + window_text(x[1], x[2]));
  return s;
}

template <class X, class W>
auto conv2d_transpose_of(X&& input, W&& filters, const fluxion::shape* output_shape, spatial2d strides, padding pad,
                         spatial2d dilations) {
  using EX = expr_t<X>;
  using EW = expr_t<W>;
  static_assert(std::is_same_v<value_type_t<EX>, value_type_t<EW>>,
                "fluxion::conv2d_transpose: the input and the filters have different element types; convert one "
                "with fluxion::cast<T>.");
  static_assert(is_window_scalar_v<value_type_t<EX>>,
                "fluxion::conv2d_transpose: the element type must be float or double; convert with "
                "fluxion::cast<float>.");
  static_assert(std::is_same_v<device_t<EX>, device_t<EW>>,
                "fluxion::conv2d_transpose: the input and the filters are on different devices; move one with "
                "fluxion::to<Device>.");
  EX x = as_expr<X>(std::forward<X>(input));
  EW w = as_expr<W>(std::forward<W>(filters));
  const fluxion::shape& xs = x.shape();
  const fluxion::shape& ws = w.shape();
  require_input_nhwc("conv2d_transpose", xs);
  require_nhwc("conv2d_transpose", "filters", "(height, width, out_channels, in_channels)", ws);
  index_t out_h = 0, out_w = 0;
  if (output_shape) {
    const fluxion::shape& o = *output_shape;
    if (o.rank() != 4 || o[0] != xs[0] || o[3] != ws[2])
      throw shape_error("conv2d_transpose: output_shape " + to_string(o) + " must be (batch " +
                        std::to_string(xs[0]) + ", height, width, out_channels " + std::to_string(ws[2]) + ")");
    out_h = o[1];
    out_w = o[2];
  } else {
    out_h = transposed_output(xs[1], ws[0], strides.height, dilations.height, pad);
    out_w = transposed_output(xs[2], ws[1], strides.width, dilations.width, pad);
  }
  const conv2d_geometry s = conv2d_transpose_geometry_of(xs, ws, out_h, out_w, strides, pad, dilations);
  return window_expr<window_ops::conv2d_input_gradient, EX, EW>(s, std::move(x), std::move(w));
}

}  // namespace detail

/// tf.nn.conv2d: input (batch, height, width, in_channels), filters (height, width, in_channels,
/// out_channels) -> (batch, out_height, out_width, out_channels).
template <detail::window_operand X, detail::window_operand W>
auto conv2d(X&& input, W&& filters, spatial2d strides = 1, padding pad = padding::valid, spatial2d dilations = 1) {
  using EX = detail::expr_t<X>;
  using EW = detail::expr_t<W>;
  static_assert(std::is_same_v<value_type_t<EX>, value_type_t<EW>>,
                "fluxion::conv2d: the input and the filters have different element types; convert one with "
                "fluxion::cast<T>.");
  static_assert(detail::is_window_scalar_v<value_type_t<EX>>,
                "fluxion::conv2d: the element type must be float or double; convert with fluxion::cast<float>.");
  static_assert(std::is_same_v<device_t<EX>, device_t<EW>>,
                "fluxion::conv2d: the input and the filters are on different devices; move one with "
                "fluxion::to<Device>.");
  EX x = detail::as_expr<X>(std::forward<X>(input));
  EW w = detail::as_expr<W>(std::forward<W>(filters));
  const auto s = detail::conv2d_geometry_of(x.shape(), w.shape(), strides, pad, dilations);
  return window_expr<window_ops::conv2d, EX, EW>(s, std::move(x), std::move(w));
}

/// tf.nn.depthwise_conv2d (Keras's DepthwiseConv2D, PyTorch's conv2d with groups = in_channels):
/// input (batch, height, width, in_channels), filters (height, width, in_channels,
/// channel_multiplier) -> (batch, out_height, out_width, in_channels * channel_multiplier). Each
/// input channel is convolved with its own filters: output channel c * multiplier + j is channel c
/// under filters[:, :, c, j]. Strides and dilations may both exceed 1, as PyTorch's (TensorFlow
/// requires strides of 1 with a dilation). Its gradients are again window ops, to any order.
template <detail::window_operand X, detail::window_operand W>
auto depthwise_conv2d(X&& input, W&& filters, spatial2d strides = 1, padding pad = padding::valid,
                      spatial2d dilations = 1) {
  using EX = detail::expr_t<X>;
  using EW = detail::expr_t<W>;
  static_assert(std::is_same_v<value_type_t<EX>, value_type_t<EW>>,
                "fluxion::depthwise_conv2d: the input and the filters have different element types; convert one "
                "with fluxion::cast<T>.");
  static_assert(detail::is_window_scalar_v<value_type_t<EX>>,
                "fluxion::depthwise_conv2d: the element type must be float or double; convert with "
                "fluxion::cast<float>.");
  static_assert(std::is_same_v<device_t<EX>, device_t<EW>>,
                "fluxion::depthwise_conv2d: the input and the filters are on different devices; move one with "
                "fluxion::to<Device>.");
  EX x = detail::as_expr<X>(std::forward<X>(input));
  EW w = detail::as_expr<W>(std::forward<W>(filters));
  const auto s = detail::depthwise2d_geometry_of(x.shape(), w.shape(), strides, pad, dilations);
  return window_expr<window_ops::depthwise_conv2d, EX, EW>(s, std::move(x), std::move(w));
}

/// tf.nn.separable_conv2d: a depthwise convolution, then a 1x1 convolution that mixes its
/// channels. depthwise_filters (height, width, in_channels, channel_multiplier), pointwise_filters
/// (1, 1, in_channels * channel_multiplier, out_channels) -> (batch, out_height, out_width,
/// out_channels). The strides, padding and dilations are the depthwise step's.
template <detail::window_operand X, detail::window_operand W, detail::window_operand P>
auto separable_conv2d(X&& input, W&& depthwise_filters, P&& pointwise_filters, spatial2d strides = 1,
                      padding pad = padding::valid, spatial2d dilations = 1) {
  auto d = depthwise_conv2d(std::forward<X>(input), std::forward<W>(depthwise_filters), strides, pad, dilations);
  auto p = detail::as_expr<P>(std::forward<P>(pointwise_filters));
  const fluxion::shape& ps = p.shape();
  if (ps.rank() != 4 || ps[0] != 1 || ps[1] != 1 || ps[2] != d.shape()[3])
    throw shape_error("separable_conv2d: pointwise filters " + to_string(ps) + " must be (1, 1, " +
                      std::to_string(d.shape()[3]) + ", out_channels): the depthwise step makes " +
                      std::to_string(d.shape()[3]) + " channels (in_channels * channel_multiplier)");
  return conv2d(std::move(d), std::move(p));
}

/// The transposed convolution (tf.nn.conv2d_transpose, Keras's Conv2DTranspose, sometimes called
/// deconvolution): input (batch, height, width, in_channels), filters (height, width,
/// out_channels, in_channels) -> (batch, out_height, out_width, out_channels), the gradient of
/// conv2d with respect to its input. Without output_shape the output extent is Keras's: with valid
/// padding height * stride + max(dilated kernel - stride, 0), with same padding height * stride.
/// With output_shape (batch, out_height, out_width, out_channels), as TensorFlow's, any extent that
/// conv2d with the same filters, strides and padding maps back to the input's. Its gradients are
/// conv2d (input) and conv2d's filter gradient (filters), each again differentiable.
template <detail::window_operand X, detail::window_operand W>
auto conv2d_transpose(X&& input, W&& filters, spatial2d strides = 1, padding pad = padding::valid,
                      spatial2d dilations = 1) {
  return detail::conv2d_transpose_of(std::forward<X>(input), std::forward<W>(filters), nullptr, strides, pad, dilations);
}
template <detail::window_operand X, detail::window_operand W>
auto conv2d_transpose(X&& input, W&& filters, const fluxion::shape& output_shape, spatial2d strides = 1,
                      padding pad = padding::valid, spatial2d dilations = 1) {
  return detail::conv2d_transpose_of(std::forward<X>(input), std::forward<W>(filters), &output_shape, strides, pad,
                                     dilations);
}

/// tf.nn.max_pool2d over NHWC input: the maximum of each window's elements inside the input
/// (`same` padding never wins).
template <detail::window_operand X>
auto max_pool2d(X&& input, spatial2d ksize, spatial2d strides, padding pad = padding::valid) {
  return detail::pool2d<window_ops::max_pool2d>(std::forward<X>(input), ksize, strides, pad);
}

/// tf.nn.avg_pool2d over NHWC input: the mean of each window's elements inside the input (`same`
/// windows at the border divide by the number of elements they cover).
template <detail::window_operand X>
auto avg_pool2d(X&& input, spatial2d ksize, spatial2d strides, padding pad = padding::valid) {
  return detail::pool2d<window_ops::avg_pool2d>(std::forward<X>(input), ksize, strides, pad);
}

}  // namespace fluxion

// The vjp and jvp rules of every window op; included here so that no program can use the ops
// without their rules (which would silently give no gradient).
#include "../autodiff/conv.hpp"
