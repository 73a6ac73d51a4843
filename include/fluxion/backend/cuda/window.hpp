// The window ops of expr/conv.hpp on fx::cuda: conv2d, its input and filter gradients, max and
// average pooling, their gradients and max pooling's select, as Thrust kernels.
//
//   fx::tensor<float, fx::cuda> y = fx::conv2d(x, w, 1, fx::padding::same);   // one thread per output
//   auto p = fx::max_pool2d(fx::relu(y), 2, 2);
//
// Every kernel gathers: one thread computes one element of the result from the elements that
// reach it, so nothing is added with atomics, and results are the same on every run. The filter
// gradient, a sum over every output position of the batch, is a segmented reduction in fixed parts
// (cuda_kernel::segmented_reduce), one segment per filter element. Pooling follows the cpu
// kernels' conventions exactly (backend/cpu/pool.hpp): the first maximal element of a window in
// scan order takes its gradient, padding never takes part, and a gradient from overlapping windows
// is added in the order of the outputs, starting from zero; average pooling multiplies by the
// reciprocal of the window's count, as the cpu does. The functors are FLUXION_HOST_DEVICE, so the
// same code runs as CUDA kernels under nvcc and as OpenMP loops on Thrust's OMP system, where the
// tests compare it with the cpu kernels. These are plain direct kernels: cuDNN is not used.
#pragma once

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/config.hpp"
#include "../../expr/conv.hpp"
#include "evaluator.hpp"

namespace fluxion::detail {

namespace cuda_window {

using conv_geometry = kernels::conv2d_shape;
using pool_geometry = kernels::pool2d_shape;

/// (n, h, w, c) of flat index i in an (N, H, W, C) tensor.
struct nhwc {
  index_t n, h, w, c;
};
FLUXION_HOST_DEVICE nhwc unravel(index_t i, index_t height, index_t width, index_t channels) {
  nhwc p;
  p.c = i % channels;
  i /= channels;
  p.w = i % width;
  i /= width;
  p.h = i % height;
  p.n = i / height;
  return p;
}

/// The valid part [h0, h1) x [w0, w1) of pooling window (oh, ow), as pool_detail::span_of.
struct span {
  index_t h0, h1, w0, w1;
  FLUXION_HOST_DEVICE index_t count() const {
    return (h1 > h0 ? h1 - h0 : 0) * (w1 > w0 ? w1 - w0 : 0);
  }
};
FLUXION_HOST_DEVICE span span_of(const pool_geometry& s, index_t oh, index_t ow) {
  const index_t h = oh * s.stride_h - s.pad_top, w = ow * s.stride_w - s.pad_left;
  return {h > 0 ? h : 0, h + s.window_h < s.in_h ? h + s.window_h : s.in_h, w > 0 ? w : 0,
          w + s.window_w < s.in_w ? w + s.window_w : s.in_w};
}

/// The outputs whose windows (size `window`, `stride`, `pad` before) contain input position `in`:
/// [first, last], empty when first > last.
FLUXION_HOST_DEVICE void outputs_covering(index_t in, index_t window, index_t stride, index_t pad, index_t out,
                                                 index_t& first, index_t& last) {
  const index_t t = in + pad;  // the input position in padded coordinates
  const index_t lo = t - window + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  last = t / stride;
  if (last > out - 1) last = out - 1;
}

/// y(n, oh, ow, co) = sum over the window's taps inside the input of x(n, ih, iw, ci) w(kh, kw, ci, co).
template <class T>
struct conv_forward {
  conv_geometry s;
  const T* x;
  const T* w;
  T* y;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(i, s.out_h, s.out_w, s.out_c);
    T acc = T(0);
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t ih = o.h * s.stride_h - s.pad_top + kh * s.dilation_h;
      if (ih < 0 || ih >= s.in_h) continue;
      for (index_t kw = 0; kw < s.filter_w; ++kw) {
        const index_t iw = o.w * s.stride_w - s.pad_left + kw * s.dilation_w;
        if (iw < 0 || iw >= s.in_w) continue;
        const T* xp = x + ((o.n * s.in_h + ih) * s.in_w + iw) * s.in_c;
        const T* wp = w + (kh * s.filter_w + kw) * s.in_c * s.out_c + o.c;
        for (index_t ci = 0; ci < s.in_c; ++ci) acc += xp[ci] * wp[ci * s.out_c];
      }
    }
    y[i] = acc;
  }
};

/// dx(n, ih, iw, ci) = sum over the taps (kh, kw) that put (ih, iw) in output (oh, ow)'s window,
/// and over co, of dy(n, oh, ow, co) w(kh, kw, ci, co).
template <class T>
struct conv_input_gradient {
  conv_geometry s;
  const T* dy;
  const T* w;
  T* dx;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc p = unravel(i, s.in_h, s.in_w, s.in_c);
    T acc = T(0);
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t th = p.h + s.pad_top - kh * s.dilation_h;
      if (th < 0 || th % s.stride_h != 0 || th / s.stride_h >= s.out_h) continue;
      const index_t oh = th / s.stride_h;
      for (index_t kw = 0; kw < s.filter_w; ++kw) {
        const index_t tw = p.w + s.pad_left - kw * s.dilation_w;
        if (tw < 0 || tw % s.stride_w != 0 || tw / s.stride_w >= s.out_w) continue;
        const index_t ow = tw / s.stride_w;
        const T* gp = dy + ((p.n * s.out_h + oh) * s.out_w + ow) * s.out_c;
        const T* wp = w + ((kh * s.filter_w + kw) * s.in_c + p.c) * s.out_c;
        for (index_t co = 0; co < s.out_c; ++co) acc += gp[co] * wp[co];
      }
    }
    dx[i] = acc;
  }
};

/// Term j of filter element k's sum: x(n, ih, iw, ci) dy(n, oh, ow, co) for output position j =
/// (n, oh, ow) and k = (kh, kw, ci, co), or zero where the tap falls in the padding.
template <class T>
struct conv_filter_term {
  conv_geometry s;
  const T* x;
  const T* dy;
  FLUXION_HOST_DEVICE T operator()(index_t k, index_t j) const {
    const index_t co = k % s.out_c, ci = k / s.out_c % s.in_c, tap = k / (s.out_c * s.in_c);
    const index_t kh = tap / s.filter_w, kw = tap % s.filter_w;
    const index_t ow = j % s.out_w, oh = j / s.out_w % s.out_h, n = j / (s.out_w * s.out_h);
    const index_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
    const index_t iw = ow * s.stride_w - s.pad_left + kw * s.dilation_w;
    if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) return T(0);
    return x[((n * s.in_h + ih) * s.in_w + iw) * s.in_c + ci] * dy[j * s.out_c + co];
  }
};

template <class T>
struct plus {
  FLUXION_HOST_DEVICE T operator()(T a, T b) const { return a + b; }
};
template <class T>
struct same {
  FLUXION_HOST_DEVICE T operator()(T a) const { return a; }
};

/// Flat index, in image n's (H, W, C) block, of the first maximal element of window (oh, ow) in
/// channel c (scan order, `>`: the cpu kernels' rule), or -1 for a window with no valid element.
template <class T>
FLUXION_HOST_DEVICE index_t window_argmax(const pool_geometry& s, const T* image, index_t oh, index_t ow, index_t c) {
  const span win = span_of(s, oh, ow);
  if (win.count() == 0) return -1;
  index_t best = (win.h0 * s.in_w + win.w0) * s.channels + c;
  for (index_t ih = win.h0; ih < win.h1; ++ih)
    for (index_t iw = win.w0; iw < win.w1; ++iw) {
      const index_t at = (ih * s.in_w + iw) * s.channels + c;
      if (image[at] > image[best]) best = at;
    }
  return best;
}

/// y(n, oh, ow, c): the window's maximum (Max) or mean; 0 for a window with no valid element.
template <class T, bool Max>
struct pool_forward {
  pool_geometry s;
  const T* x;
  T* y;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(i, s.out_h, s.out_w, s.channels);
    const T* image = x + o.n * s.in_h * s.in_w * s.channels;
    if constexpr (Max) {
      const index_t at = window_argmax(s, image, o.h, o.w, o.c);
      y[i] = at < 0 ? T(0) : image[at];
    } else {
      const span win = span_of(s, o.h, o.w);
      if (win.count() == 0) {
        y[i] = T(0);
        return;
      }
      T sum = T(0);
      for (index_t ih = win.h0; ih < win.h1; ++ih)
        for (index_t iw = win.w0; iw < win.w1; ++iw) sum += image[(ih * s.in_w + iw) * s.channels + o.c];
      y[i] = sum * (T(1) / static_cast<T>(win.count()));
    }
  }
};

/// dx(n, ih, iw, c) = the sum, in output order, of the gradients of the windows that contain
/// (ih, iw): those whose first maximum it is (Max), or each window's share (average).
template <class T, bool Max>
struct pool_gradient {
  pool_geometry s;
  const T* x;  // the pooled input (Max only)
  const T* dy;
  T* dx;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc p = unravel(i, s.in_h, s.in_w, s.channels);
    index_t oh0, oh1, ow0, ow1;
    outputs_covering(p.h, s.window_h, s.stride_h, s.pad_top, s.out_h, oh0, oh1);
    outputs_covering(p.w, s.window_w, s.stride_w, s.pad_left, s.out_w, ow0, ow1);
    const index_t image = p.n * s.in_h * s.in_w * s.channels, self = (p.h * s.in_w + p.w) * s.channels + p.c;
    T acc = T(0);
    for (index_t oh = oh0; oh <= oh1; ++oh)
      for (index_t ow = ow0; ow <= ow1; ++ow) {
        const T g = dy[((p.n * s.out_h + oh) * s.out_w + ow) * s.channels + p.c];
        if constexpr (Max) {
          if (window_argmax(s, x + image, oh, ow, p.c) == self) acc += g;
        } else {
          acc += g * (T(1) / static_cast<T>(span_of(s, oh, ow).count()));
        }
      }
    dx[i] = acc;
  }
};

/// y(n, oh, ow, c) = h at the first maximum of x in the window (max pooling's jvp and the
/// adjoint of its gradient).
template <class T>
struct pool_select {
  pool_geometry s;
  const T* x;
  const T* h;
  T* y;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(i, s.out_h, s.out_w, s.channels);
    const index_t image = o.n * s.in_h * s.in_w * s.channels;
    const index_t at = window_argmax(s, x + image, o.h, o.w, o.c);
    y[i] = at < 0 ? T(0) : h[image + at];
  }
};

template <class F>
void for_each_index(index_t n, const F& f) {
  if (n > 0) thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), n, f);
}

}  // namespace cuda_window

// The table of window_ops (expr/conv.hpp) on the cuda device, called as the cpu kernels are:
// run(geometry, operands..., result).
template <>
struct window_kernel<cuda, window_ops::conv2d> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* x, const T* w, T* y) {
    cuda_window::for_each_index(s.output_size(), cuda_window::conv_forward<T>{s, x, w, y});
  }
};
template <>
struct window_kernel<cuda, window_ops::conv2d_input_gradient> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* dy, const T* w, T* dx) {
    cuda_window::for_each_index(s.input_size(), cuda_window::conv_input_gradient<T>{s, dy, w, dx});
  }
};
template <>
struct window_kernel<cuda, window_ops::conv2d_filter_gradient> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* x, const T* dy, T* dw) {
    const index_t n_out = s.filter_size(), n_red = s.batch * s.out_h * s.out_w;
    if (n_out == 0) return;
    if (n_red == 0) {
      thrust::fill_n(kernel_policy(), dw, n_out, T(0));
      return;
    }
    cuda_kernel::segmented_reduce(dw, n_out, n_red, cuda_window::conv_filter_term<T>{s, x, dy}, T(0),
                                  cuda_window::plus<T>{}, cuda_window::same<T>{});
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, T* y) {
    cuda_window::for_each_index(s.output_size(), cuda_window::pool_forward<T, true>{s, x, y});
  }
};
template <>
struct window_kernel<cuda, window_ops::avg_pool2d> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, T* y) {
    cuda_window::for_each_index(s.output_size(), cuda_window::pool_forward<T, false>{s, x, y});
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d_gradient> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, const T* dy, T* dx) {
    cuda_window::for_each_index(s.input_size(), cuda_window::pool_gradient<T, true>{s, x, dy, dx});
  }
};
template <>
struct window_kernel<cuda, window_ops::avg_pool2d_gradient> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* dy, T* dx) {
    cuda_window::for_each_index(s.input_size(), cuda_window::pool_gradient<T, false>{s, nullptr, dy, dx});
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d_select> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, const T* h, T* y) {
    cuda_window::for_each_index(s.output_size(), cuda_window::pool_select<T>{s, x, h, y});
  }
};

}  // namespace fluxion::detail
