// 2-D max and average pooling on the CPU, NHWC, forward and backward, with TensorFlow's conventions;
// fx::max_pool2d and fx::avg_pool2d and their vector-Jacobian products call these.
//
//   using namespace fluxion::detail::kernels;
//   auto s = pool2d_tf_shape(/*batch=*/64, 28, 28, 32, /*window=*/2, 2, /*strides=*/2, 2, padding_mode::same);
//   max_pool2d_forward<float>(s, x, y);
//   max_pool2d_backward<float>(s, x, dy, dx);   // recomputes each window's maximum from x
//
// Conventions, as in TensorFlow:
//   - padding never takes part: a max is over the window's valid elements, and an average divides
//     by the number of valid elements (so `same` windows at the border are not diluted by zeros);
//   - max pool backward routes each output gradient to the first maximal element of its window,
//     scanning rows then columns (kh, then kw), and comparing with `>`: ties go to the top-left
//     element, and the forward pass keeps that same element;
//   - a NaN in a window is its maximum (the first NaN, for the gradient: math::beats_max), as
//     reduce_max's, TensorFlow's and PyTorch's;
//   - a window with no valid element (possible only with hand-made padding) gives 0 and gets no
//     gradient.
// 2x2 windows at stride 2 that tile the image (the usual max pool) take a one-pass backward path:
// each window's four pixels are compared in scan order and every dx element is written once.
// Backward kernels add into overlapping windows one image at a time, in a fixed order, so results
// are bitwise identical for any thread count.
#pragma once

#include <algorithm>
#include <limits>
#include <string>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "detail/simd_ops.hpp"
#include "detail/window_geometry.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::kernels {

struct pool2d_shape {
  index_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  index_t window_h = 1, window_w = 1;
  index_t stride_h = 1, stride_w = 1;
  index_t pad_top = 0, pad_left = 0;
  index_t out_h = 0, out_w = 0;

  index_t input_size() const { return batch * in_h * in_w * channels; }
  index_t output_size() const { return batch * out_h * out_w * channels; }
};

inline pool2d_shape pool2d_tf_shape(index_t batch, index_t in_h, index_t in_w, index_t channels, index_t window_h,
                                    index_t window_w, index_t stride_h, index_t stride_w, padding_mode padding) {
  const window_extent h = tf_window("pool2d", in_h, window_h, stride_h, 1, padding);
  const window_extent w = tf_window("pool2d", in_w, window_w, stride_w, 1, padding);
  return {batch,    in_h,     in_w,         channels,     window_h, window_w,
          stride_h, stride_w, h.pad_before, w.pad_before, h.out,    w.out};
}

namespace pool_detail {

inline void check_shape(const char* op, const pool2d_shape& s) {
  auto require = [&](bool ok, const char* name, index_t x, const char* what) {
    if (!ok) throw invalid_argument(std::string(op) + ": " + name + " = " + std::to_string(x) + " " + what);
  };
  require(s.batch >= 0, "batch", s.batch, "is negative");
  require(s.in_h >= 0, "in_h", s.in_h, "is negative");
  require(s.in_w >= 0, "in_w", s.in_w, "is negative");
  require(s.channels >= 0, "channels", s.channels, "is negative");
  require(s.window_h >= 1, "window_h", s.window_h, "must be at least 1");
  require(s.window_w >= 1, "window_w", s.window_w, "must be at least 1");
  require(s.stride_h >= 1, "stride_h", s.stride_h, "must be at least 1");
  require(s.stride_w >= 1, "stride_w", s.stride_w, "must be at least 1");
  require(s.pad_top >= 0, "pad_top", s.pad_top, "is negative");
  require(s.pad_left >= 0, "pad_left", s.pad_left, "is negative");
  require(s.out_h >= 0, "out_h", s.out_h, "is negative");
  require(s.out_w >= 0, "out_w", s.out_w, "is negative");
}

/// The valid part [h0, h1) x [w0, w1) of the window of output (oh, ow).
struct window_span {
  index_t h0, h1, w0, w1;
  index_t count() const { return std::max<index_t>(h1 - h0, 0) * std::max<index_t>(w1 - w0, 0); }
};

inline window_span span_of(const pool2d_shape& s, index_t oh, index_t ow) {
  const index_t h = oh * s.stride_h - s.pad_top, w = ow * s.stride_w - s.pad_left;
  return {std::max<index_t>(h, 0), std::min(h + s.window_h, s.in_h), std::max<index_t>(w, 0),
          std::min(w + s.window_w, s.in_w)};
}

// Forward passes run one task per block of output rows; backward ones one task per image, since
// windows of one image may overlap.
inline constexpr index_t min_parallel_elements = 1 << 15;

template <class Body>
void for_each_output_row(const pool2d_shape& s, Body&& body) {
  const index_t rows = s.batch * s.out_h;
  auto task = [&](index_t r) { body(r / s.out_h, r % s.out_h); };
  if (s.output_size() >= min_parallel_elements)
    parallel_for(rows, task);
  else
    for (index_t r = 0; r < rows; ++r) task(r);
}

template <class Body>
void for_each_image(const pool2d_shape& s, Body&& body) {
  if (s.input_size() + s.output_size() >= min_parallel_elements)
    parallel_for(s.batch, body);
  else
    for (index_t n = 0; n < s.batch; ++n) body(n);
}

}  // namespace pool_detail

template <class T>
void max_pool2d_forward(const pool2d_shape& s, const T* input, T* output) {
  pool_detail::check_shape("max_pool2d_forward", s);
  const index_t c = s.channels;
  pool_detail::for_each_output_row(s, [&](index_t n, index_t oh) {
    const T* x = input + n * s.in_h * s.in_w * c;
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      T* y = output + ((n * s.out_h + oh) * s.out_w + ow) * c;
      const auto win = pool_detail::span_of(s, oh, ow);
      if (win.count() == 0) {
        std::fill_n(y, c, T(0));
        continue;
      }
      for_each_channel_chunk<T>(c, [&](auto ops, index_t ch) {
        using O = decltype(ops);
        // `>` first, and the sum of the window: NaN if a lane holds a NaN (or, rarely, overflows), in
        // which case the window is scanned again with NaN's rule (math::beats_max).
        const auto first = O::loadu(x + (win.h0 * s.in_w + win.w0) * c + ch);
        auto best = first, sum = first;
        for (index_t ih = win.h0; ih < win.h1; ++ih)
          for (index_t iw = win.w0; iw < win.w1; ++iw) {
            const auto v = O::loadu(x + (ih * s.in_w + iw) * c + ch);
            best = O::max_ordered(v, best);  // ties keep the earlier
            sum = sum + v;
          }
        if (O::any_nan(sum)) {
          best = first;
          for (index_t ih = win.h0; ih < win.h1; ++ih)
            for (index_t iw = win.w0; iw < win.w1; ++iw) best = O::max(O::loadu(x + (ih * s.in_w + iw) * c + ch), best);
        }
        O::storeu(y + ch, best);
      });
    }
  });
}

namespace pool_detail {

/// Max pool backward for 2x2 windows at stride 2 that tile image n exactly: one pass over the
/// input, each window's four pixels compared in scan order by math::beats_max as in the generic
/// path (`>` where no lane holds a NaN), and every element of dx written once (no zeroing, no
/// scatter).
template <class T>
void max_pool2d_backward_2x2(const pool2d_shape& s, const T* x, const T* g, T* dx) {
  using O = simd_ops<T>;
  const index_t c = s.channels, row = s.in_w * c, vec_end = c - c % O::width;
  for (index_t oh = 0; oh < s.out_h; ++oh) {
    const T* x0 = x + 2 * oh * row;
    T* d0 = dx + 2 * oh * row;
    for (index_t ow = 0; ow < s.out_w; ++ow, x0 += 2 * c, d0 += 2 * c, g += c) {
      const T *x1 = x0 + c, *x2 = x0 + row, *x3 = x2 + c;
      T *d1 = d0 + c, *d2 = d0 + row, *d3 = d2 + c;
      index_t ch = 0;
      if constexpr (O::width > 1) {
        const auto zero = O::splat(T(0));
        for (; ch < vec_end; ch += O::width) {
          const auto v0 = O::loadu(x0 + ch), v1 = O::loadu(x1 + ch), v2 = O::loadu(x2 + ch), v3 = O::loadu(x3 + ch);
          // `>` alone unless a lane may hold a NaN (the sum is NaN then, or at an overflow).
          const bool plain = !O::any_nan((v0 + v1) + (v2 + v3));
          const auto m1 = plain ? v1 > v0 : O::beats_max(v1, v0);
          const auto b1 = xsimd::select(m1, v1, v0);
          const auto m2 = plain ? v2 > b1 : O::beats_max(v2, b1);
          const auto b2 = xsimd::select(m2, v2, b1);
          const auto m3 = plain ? v3 > b2 : O::beats_max(v3, b2);
          auto r = O::loadu(g + ch);  // the gradient not yet routed to a later maximum
          O::storeu(d3 + ch, xsimd::select(m3, r, zero));
          r = xsimd::select(m3, zero, r);
          O::storeu(d2 + ch, xsimd::select(m2, r, zero));
          r = xsimd::select(m2, zero, r);
          O::storeu(d1 + ch, xsimd::select(m1, r, zero));
          O::storeu(d0 + ch, xsimd::select(m1, zero, r));
        }
      }
      for (; ch < c; ++ch) {
        const T v0 = x0[ch], v1 = x1[ch], v2 = x2[ch], v3 = x3[ch];
        const bool m1 = math::beats_max(v1, v0);
        const T b1 = m1 ? v1 : v0;
        const bool m2 = math::beats_max(v2, b1);
        const bool m3 = math::beats_max(v3, m2 ? v2 : b1);
        const index_t q = m3 ? 3 : m2 ? 2 : m1 ? 1 : 0;
        d0[ch] = q == 0 ? g[ch] : T(0);
        d1[ch] = q == 1 ? g[ch] : T(0);
        d2[ch] = q == 2 ? g[ch] : T(0);
        d3[ch] = q == 3 ? g[ch] : T(0);
      }
    }
  }
}

}  // namespace pool_detail

/// grad_input = the gradient routed to each window's first maximal element of input.
template <class T>
void max_pool2d_backward(const pool2d_shape& s, const T* input, const T* grad_output, T* grad_input) {
  pool_detail::check_shape("max_pool2d_backward", s);
  const index_t c = s.channels, image_in = s.in_h * s.in_w * c;
  const bool disjoint = s.stride_h >= s.window_h && s.stride_w >= s.window_w;
  // Windows that tile the image exactly write every element of it: no zeroing first.
  const bool tiling = disjoint && s.stride_h == s.window_h && s.stride_w == s.window_w && s.pad_top == 0 &&
                      s.pad_left == 0 && s.out_h * s.stride_h == s.in_h && s.out_w * s.stride_w == s.in_w;
  if (tiling && s.window_h == 2 && s.window_w == 2) {
    const index_t image_out = s.out_h * s.out_w * c;
    pool_detail::for_each_image(s, [&](index_t n) {
      pool_detail::max_pool2d_backward_2x2(s, input + n * image_in, grad_output + n * image_out,
                                           grad_input + n * image_in);
    });
    return;
  }
  pool_detail::for_each_image(s, [&](index_t n) {
    const T* x = input + n * image_in;
    T* dx = grad_input + n * image_in;
    if (!tiling) std::fill_n(dx, image_in, T(0));
    for (index_t oh = 0; oh < s.out_h; ++oh)
      for (index_t ow = 0; ow < s.out_w; ++ow) {
        const T* g = grad_output + ((n * s.out_h + oh) * s.out_w + ow) * c;
        const auto win = pool_detail::span_of(s, oh, ow);
        if (win.count() == 0) continue;
        const index_t span_w = win.w1 - win.w0, base = (win.h0 * s.in_w + win.w0) * c;
        // Window position -> pixel offset, without a division per channel in common window sizes.
        constexpr index_t table_size = 64;
        index_t offsets[table_size];
        const bool tabled = !disjoint && win.count() <= table_size;
        if (tabled)
          for (index_t q = 0; q < win.count(); ++q) offsets[q] = (q / span_w * s.in_w + q % span_w) * c;
        for_each_channel_chunk<T>(c, [&](auto ops, index_t ch) {
          using O = decltype(ops);
          // The position in the window, counted as T: exact far beyond any window size.
          auto best = O::loadu(x + (win.h0 * s.in_w + win.w0) * c + ch), where = O::splat(T(0));
          T position = 0;
          for (index_t ih = win.h0; ih < win.h1; ++ih)
            for (index_t iw = win.w0; iw < win.w1; ++iw, position += 1) {
              const auto v = O::loadu(x + (ih * s.in_w + iw) * c + ch);
              where = O::select_beats_max(v, best, O::splat(position), where);
              best = O::max(v, best);
            }
          if (disjoint) {  // no other window writes here: store whole vectors, no scatter
            const auto grad = O::loadu(g + ch), zero = O::splat(T(0));
            position = 0;
            for (index_t ih = win.h0; ih < win.h1; ++ih)
              for (index_t iw = win.w0; iw < win.w1; ++iw, position += 1)
                O::storeu(dx + (ih * s.in_w + iw) * c + ch, O::select_equal(where, O::splat(position), grad, zero));
            return;
          }
          alignas(buffer_alignment) T at[O::width];
          O::storeu(at, where);
          for (index_t lane = 0; lane < O::width; ++lane) {
            const auto q = static_cast<index_t>(at[lane]);
            const index_t offset = tabled ? offsets[q] : (q / span_w * s.in_w + q % span_w) * c;
            dx[base + offset + ch + lane] += g[ch + lane];
          }
        });
      }
  });
}

template <class T>
void avg_pool2d_forward(const pool2d_shape& s, const T* input, T* output) {
  pool_detail::check_shape("avg_pool2d_forward", s);
  const index_t c = s.channels;
  pool_detail::for_each_output_row(s, [&](index_t n, index_t oh) {
    const T* x = input + n * s.in_h * s.in_w * c;
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      T* y = output + ((n * s.out_h + oh) * s.out_w + ow) * c;
      const auto win = pool_detail::span_of(s, oh, ow);
      if (win.count() == 0) {
        std::fill_n(y, c, T(0));
        continue;
      }
      const T scale = T(1) / static_cast<T>(win.count());
      for_each_channel_chunk<T>(c, [&](auto ops, index_t ch) {
        using O = decltype(ops);
        auto sum = O::splat(T(0));
        for (index_t ih = win.h0; ih < win.h1; ++ih)
          for (index_t iw = win.w0; iw < win.w1; ++iw) sum = sum + O::loadu(x + (ih * s.in_w + iw) * c + ch);
        O::storeu(y + ch, sum * O::splat(scale));
      });
    }
  });
}

template <class T>
void avg_pool2d_backward(const pool2d_shape& s, const T* grad_output, T* grad_input) {
  pool_detail::check_shape("avg_pool2d_backward", s);
  const index_t c = s.channels, image_in = s.in_h * s.in_w * c;
  pool_detail::for_each_image(s, [&](index_t n) {
    T* dx = grad_input + n * image_in;
    std::fill_n(dx, image_in, T(0));
    for (index_t oh = 0; oh < s.out_h; ++oh)
      for (index_t ow = 0; ow < s.out_w; ++ow) {
        const T* g = grad_output + ((n * s.out_h + oh) * s.out_w + ow) * c;
        const auto win = pool_detail::span_of(s, oh, ow);
        if (win.count() == 0) continue;
        const T scale = T(1) / static_cast<T>(win.count());
        for_each_channel_chunk<T>(c, [&](auto ops, index_t ch) {
          using O = decltype(ops);
          const auto share = O::loadu(g + ch) * O::splat(scale);
          for (index_t ih = win.h0; ih < win.h1; ++ih)
            for (index_t iw = win.w0; iw < win.w1; ++iw) {
              T* d = dx + (ih * s.in_w + iw) * c + ch;
              O::storeu(d, O::loadu(d) + share);
            }
        });
      }
  });
}

}  // namespace fluxion::detail::kernels
