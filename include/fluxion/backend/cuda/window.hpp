// The window ops of expr/conv.hpp on fx::cuda: conv2d, its input and filter gradients, depthwise
// conv2d and its two gradients, max and average pooling, their gradients and max pooling's select.
//
//   fx::tensor<float, fx::cuda> y = fx::conv2d(x, w, 1, fx::padding::same);   // im2col, then cuBLAS
//   auto p = fx::max_pool2d(fx::relu(y), 2, 2);                              // one thread per output
//   auto d = fx::depthwise_conv2d(p, dw, 1, fx::padding::same);              // one thread per output
//
// The convolution and both of its gradients are matrix products over the im2col matrix (one row
// per output position (n, oh, ow), one column per filter tap and input channel (kh, kw, ci)):
//   y  = col w           w read as a (K x out_c) matrix: fluxion's HWIO filter needs no transpose
//   dx = col2im(dy w^T)  a gather: each input element adds the entries of its own taps
//   dw = col^T dy
// The products go to the device's matmul (cuBLAS under nvcc, so TF32 only after fx::allow_tf32;
// the plain kernel on Thrust's OpenMP system). The im2col matrix is built in chunks of whole images
// of at most im2col_budget_bytes() (256 MB); a filter gradient over several chunks adds them in
// order. A 1x1 filter at stride 1 without padding uses the input itself. Nothing is added with
// atomics, so results are the same on every run. In programs built with cuDNN (FLUXION_USE_CUDNN,
// backend/cuda/cudnn.hpp), each pass of a float geometry is timed on its first call through cuDNN's
// fastest deterministic algorithm in NHWC and in NCHW and through im2col, and keeps the fastest;
// im2col serves what cuDNN does not take, and everything when fx::allow_cudnn(false).
//
// A depthwise convolution reads one input channel per output channel, so it has no product over
// channels for a matmul to do: its kernels are direct loops that follow the cpu kernels
// (backend/cpu/depthwise_conv.hpp) term for term. The forward pass is one thread per output element
// and the input gradient one thread per input element (a gather over the taps that reach it, then
// over the multiplier), each summing the taps in (kh, kw) order. The filter gradient cuts the output
// rows into the cpu's chunks (a count that depends only on the shape): one thread per chunk and
// filter element sums the chunk's pixels in order, then one thread per filter element adds the
// chunks in order. Every product is added with one rounding (fma), as the cpu does, so the results
// are the cpu's bit for bit wherever the cpu's vector fma is fused (x86 with FMA3, AArch64).
//
// Pooling is one thread per result element and follows the cpu kernels' conventions exactly
// (backend/cpu/pool.hpp): the first maximal element of a window in scan order takes its gradient,
// padding never takes part, and a gradient from overlapping windows is added in the order of the
// outputs, starting from zero; average pooling multiplies by the reciprocal of the window's count,
// as the cpu does. The functors are FLUXION_HOST_DEVICE, so the same code runs as CUDA kernels
// under nvcc and as OpenMP loops on Thrust's OMP system, where the tests compare it with the cpu
// kernels.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/config.hpp"
#include "../../expr/conv.hpp"
#include "cudnn.hpp"
#include "evaluator.hpp"

namespace fluxion::detail {

namespace cuda_window {

using conv_geometry = kernels::conv2d_shape;
using pool_geometry = kernels::pool2d_shape;
using depthwise_geometry = kernels::depthwise2d_shape;

/// These kernels divide several times per element to find its coordinates, and a division is
/// the costly part: a 64-bit one is a subroutine of about a hundred instructions on a GPU, a 32-bit
/// one a few dozen, and a division by a divisor fixed for the launch (`divider`) three. On an H200
/// the CNN's second convolution (batch 256) took 5.5 times cuDNN's forward pass with 64-bit
/// divisions, 4.0 times with 32-bit ones and 3.8 times with dividers; the rest of the gap is the
/// products themselves and the 64-bit address arithmetic (docs/benchmarks.md, GPU section). So coordinates are
/// found with dividers over unsigned 32-bit indices
/// below 2^31: every launch covers whole images, as many as keep its thread indices within
/// launch_limit() (for_image_groups), with pointers offset to its first image on the host.
/// Addresses are still computed in index_t.
using cuda_kernel::u32;
using cuda_kernel::divider;

/// The most threads one window launch indexes (2^31 - 1, the dividers' range). Process-wide; the
/// tests lower it to make every launch cover one image.
inline index_t& launch_limit() noexcept {
  static index_t limit = index_t(0x7FFFFFFF);
  return limit;
}

/// f(i) for i in [0, n), one thread each.
template <class F>
void for_each_index(index_t n, const F& f) {
  if (n > 0) thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), n, f);
}

/// (n, h, w, c) of flat index i in an (N, H, W, C) block, with dividers for H, W and C.
struct nhwc {
  index_t n, h, w, c;
};
struct nhwc_dividers {
  divider h, w, c;
  nhwc_dividers() = default;
  nhwc_dividers(index_t height, index_t width, index_t channels) : h(height), w(width), c(channels) {}
};
FLUXION_HOST_DEVICE nhwc unravel(u32 i, const nhwc_dividers& d) {
  const u32 a = d.c.div(i), b = d.w.div(a), n = d.h.div(b);
  return {index_t(n), index_t(b - n * d.h.d), index_t(a - b * d.w.d), index_t(i - a * d.c.d)};
}

/// Images per launch: at most `images`, and few enough that count * per_image <= launch_limit().
inline index_t images_per_launch(const char* op, index_t images, index_t per_image) {
  const index_t limit = launch_limit();
  if (per_image > limit)
    throw invalid_argument(std::string(op) + " on cuda: one image needs " + std::to_string(per_image) +
                           " threads, more than one launch indexes (" + std::to_string(limit) + ")");
  const index_t fit = per_image > 0 ? limit / per_image : images;
  return fit < images ? fit : images;
}

/// f(n0, count) for consecutive groups of whole images, each one launch of count * per_image threads.
template <class F>
void for_image_groups(const char* op, index_t images, index_t per_image, const F& f) {
  const index_t group = images_per_launch(op, images, per_image);
  for (index_t n0 = 0; n0 < images; n0 += group) f(n0, n0 + group < images ? group : images - n0);
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
  const index_t t = in + pad;  // the input position in padded coordinates, >= 0
  const index_t lo = t - window + 1;
  first = lo <= 0 ? 0 : index_t((u32(lo) + u32(stride) - 1) / u32(stride));
  last = index_t(u32(t) / u32(stride));
  if (last > out - 1) last = out - 1;
}

/// V consecutive elements of T moved as one load or store. im2col and col2im move 16 bytes at a
/// time (float x 4, double x 2) where the input channels are a multiple of V and the buffers are
/// aligned to 16 bytes (lane_width); one element otherwise. On the device a lane is one 128-bit
/// load or store, so a thread finds its coordinates once per V elements, and a warp's loads and
/// stores are 512 contiguous bytes instead of 128.
template <class T, int V>
struct alignas(sizeof(T) * V) lanes {
  T v[V];
};
template <class T, int V>
FLUXION_HOST_DEVICE lanes<T, V> load_lanes(const T* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const lanes<T, V>*>(p);
#else
  lanes<T, V> l;
  for (int j = 0; j < V; ++j) l.v[j] = p[j];
  return l;
#endif
}
template <class T, int V>
FLUXION_HOST_DEVICE void store_lanes(T* p, const lanes<T, V>& l) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<lanes<T, V>*>(p) = l;
#else
  for (int j = 0; j < V; ++j) p[j] = l.v[j];
#endif
}

/// Whether im2col and col2im may move 16-byte lanes. Process-wide; the tests turn it off to
/// compare the two paths bit for bit.
inline bool& wide_lanes() noexcept {
  static bool allowed = true;
  return allowed;
}

/// The elements per lane for a convolution of `channels` input channels over these buffers:
/// 16 / sizeof(T) where that divides the channels and every pointer is 16-byte aligned, else 1.
template <class T>
constexpr int max_lanes = sizeof(T) < 16 && 16 % sizeof(T) == 0 ? int(16 / sizeof(T)) : 1;
template <class T>
int lane_width(index_t channels, const T* a, const T* b) {
  constexpr int v = max_lanes<T>;
  const auto aligned = [](const T* p) { return reinterpret_cast<std::uintptr_t>(p) % (sizeof(T) * v) == 0; };
  return wide_lanes() && channels % v == 0 && aligned(a) && aligned(b) ? v : 1;
}

/// The im2col matrix of the images at x: row (n, oh, ow), column (kh, kw, ci) holds x(n, ih, iw, ci)
/// at that tap, or zero where the tap falls in the padding (P x K, row-major, with K = filter_h
/// filter_w in_c). Times the filter, read as a (K x out_c) matrix, it gives the output rows in NHWC
/// order, so the convolution and both of its gradients are matrix products. One thread per V
/// channels of a tap (V divides in_c): index idx is lane idx of the matrix.
template <class T, int V = 1>
struct im2col {
  conv_geometry s;
  const T* x;
  T* col;
  divider k_size, in_c, filter_w;  // k_size and in_c in lanes
  nhwc_dividers rows;  // (n, oh, ow) of a row: channels 1
  im2col(const conv_geometry& g, const T* x_, T* col_)
      : s(g), x(x_), col(col_), k_size(g.filter_h * g.filter_w * g.in_c / V), in_c(g.in_c / V),
        filter_w(g.filter_w), rows(g.out_h, g.out_w, 1) {}
  FLUXION_HOST_DEVICE void operator()(index_t idx) const {
    const u32 i = u32(idx), row = k_size.div(i), k = i - row * k_size.d, tap = in_c.div(k), kh = filter_w.div(tap);
    const nhwc o = unravel(row, rows);
    const index_t ih = o.h * s.stride_h - s.pad_top + index_t(kh) * s.dilation_h;
    const index_t iw = o.w * s.stride_w - s.pad_left + index_t(tap - kh * filter_w.d) * s.dilation_w;
    lanes<T, V> value{};
    if (ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w)
      value = load_lanes<T, V>(x + ((o.n * s.in_h + ih) * s.in_w + iw) * s.in_c + index_t(k - tap * in_c.d) * V);
    store_lanes<T, V>(col + idx * V, value);
  }
};

/// The output position (oh or ow) whose window puts tap k at input position `in` (stride and
/// dilation along that axis), or -1 when none does.
FLUXION_HOST_DEVICE index_t output_of_tap(index_t in, index_t pad, index_t k, index_t dilation, index_t stride,
                                          index_t out) {
  const index_t t = in + pad - k * dilation;
  if (t < 0) return -1;
  const index_t o = stride == 1 ? t : index_t(u32(t) / u32(stride));
  return o * stride == t && o < out ? o : -1;
}

/// The adjoint of im2col, as a gather: dx(n, ih, iw, ci) is the sum, over the taps (kh, kw) that
/// put (ih, iw) in output (oh, ow)'s window, of dcol at row (n, oh, ow) and column (kh, kw, ci).
/// One thread per V input elements (consecutive channels), no atomics; each element's sum runs in
/// the same order for every V.
template <class T, int V = 1>
struct col2im {
  conv_geometry s;
  const T* dcol;
  T* dx;
  nhwc_dividers in;  // channels in lanes
  col2im(const conv_geometry& g, const T* dcol_, T* dx_)
      : s(g), dcol(dcol_), dx(dx_), in(g.in_h, g.in_w, g.in_c / V) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc p = unravel(u32(i), in);
    const index_t k_size = s.filter_h * s.filter_w * s.in_c, c = p.c * V;
    lanes<T, V> acc{};
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t oh = output_of_tap(p.h, s.pad_top, kh, s.dilation_h, s.stride_h, s.out_h);
      if (oh < 0) continue;
      for (index_t kw = 0; kw < s.filter_w; ++kw) {
        const index_t ow = output_of_tap(p.w, s.pad_left, kw, s.dilation_w, s.stride_w, s.out_w);
        if (ow < 0) continue;
        const lanes<T, V> d =
            load_lanes<T, V>(dcol + ((p.n * s.out_h + oh) * s.out_w + ow) * k_size + (kh * s.filter_w + kw) * s.in_c + c);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int j = 0; j < V; ++j) acc.v[j] += d.v[j];
      }
    }
    store_lanes<T, V>(dx + i * V, acc);
  }
};

/// Kernel<T, V>(s, from, to) over `count` elements (im2col's matrix or col2im's images), V channels
/// per thread where lane_width allows, else one.
template <template <class, int> class Kernel, class T>
void run_in_lanes(const conv_geometry& s, const T* from, T* to, index_t count) {
  constexpr int v = max_lanes<T>;
  if constexpr (v > 1) {
    if (lane_width(s.in_c, from, to) > 1) return for_each_index(count / v, Kernel<T, v>(s, from, to));
  }
  for_each_index(count, Kernel<T, 1>(s, from, to));
}

/// dw[i] += partial[i]: a later batch chunk's filter gradient added to the earlier chunks'.
template <class T>
struct accumulate {
  const T* partial;
  T* dw;
  FLUXION_HOST_DEVICE void operator()(index_t i) const { dw[i] += partial[i]; }
};

/// Flat index, in image n's (H, W, C) block, of the first maximal element of window (oh, ow) in
/// channel c (scan order, math::beats_max: the cpu kernels' rule, a NaN first), or -1 for a window
/// with no valid element.
template <class T>
FLUXION_HOST_DEVICE index_t window_argmax(const pool_geometry& s, const T* image, index_t oh, index_t ow, index_t c) {
  const span win = span_of(s, oh, ow);
  if (win.count() == 0) return -1;
  index_t best = (win.h0 * s.in_w + win.w0) * s.channels + c;
  for (index_t ih = win.h0; ih < win.h1; ++ih)
    for (index_t iw = win.w0; iw < win.w1; ++iw) {
      const index_t at = (ih * s.in_w + iw) * s.channels + c;
      if (math::beats_max(image[at], image[best])) best = at;
    }
  return best;
}

/// y(n, oh, ow, c): the window's maximum (Max) or mean; 0 for a window with no valid element.
template <class T, bool Max>
struct pool_forward {
  pool_geometry s;
  const T* x;
  T* y;
  nhwc_dividers out;
  pool_forward(const pool_geometry& g, const T* x_, T* y_)
      : s(g), x(x_), y(y_), out(g.out_h, g.out_w, g.channels) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(u32(i), out);
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
  nhwc_dividers in;
  pool_gradient(const pool_geometry& g, const T* x_, const T* dy_, T* dx_)
      : s(g), x(x_), dy(dy_), dx(dx_), in(g.in_h, g.in_w, g.channels) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc p = unravel(u32(i), in);
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

/// Max pooling's gradient where windows do not overlap (stride >= window on both axes, as in
/// every 2x2 / 2 pooling): a thread per output finds its window's first maximum once and writes
/// the whole window of dx, dy there and 0 elsewhere. pool_gradient's thread per input element
/// searches each covering window again: on an H100 the CNN's first pooling gradient (batch 256,
/// 28x28x32) took 180 us that way, about a tenth of the bandwidth. Inputs no window covers are
/// zeroed before (max_pool2d_gradient's run).
template <class T>
struct pool_scatter_gradient {
  pool_geometry s;
  const T* x;
  const T* dy;
  T* dx;
  nhwc_dividers out;
  pool_scatter_gradient(const pool_geometry& g, const T* x_, const T* dy_, T* dx_)
      : s(g), x(x_), dy(dy_), dx(dx_), out(g.out_h, g.out_w, g.channels) {}
  static bool applies(const pool_geometry& g) { return g.stride_h >= g.window_h && g.stride_w >= g.window_w; }
  /// Whether the windows cover every input (so no zeroing is needed).
  static bool covers(const pool_geometry& g) {
    return g.stride_h == g.window_h && g.stride_w == g.window_w && g.out_h * g.stride_h - g.pad_top >= g.in_h &&
           g.out_w * g.stride_w - g.pad_left >= g.in_w;
  }
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(u32(i), out);
    const index_t image = o.n * s.in_h * s.in_w * s.channels;
    const index_t best = window_argmax(s, x + image, o.h, o.w, o.c);
    if (best < 0) return;  // an empty window covers nothing
    const T g = dy[i];
    const span win = span_of(s, o.h, o.w);
    for (index_t ih = win.h0; ih < win.h1; ++ih)
      for (index_t iw = win.w0; iw < win.w1; ++iw) {
        const index_t at = (ih * s.in_w + iw) * s.channels + o.c;
        dx[image + at] = at == best ? g : T(0);
      }
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
  nhwc_dividers out;
  pool_select(const pool_geometry& g, const T* x_, const T* h_, T* y_)
      : s(g), x(x_), h(h_), y(y_), out(g.out_h, g.out_w, g.channels) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(u32(i), out);
    const index_t image = o.n * s.in_h * s.in_w * s.channels;
    const index_t at = window_argmax(s, x + image, o.h, o.w, o.c);
    y[i] = at < 0 ? T(0) : h[image + at];
  }
};

/// a b + c with one rounding, as the cpu's depthwise kernels add each product (std::fma, or xsimd's
/// fma): with the same terms in the same order, the results are the cpu's bit for bit.
template <class T>
FLUXION_HOST_DEVICE T fused_multiply_add(T a, T b, T c) {
#if defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, float>) return fmaf(a, b, c);
  else return fma(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

/// y(n, oh, ow, c M + j) = the sum, over the taps (kh, kw) inside the input in that order, of
/// x(n, ih, iw, c) w(kh, kw, c, j). One thread per output element: neighbouring threads read
/// neighbouring channels of x and w.
template <class T>
struct depthwise_forward {
  depthwise_geometry s;
  const T* x;
  const T* w;
  T* y;
  nhwc_dividers out;  // channels: the output's, C M
  divider multiplier;
  depthwise_forward(const depthwise_geometry& g, const T* x_, const T* w_, T* y_)
      : s(g), x(x_), w(w_), y(y_), out(g.out_h, g.out_w, g.channels * g.multiplier), multiplier(g.multiplier) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc o = unravel(u32(i), out);
    const index_t out_c = s.channels * s.multiplier;
    const T* image = x + o.n * s.in_h * s.in_w * s.channels + index_t(multiplier.div(u32(o.c)));
    T acc = T(0);
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t ih = o.h * s.stride_h - s.pad_top + kh * s.dilation_h;
      if (ih < 0 || ih >= s.in_h) continue;
      for (index_t kw = 0; kw < s.filter_w; ++kw) {
        const index_t iw = o.w * s.stride_w - s.pad_left + kw * s.dilation_w;
        if (iw < 0 || iw >= s.in_w) continue;
        acc = fused_multiply_add(image[(ih * s.in_w + iw) * s.channels], w[(kh * s.filter_w + kw) * out_c + o.c], acc);
      }
    }
    y[i] = acc;
  }
};

/// dx(n, ih, iw, c) = the sum, over the taps (kh, kw) in that order that put (ih, iw) in the window
/// of an output (oh, ow), and then over j < M, of dy(n, oh, ow, c M + j) w(kh, kw, c, j). One thread
/// per input element: a gather, no atomics.
template <class T>
struct depthwise_input_gradient {
  depthwise_geometry s;
  const T* dy;
  const T* w;
  T* dx;
  nhwc_dividers in;
  depthwise_input_gradient(const depthwise_geometry& g, const T* dy_, const T* w_, T* dx_)
      : s(g), dy(dy_), w(w_), dx(dx_), in(g.in_h, g.in_w, g.channels) {}
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const nhwc p = unravel(u32(i), in);
    const index_t m = s.multiplier, out_c = s.channels * m;
    const T* image = dy + p.n * s.out_h * s.out_w * out_c + p.c * m;
    const T* filter = w + p.c * m;
    T acc = T(0);
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t oh = output_of_tap(p.h, s.pad_top, kh, s.dilation_h, s.stride_h, s.out_h);
      if (oh < 0) continue;
      for (index_t kw = 0; kw < s.filter_w; ++kw) {
        const index_t ow = output_of_tap(p.w, s.pad_left, kw, s.dilation_w, s.stride_w, s.out_w);
        if (ow < 0) continue;
        const T* g = image + (oh * s.out_w + ow) * out_c;
        const T* f = filter + (kh * s.filter_w + kw) * out_c;
        for (index_t j = 0; j < m; ++j) acc = fused_multiply_add(g[j], f[j], acc);
      }
    }
    dx[i] = acc;
  }
};

/// One chunk's share of the filter gradient: thread (chunk k, filter element (kh, kw, c, j)) sums
/// x(n, ih, iw, c) dy(n, oh, ow, c M + j) over the chunk's output rows (n, oh), then columns ow, in
/// order, skipping the taps that fall in the padding. Chunk 0 writes dw itself, chunk k > 0 its own
/// filter in `partial` (depthwise_filter_sum adds them). Index idx is element idx of chunks
/// first_chunk, first_chunk + 1, ... (a launch covers whole chunks).
template <class T>
struct depthwise_filter_partial {
  depthwise_geometry s;
  const T* x;
  const T* dy;
  T* dw;
  T* partial;
  index_t first_chunk, chunk_rows;
  divider filter_size, out_c, filter_w, multiplier;
  depthwise_filter_partial(const depthwise_geometry& g, const T* x_, const T* dy_, T* dw_, T* partial_,
                           index_t first, index_t rows_per_chunk)
      : s(g), x(x_), dy(dy_), dw(dw_), partial(partial_), first_chunk(first), chunk_rows(rows_per_chunk),
        filter_size(g.filter_h * g.filter_w * g.channels * g.multiplier), out_c(g.channels * g.multiplier),
        filter_w(g.filter_w), multiplier(g.multiplier) {}
  FLUXION_HOST_DEVICE void operator()(index_t idx) const {
    const u32 i = u32(idx), k = filter_size.div(i), f = i - k * filter_size.d;
    const u32 tap = out_c.div(f), o = f - tap * out_c.d, kh = filter_w.div(tap), kw = tap - kh * filter_w.d;
    const index_t oc = index_t(out_c.d), c = index_t(multiplier.div(o));
    const index_t chunk = first_chunk + index_t(k), r0 = chunk * chunk_rows, rows = s.batch * s.out_h;
    const index_t r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
    const index_t h_offset = index_t(kh) * s.dilation_h - s.pad_top;
    const index_t w_offset = index_t(kw) * s.dilation_w - s.pad_left;
    index_t n = r0 / s.out_h, oh = r0 - n * s.out_h;  // once per thread; the rows below step
    T acc = T(0);
    for (index_t r = r0; r < r1; ++r) {
      const index_t ih = oh * s.stride_h + h_offset;
      if (ih >= 0 && ih < s.in_h) {
        const T* xr = x + (n * s.in_h + ih) * s.in_w * s.channels + c;
        const T* gr = dy + r * s.out_w * oc + index_t(o);
        for (index_t ow = 0; ow < s.out_w; ++ow) {
          const index_t iw = ow * s.stride_w + w_offset;
          if (iw < 0 || iw >= s.in_w) continue;
          acc = fused_multiply_add(xr[iw * s.channels], gr[ow * oc], acc);
        }
      }
      if (++oh == s.out_h) {
        oh = 0;
        ++n;
      }
    }
    if (chunk == 0) dw[f] = acc;
    else partial[(chunk - 1) * index_t(filter_size.d) + index_t(f)] = acc;
  }
};

/// dw[f] += the partial filters of chunks 1 .. chunks - 1, in chunk order (the cpu's order).
template <class T>
struct depthwise_filter_sum {
  const T* partial;
  T* dw;
  index_t chunks, filter_size;
  FLUXION_HOST_DEVICE void operator()(index_t f) const {
    T acc = dw[f];
    for (index_t k = 1; k < chunks; ++k) acc += partial[(k - 1) * filter_size + f];
    dw[f] = acc;
  }
};


/// A single row-major product C (m x n) = op(A) op(B) with inner size k, through the device's
/// matmul (cuBLAS for float and double under nvcc, the plain kernel elsewhere).
template <class T>
void gemm(bool ta, bool tb, index_t m, index_t n, index_t k, const T* a, const T* b, T* c) {
  const index_t origin = 0;
  evaluator<cuda>::matmul(ta, tb, 1, m, n, k, a, &origin, b, &origin, c);
}

/// K, the columns of the im2col matrix: one per filter tap and input channel.
inline index_t k_size(const conv_geometry& s) { return s.filter_h * s.filter_w * s.in_c; }

/// A 1x1 filter at stride 1 without padding: the input itself is the im2col matrix.
inline bool pointwise(const conv_geometry& s) {
  return s.filter_h == 1 && s.filter_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 &&
         s.pad_left == 0;
}

/// The bytes of device memory the im2col matrix may take at once (256 MB; larger batches go in
/// chunks of whole images). Process-wide; the tests lower it to exercise the chunked path.
inline std::size_t& im2col_budget_bytes() noexcept {
  static std::size_t bytes = std::size_t(256) << 20;
  return bytes;
}

/// Images per chunk: as many as fit the budget, at least one, at most the batch, and few enough
/// for one launch of im2col and of col2im (for_image_groups).
template <class T>
index_t images_per_chunk(const conv_geometry& s) {
  const index_t per_image = s.out_h * s.out_w * k_size(s), image = s.in_h * s.in_w * s.in_c;
  const index_t launch = images_per_launch("conv2d", s.batch, per_image > image ? per_image : image);
  const index_t fit = per_image > 0 ? static_cast<index_t>(im2col_budget_bytes() / sizeof(T)) / per_image : s.batch;
  const index_t chunk = fit < launch ? fit : launch;
  return chunk < 1 ? 1 : chunk;
}

/// Runs f(n0, count, col) for the batch in chunks of whole images (images n0 .. n0 + count), where
/// `col` is one im2col scratch matrix of images_per_chunk(s) * out_h * out_w * k_size(s) elements,
/// shared by the chunks: the loop of the three im2col convolutions below.
template <class T, class F>
void for_im2col_chunks(const conv_geometry& s, F&& f) {
  const index_t chunk = images_per_chunk<T>(s);
  device_scratch<T> col(chunk * s.out_h * s.out_w * k_size(s));
  for (index_t n0 = 0; n0 < s.batch; n0 += chunk) f(n0, n0 + chunk < s.batch ? chunk : s.batch - n0, col.data());
}

}  // namespace cuda_window

// The table of window_ops (expr/conv.hpp) on the cuda device, called as the cpu kernels are:
// run(geometry, operands..., result).
template <>
struct window_kernel<cuda, window_ops::conv2d> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* x, const T* w, T* y) {
    if (s.output_size() == 0) return;
    if (cuda_window::pointwise(s)) {  // y (NHW x out_c) = x (NHW x in_c) w (in_c x out_c)
      cuda_window::gemm(false, false, s.batch * s.in_h * s.in_w, s.out_c, s.in_c, x, w, y);
      return;
    }
    auto im2col = [&] {
      const index_t k = cuda_window::k_size(s), rows = s.out_h * s.out_w, image = s.in_h * s.in_w * s.in_c;
      cuda_window::for_im2col_chunks<T>(s, [&](index_t n0, index_t count, T* col) {
        const index_t p = count * rows;
        cuda_window::run_in_lanes<cuda_window::im2col>(s, x + n0 * image, col, p * k);
        cuda_window::gemm(false, false, p, s.out_c, k, col, w, y + n0 * rows * s.out_c);
      });
    };
#if FLUXION_HAVE_CUDNN
    if (cudnn::run(cudnn::pass::forward, s, x, w, y, im2col)) return;
#endif
    im2col();
  }
};
template <>
struct window_kernel<cuda, window_ops::conv2d_input_gradient> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* dy, const T* w, T* dx) {
    if (s.input_size() == 0) return;
    if (cuda_window::pointwise(s)) {  // dx (NHW x in_c) = dy (NHW x out_c) w^T
      cuda_window::gemm(false, true, s.batch * s.in_h * s.in_w, s.in_c, s.out_c, dy, w, dx);
      return;
    }
    auto im2col = [&] {
      const index_t k = cuda_window::k_size(s), rows = s.out_h * s.out_w, image = s.in_h * s.in_w * s.in_c;
      cuda_window::for_im2col_chunks<T>(s, [&](index_t n0, index_t count, T* dcol) {
        // dcol (P x K) = dy (P x out_c) w^T, then each input element gathers its taps from dcol.
        cuda_window::gemm(false, true, count * rows, k, s.out_c, dy + n0 * rows * s.out_c, w, dcol);
        cuda_window::run_in_lanes<cuda_window::col2im>(s, dcol, dx + n0 * image, count * image);
      });
    };
#if FLUXION_HAVE_CUDNN
    if (cudnn::run(cudnn::pass::input_gradient, s, dy, w, dx, im2col)) return;
#endif
    im2col();
  }
};
template <>
struct window_kernel<cuda, window_ops::conv2d_filter_gradient> {
  template <class T>
  static void run(const conv2d_geometry& s, const T* x, const T* dy, T* dw) {
    const index_t n_out = s.filter_size();
    if (n_out == 0) return;
    if (s.output_size() == 0) {  // no output position: nothing reaches the filter
      thrust::fill_n(kernel_policy(), dw, n_out, T(0));
      return;
    }
    if (cuda_window::pointwise(s)) {  // dw (in_c x out_c) = x^T dy
      cuda_window::gemm(true, false, s.in_c, s.out_c, s.batch * s.in_h * s.in_w, x, dy, dw);
      return;
    }
    auto im2col = [&] {
      const index_t k = cuda_window::k_size(s), rows = s.out_h * s.out_w, image = s.in_h * s.in_w * s.in_c;
      // Chunks after the first compute into `partial` and are added in order (deterministic).
      device_scratch<T> partial(cuda_window::images_per_chunk<T>(s) < s.batch ? n_out : 0);
      cuda_window::for_im2col_chunks<T>(s, [&](index_t n0, index_t count, T* col) {
        const index_t p = count * rows;
        cuda_window::run_in_lanes<cuda_window::im2col>(s, x + n0 * image, col, p * k);
        // dw (K x out_c) = col^T (K x P) dy (P x out_c)
        cuda_window::gemm(true, false, k, s.out_c, p, col, dy + n0 * rows * s.out_c,
                          n0 == 0 ? dw : partial.data());
        if (n0 > 0) cuda_window::for_each_index(n_out, cuda_window::accumulate<T>{partial.data(), dw});
      });
    };
#if FLUXION_HAVE_CUDNN
    if (cudnn::run(cudnn::pass::filter_gradient, s, x, dy, dw, im2col)) return;
#endif
    im2col();
  }
};
template <>
struct window_kernel<cuda, window_ops::depthwise_conv2d> {
  template <class T>
  static void run(const depthwise2d_geometry& s, const T* x, const T* w, T* y) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.out_c();
    cuda_window::for_image_groups("depthwise_conv2d", s.batch, out, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * out, cuda_window::depthwise_forward<T>(s, x + n0 * in, w, y + n0 * out));
    });
  }
};
template <>
struct window_kernel<cuda, window_ops::depthwise_conv2d_input_gradient> {
  template <class T>
  static void run(const depthwise2d_geometry& s, const T* dy, const T* w, T* dx) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.out_c();
    cuda_window::for_image_groups("depthwise_conv2d", s.batch, in, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * in,
                                  cuda_window::depthwise_input_gradient<T>(s, dy + n0 * out, w, dx + n0 * in));
    });
  }
};
// Not yet timed on a GPU. The chunks are the cpu kernel's (kernels::depthwise_detail::rows_per_chunk,
// at most 256 of about 16K output elements each), which makes the two devices agree bit for bit; a
// GPU would keep more threads busy with smaller chunks, at the price of that agreement.
template <>
struct window_kernel<cuda, window_ops::depthwise_conv2d_filter_gradient> {
  template <class T>
  static void run(const depthwise2d_geometry& s, const T* x, const T* dy, T* dw) {
    const index_t n_out = s.filter_size(), rows = s.batch * s.out_h;
    if (n_out == 0) return;
    if (rows == 0) {  // no output row: nothing reaches the filter
      thrust::fill_n(kernel_policy(), dw, n_out, T(0));
      return;
    }
    const index_t chunk_rows = kernels::depthwise_detail::rows_per_chunk(s);
    const index_t chunks = (rows + chunk_rows - 1) / chunk_rows;
    // Chunk 0 writes dw; the others their own filters, added to it in chunk order (no atomics). A
    // launch covers whole chunks, as the other kernels' cover whole images.
    device_scratch<T> partial((chunks - 1) * n_out);
    cuda_window::for_image_groups("depthwise_conv2d", chunks, n_out, [&](index_t k0, index_t count) {
      cuda_window::for_each_index(
          count * n_out, cuda_window::depthwise_filter_partial<T>(s, x, dy, dw, partial.data(), k0, chunk_rows));
    });
    if (chunks > 1)
      cuda_window::for_each_index(n_out, cuda_window::depthwise_filter_sum<T>{partial.data(), dw, chunks, n_out});
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, T* y) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.channels;
    cuda_window::for_image_groups("max_pool2d", s.batch, out, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * out, cuda_window::pool_forward<T, true>(s, x + n0 * in, y + n0 * out));
    });
  }
};
template <>
struct window_kernel<cuda, window_ops::avg_pool2d> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, T* y) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.channels;
    cuda_window::for_image_groups("avg_pool2d", s.batch, out, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * out, cuda_window::pool_forward<T, false>(s, x + n0 * in, y + n0 * out));
    });
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d_gradient> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, const T* dy, T* dx) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.channels;
    using scatter = cuda_window::pool_scatter_gradient<T>;
    if (scatter::applies(s)) {  // windows apart: a thread per output writes its window
      if (!scatter::covers(s)) thrust::fill_n(kernel_policy(), dx, s.batch * in, T(0));
      cuda_window::for_image_groups("max_pool2d", s.batch, in, [&](index_t n0, index_t count) {
        cuda_window::for_each_index(count * out, scatter(s, x + n0 * in, dy + n0 * out, dx + n0 * in));
      });
      return;
    }
    cuda_window::for_image_groups("max_pool2d", s.batch, in, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * in,
                                  cuda_window::pool_gradient<T, true>(s, x + n0 * in, dy + n0 * out, dx + n0 * in));
    });
  }
};
template <>
struct window_kernel<cuda, window_ops::avg_pool2d_gradient> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* dy, T* dx) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.channels;
    cuda_window::for_image_groups("avg_pool2d", s.batch, in, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * in,
                                  cuda_window::pool_gradient<T, false>(s, nullptr, dy + n0 * out, dx + n0 * in));
    });
  }
};
template <>
struct window_kernel<cuda, window_ops::max_pool2d_select> {
  template <class T>
  static void run(const pool2d_geometry& s, const T* x, const T* h, T* y) {
    const index_t in = s.in_h * s.in_w * s.channels, out = s.out_h * s.out_w * s.channels;
    cuda_window::for_image_groups("max_pool2d", s.batch, out, [&](index_t n0, index_t count) {
      cuda_window::for_each_index(count * out,
                                  cuda_window::pool_select<T>(s, x + n0 * in, h + n0 * in, y + n0 * out));
    });
  }
};

}  // namespace fluxion::detail
