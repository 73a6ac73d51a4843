// Direct kernels for convolutions whose input has one channel (the first layer on grayscale
// images). There, im2col copies KH*KW single floats per output pixel for a product with k = KH*KW,
// and the copy costs as much as the product; sliding the window over a zero-bordered copy of the
// image and vectorizing over output channels is 2-3x faster (bench/RESULTS-kernels.md).
//
//   if (single_channel_direct<float>(s)) single_channel_forward<float>(s, x, w, y, epilogue);
//   if (single_channel_direct<float>(s) && s.stride_h == 1 && s.stride_w == 1)
//     single_channel_backward_input<float>(s, dy, w, dx);
//
// One task per image, each element summed over taps in a fixed order: results do not depend on
// the thread count.
#pragma once

#include <algorithm>

#include "../gemm.hpp"
#include "scratch_buffer.hpp"
#include "simd_ops.hpp"

namespace fluxion::detail::kernels::conv_detail {

inline int single_channel_mode = 1;  // 1: use these kernels where they apply, 0: never (measurements)

/// Rows [row0, row0 + rows) and columns [col0, col0 + cols) of an h x w plane of c-channel pixels,
/// zero outside the plane, into dst (rows x cols x c).
template <class T>
void bordered_plane(const T* src, index_t h, index_t w, index_t c, index_t row0, index_t rows, index_t col0,
                    index_t cols, T* dst) {
  const index_t left = std::clamp<index_t>(-col0, 0, cols), right = std::clamp<index_t>(w - col0, left, cols);
  for (index_t r = 0; r < rows; ++r, dst += cols * c) {
    const index_t ir = row0 + r;
    if (ir < 0 || ir >= h) {
      std::fill_n(dst, cols * c, T(0));
      continue;
    }
    std::fill_n(dst, left * c, T(0));
    std::copy_n(src + (ir * w + col0 + left) * c, (right - left) * c, dst + left * c);
    std::fill_n(dst + right * c, (cols - right) * c, T(0));
  }
}

template <class T, class Shape>
bool single_channel_direct(const Shape& s) {
  constexpr index_t w = simd_ops<T>::width;
  return single_channel_mode == 1 && s.in_c == 1 && s.out_c % w == 0 && s.out_c / w <= 6;
}

// R output pixels along a row, NV vectors of output channels each: R * NV accumulators.
template <class T, int NV, int R, class Shape>
FLUXION_ALWAYS_INLINE void forward_pixels(const Shape& s, const T* plane, index_t plane_w, index_t oh, index_t ow,
                                          const T* filter, const gemm_epilogue<T>& ep, T* out) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  batch acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[r][v] = ops::splat(T(0));
  for (index_t kh = 0; kh < s.filter_h; ++kh) {
    const T* row = plane + (oh * s.stride_h + kh * s.dilation_h) * plane_w + ow * s.stride_w;
    for (index_t kw = 0; kw < s.filter_w; ++kw) {
      const T* tap = filter + (kh * s.filter_w + kw) * s.out_c;
      batch wv[NV];
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) wv[v] = ops::loadu(tap + v * w);
      const T* x = row + kw * s.dilation_w;
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const batch xv = ops::splat(x[r * s.stride_w]);
#pragma GCC unroll 8
        for (int v = 0; v < NV; ++v) acc[r][v] = ops::fma(xv, wv[v], acc[r][v]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      batch y = acc[r][v];
      if (ep.bias) y = y + ops::loadu(ep.bias + v * w);
      if (ep.act == activation::relu) y = ops::relu(y);
      ops::storeu(out + r * s.out_c + v * w, y);
    }
}

template <class T, int NV, class Shape>
void forward_image(const Shape& s, const T* plane, index_t plane_w, const T* filter, const gemm_epilogue<T>& ep,
                   T* out) {
  constexpr int r_block = 12 / NV;
  for (index_t oh = 0; oh < s.out_h; ++oh) {
    T* y = out + oh * s.out_w * s.out_c;
    index_t ow = 0;
    for (; ow + r_block <= s.out_w; ow += r_block)
      forward_pixels<T, NV, r_block>(s, plane, plane_w, oh, ow, filter, ep, y + ow * s.out_c);
    for (; ow < s.out_w; ++ow) forward_pixels<T, NV, 1>(s, plane, plane_w, oh, ow, filter, ep, y + ow * s.out_c);
  }
}

template <class T, class Shape>
void single_channel_forward(const Shape& s, const T* input, const T* filter, T* output, const gemm_epilogue<T>& ep) {
  const index_t rows = (s.out_h - 1) * s.stride_h + (s.filter_h - 1) * s.dilation_h + 1;
  const index_t cols = (s.out_w - 1) * s.stride_w + (s.filter_w - 1) * s.dilation_w + 1;
  const index_t nv = s.out_c / simd_ops<T>::width;
  const bool parallel =
      2.0 * s.batch * s.out_h * s.out_w * s.out_c * s.filter_h * s.filter_w >= gemm_detail::min_parallel_flops;
  gemm_detail::run_tasks<T>(parallel, s.batch, [&](index_t n) {
    T* plane = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * cols));
    bordered_plane(input + n * s.in_h * s.in_w, s.in_h, s.in_w, 1, -s.pad_top, rows, -s.pad_left, cols, plane);
    T* out = output + n * s.out_h * s.out_w * s.out_c;
    switch (nv) {
      case 1:
        forward_image<T, 1>(s, plane, cols, filter, ep, out);
        break;
      case 2:
        forward_image<T, 2>(s, plane, cols, filter, ep, out);
        break;
      case 3:
        forward_image<T, 3>(s, plane, cols, filter, ep, out);
        break;
      case 4:
        forward_image<T, 4>(s, plane, cols, filter, ep, out);
        break;
      case 5:
        forward_image<T, 5>(s, plane, cols, filter, ep, out);
        break;
      default:
        forward_image<T, 6>(s, plane, cols, filter, ep, out);
        break;
    }
  });
}

// R input pixels along a row; each accumulator sums over taps and output channels, and the R sums
// are reduced together.
template <class T, int R, class Shape>
FLUXION_ALWAYS_INLINE void backward_input_pixels(const Shape& s, const T* plane, index_t plane_w, index_t ih,
                                                 index_t iw, const T* filter, T* dx) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  const index_t c = s.out_c;
  batch acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = ops::splat(T(0));
  for (index_t kh = 0; kh < s.filter_h; ++kh) {
    const T* row = plane + (ih + (s.filter_h - 1 - kh) * s.dilation_h) * plane_w * c;
    for (index_t kw = 0; kw < s.filter_w; ++kw) {
      const T* g = row + (iw + (s.filter_w - 1 - kw) * s.dilation_w) * c;
      const T* tap = filter + (kh * s.filter_w + kw) * c;
      for (index_t v = 0; v < c; v += w) {
        const batch wv = ops::loadu(tap + v);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r] = ops::fma(ops::loadu(g + r * c + v), wv, acc[r]);
      }
    }
  }
  // One reduction per pixel: xsimd's haddp (simd_ops::sum_each) permutes lanes 2-5 and 10-13 on
  // AVX-512 (xsimd 8; tests/backend/cpu/conv.test.cpp's 21-wide single-channel shape catches it).
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) dx[r] = ops::sum(acc[r]);
}

/// The input gradient for stride 1: each input pixel gathers its taps from a bordered copy of dY.
template <class T, class Shape>
void single_channel_backward_input(const Shape& s, const T* grad_output, const T* filter, T* grad_input) {
  constexpr index_t w = simd_ops<T>::width;
  const index_t rows = s.in_h + (s.filter_h - 1) * s.dilation_h;
  const index_t cols = s.in_w + (s.filter_w - 1) * s.dilation_w;
  const index_t row0 = s.pad_top - (s.filter_h - 1) * s.dilation_h;
  const index_t col0 = s.pad_left - (s.filter_w - 1) * s.dilation_w;
  const bool parallel =
      2.0 * s.batch * s.in_h * s.in_w * s.out_c * s.filter_h * s.filter_w >= gemm_detail::min_parallel_flops;
  gemm_detail::run_tasks<T>(parallel, s.batch, [&](index_t n) {
    T* plane = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * cols * s.out_c));
    bordered_plane(grad_output + n * s.out_h * s.out_w * s.out_c, s.out_h, s.out_w, s.out_c, row0, rows, col0, cols,
                   plane);
    T* dx = grad_input + n * s.in_h * s.in_w;
    for (index_t ih = 0; ih < s.in_h; ++ih) {
      index_t iw = 0;
      for (; iw + w <= s.in_w; iw += w)
        backward_input_pixels<T, static_cast<int>(w)>(s, plane, cols, ih, iw, filter, dx + ih * s.in_w + iw);
      // The rest of a row as one more full block, ending at its end: pixels one at a time would
      // each wait on a single chain of FMAs (a 28-wide row took 3x the time of its first 16).
      if (iw < s.in_w && s.in_w >= w) {
        iw = s.in_w - w;
        backward_input_pixels<T, static_cast<int>(w)>(s, plane, cols, ih, iw, filter, dx + ih * s.in_w + iw);
        continue;
      }
      for (; iw < s.in_w; ++iw) backward_input_pixels<T, 1>(s, plane, cols, ih, iw, filter, dx + ih * s.in_w + iw);
    }
  });
}

}  // namespace fluxion::detail::kernels::conv_detail
