// Direct convolution kernels for NHWC with unit filter dilation along the width: the register tile
// reads its operands from a zero-bordered copy of one image instead of from im2col columns, so no
// columns are written or read back (the copy is the image itself, a few tens of KiB in L1/L2).
//
//   if (direct_forward_applies<float>(s)) direct_forward<float>(s, x, w, y, epilogue);
//   if (direct_backward_input_applies<float>(s)) direct_backward_input<float>(s, dy, w, dx);
//   if (direct_backward_filter_applies<float>(s)) direct_backward_filter<float>(s, x, dy, dw);
//
// Forward and input gradient share one tile: MR consecutive output pixels of one row (MR = 14 with
// 32 vector registers) by NV vectors of output channels, summed over kh and, for each kh, over the
// run of (kw, c) values, which is contiguous in the bordered image when dilation_w == 1. The input
// gradient at stride 1 is the forward convolution of the bordered dY with the filter flipped and
// each tap's C_in x C_out slice transposed. The filter gradient's tile is MR rows of (kw, c_in) for
// one kh (again a contiguous run of the image) by NV vectors of output channels, summed over every
// output pixel of every image in order.
// Each output element is summed in one fixed order whichever task computes it: results do not
// depend on the thread count.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../gemm.hpp"
#include "../thread_pool.hpp"
#include "conv_single_channel.hpp"
#include "scratch_buffer.hpp"
#include "simd_ops.hpp"

namespace fluxion::detail::kernels::conv_detail {

inline int direct_mode = 1;  // 1: use these kernels where they apply, 0: never (measurements, tests)

template <class T>
struct direct_traits {
  static constexpr index_t width = simd_ops<T>::width;
  /// Rows of a tile with nv vectors of columns: accumulators, the B vectors and one broadcast fit.
  static constexpr int mr(int nv) { return (simd_register_count - nv - 1) / nv; }
  static constexpr int nv = 2;                    // forward and input gradient
  static constexpr int rows = mr(nv);             // 14 with AVX-512, 6 with AVX2
  static constexpr index_t columns = nv * width;  // output channels per tile
};

/// out rows [0, rows) of an MR x NV*w tile: sum over kh < taps_h of the run of `run` k values at
/// a + kh * row_pitch (row i of A at stride lda), times B (run * taps_h rows of NV*w, ldb apart).
template <class T, int MR, int NV>
FLUXION_ALWAYS_INLINE void direct_tile(const T* FLUXION_RESTRICT a, index_t lda, index_t taps_h, index_t row_pitch,
                                       index_t run, const T* FLUXION_RESTRICT b, index_t ldb, T* FLUXION_RESTRICT c,
                                       index_t ldc, index_t rows, const T* bias, bool relu) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  batch acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = ops::splat(T(0));
  for (index_t kh = 0; kh < taps_h; ++kh) {
    const T* ap = a + kh * row_pitch;
    for (index_t q = 0; q < run; ++q, ++ap, b += ldb) {
      batch bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = ops::loadu(b + v * w);
#pragma GCC unroll 32
      for (int i = 0; i < MR; ++i) {
        const batch av = ops::splat(ap[i * lda]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = ops::fma(av, bv[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i == rows) break;  // the tile ran past the row's end: those pixels are not stored
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      batch r = acc[i][v];
      if (bias) r = r + ops::loadu(bias + v * w);
      if (relu) r = ops::relu(r);
      ops::storeu(c + i * ldc + v * w, r);
    }
  }
}

/// An MR x NV*w tile of the filter gradient, accumulated over out_h x out_w output pixels: row i
/// of A for pixel (oh, ow) is a[oh * a_row + ow * a_col + i], B's row is b + (oh * out_w + ow) * ldb.
/// `first` starts from zero, otherwise from the tile's stored rows.
template <class T, int MR, int NV>
FLUXION_ALWAYS_INLINE void filter_tile(const T* FLUXION_RESTRICT a, index_t out_h, index_t out_w, index_t a_row,
                                       index_t a_col, const T* FLUXION_RESTRICT b, index_t ldb, T* FLUXION_RESTRICT c,
                                       index_t ldc, index_t rows, bool first) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  batch acc[MR][NV];
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = first || i >= rows ? ops::splat(T(0)) : ops::loadu(c + i * ldc + v * w);
  for (index_t oh = 0; oh < out_h; ++oh) {
    const T* ap = a + oh * a_row;
    const T* bp = b + oh * out_w * ldb;
    for (index_t ow = 0; ow < out_w; ++ow, ap += a_col, bp += ldb) {
      batch bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) bv[v] = ops::loadu(bp + v * w);
#pragma GCC unroll 32
      for (int i = 0; i < MR; ++i) {
        const batch av = ops::splat(ap[i]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[i][v] = ops::fma(av, bv[v], acc[i][v]);
      }
    }
  }
#pragma GCC unroll 32
  for (int i = 0; i < MR; ++i) {
    if (i == rows) break;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) ops::storeu(c + i * ldc + v * w, acc[i][v]);
  }
}

/// Tiles of MR pixels cover a row; the last one may run past its end. Short rows would waste most
/// of a tile: im2col and the GEMM serve those.
template <class T>
bool direct_row_fits(index_t out_w) {
  constexpr index_t mr = direct_traits<T>::rows;
  return 10 * out_w >= 7 * gemm_detail::round_up(out_w, mr);
}

template <class T, class Shape>
bool direct_forward_applies(const Shape& s) {
  using tr = direct_traits<T>;
  return direct_mode == 1 && has_xsimd_arch && s.dilation_w == 1 && s.out_c % tr::columns == 0 &&
         direct_row_fits<T>(s.out_w);
}

/// Runs `tile` over the rows of each image's bordered plane (rows x cols x c of `src`, whose h x w
/// image starts at row row0, column col0), one task per image.
template <class T, class Shape, class Tile>
void for_each_bordered_image(const Shape& s, const T* src, index_t h, index_t w, index_t c, index_t row0,
                             index_t rows, index_t col0, index_t cols, double flops, Tile&& tile) {
  gemm_detail::run_tasks<T>(flops >= gemm_detail::min_parallel_flops, s.batch, [&](index_t n) {
    T* plane = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * cols * c));
    bordered_plane(src + n * h * w * c, h, w, c, row0, rows, col0, cols, plane);
    tile(n, static_cast<const T*>(plane));
  });
}

/// output = act(conv(input, filter) + bias) for direct_forward_applies shapes.
template <class T, class Shape>
void direct_forward(const Shape& s, const T* input, const T* filter, T* output, const gemm_epilogue<T>& ep) {
  using tr = direct_traits<T>;
  constexpr index_t mr = tr::rows, nb = tr::columns;
  const index_t c = s.in_c, run = s.filter_w * c, k = s.filter_h * run, slivers = s.out_c / nb;
  const index_t tiles_w = gemm_detail::ceil_div(s.out_w, mr);
  const index_t rows = (s.out_h - 1) * s.stride_h + (s.filter_h - 1) * s.dilation_h + 1;
  const index_t cols = (tiles_w * mr - 1) * s.stride_w + s.filter_w;
  // The filter is read in place: sliver j of nb output channels is k rows out_c apart (packing it
  // into contiguous slivers cost a copy of the whole filter per call, 6% of a batch-1 conv 32 -> 64
  // 5x5 on 14 x 14, and saved nothing: each row of nb channels is two whole cache lines either way).
  const double flops = 2.0 * s.batch * s.out_h * s.out_w * k * s.out_c;
  // Output rows [oh_begin, oh_end) of image n from its bordered plane.
  auto output_rows = [&](index_t n, const T* plane, index_t oh_begin, index_t oh_end) {
    T* out = output + n * s.out_h * s.out_w * s.out_c;
    for (index_t oh = oh_begin; oh < oh_end; ++oh)
      for (index_t j = 0; j < slivers; ++j)
        for (index_t t = 0; t < tiles_w; ++t) {
          const index_t ow = t * mr;
          direct_tile<T, mr, tr::nv>(plane + (oh * s.stride_h * cols + ow * s.stride_w) * c, s.stride_w * c,
                                     s.filter_h, s.dilation_h * cols * c, run, filter + j * nb, s.out_c,
                                     out + (oh * s.out_w + ow) * s.out_c + j * nb, s.out_c,
                                     std::min(mr, s.out_w - ow), ep.bias ? ep.bias + j * nb : nullptr,
                                     ep.act == activation::relu);
        }
  };
  const bool parallel = flops >= gemm_detail::min_parallel_flops;
  const index_t threads = parallel ? get_num_threads() : 1;
  if (s.batch >= threads) {  // a task per image
    for_each_bordered_image<T>(s, input, s.in_h, s.in_w, c, -s.pad_top, rows, -s.pad_left, cols, flops,
                               [&](index_t n, const T* plane) { output_rows(n, plane, 0, s.out_h); });
    return;
  }
  // Fewer images than threads (batch-1 inference): the planes first, then bands of output rows, so
  // that every thread works (one image ran on one thread: conv 32 -> 64 5x5 on 14 x 14 took the
  // same 79 us at 1 and 2 threads).
  const index_t bands = s.out_h;  // a row per task, which the pool balances (4 bands of 3-4 rows: 47 us, rows: 42)
  const index_t plane_size = rows * cols * c;
  T* planes = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(s.batch * plane_size));
  for (index_t n = 0; n < s.batch; ++n)
    bordered_plane(input + n * s.in_h * s.in_w * c, s.in_h, s.in_w, c, -s.pad_top, rows, -s.pad_left, cols,
                   planes + n * plane_size);
  gemm_detail::run_tasks<T>(true, s.batch * bands, [&](index_t t) {
    const index_t n = t / bands, b = t % bands;
    output_rows(n, planes + n * plane_size, b * s.out_h / bands, (b + 1) * s.out_h / bands);
  });
}

template <class T, class Shape>
bool direct_backward_input_applies(const Shape& s) {
  using tr = direct_traits<T>;
  return direct_mode == 1 && has_xsimd_arch && s.dilation_w == 1 && s.stride_h == 1 && s.stride_w == 1 &&
         s.in_c % tr::columns == 0 && direct_row_fits<T>(s.in_w);
}

/// grad_input at stride 1: the bordered dY convolved with the flipped, transposed filter.
template <class T, class Shape>
void direct_backward_input(const Shape& s, const T* grad_output, const T* filter, T* grad_input) {
  using tr = direct_traits<T>;
  constexpr index_t mr = tr::rows, nb = tr::columns;
  const index_t c = s.out_c, run = s.filter_w * c, k = s.filter_h * run, slivers = s.in_c / nb;
  const index_t tiles_w = gemm_detail::ceil_div(s.in_w, mr);
  const index_t rows = s.in_h + (s.filter_h - 1) * s.dilation_h, cols = tiles_w * mr + s.filter_w - 1;
  // packed[j][(kh', kw', co)][ci - j * nb] = filter[KH-1-kh'][KW-1-kw'][ci][co].
  T* packed = scratch<T, scratch_slot::conv_packed>(static_cast<std::size_t>(k * s.in_c));
  const index_t taps = s.filter_h * s.filter_w;
  for (index_t t = 0; t < taps; ++t) {
    const T* src = filter + (taps - 1 - t) * s.in_c * c;
    for (index_t ci = 0; ci < s.in_c; ++ci) {
      T* dst = packed + ((ci / nb) * k + t * c) * nb + ci % nb;
      for (index_t co = 0; co < c; ++co) dst[co * nb] = src[ci * c + co];
    }
  }
  const double flops = 2.0 * s.batch * s.in_h * s.in_w * k * s.in_c;
  const index_t row0 = s.pad_top - (s.filter_h - 1) * s.dilation_h, col0 = s.pad_left - (s.filter_w - 1);
  for_each_bordered_image<T>(
      s, grad_output, s.out_h, s.out_w, c, row0, rows, col0, cols, flops, [&](index_t n, const T* plane) {
        T* dx = grad_input + n * s.in_h * s.in_w * s.in_c;
        for (index_t ih = 0; ih < s.in_h; ++ih)
          for (index_t j = 0; j < slivers; ++j)
            for (index_t t = 0; t < tiles_w; ++t) {
              const index_t iw = t * mr;
              direct_tile<T, mr, tr::nv>(plane + (ih * cols + iw) * c, c, s.filter_h, s.dilation_h * cols * c, run,
                                         packed + j * k * nb, nb, dx + (ih * s.in_w + iw) * s.in_c + j * nb, s.in_c,
                                         std::min(mr, s.in_w - iw), nullptr, false);
            }
      });
}

/// The filter gradient's tile: NV vectors of output channels, MR rows of (kw, c_in).
template <class T>
struct filter_tiling {
  int nv = 0, mr = 0;
};

template <class T, class Shape>
filter_tiling<T> choose_filter_tiling(const Shape& s) {
  using tr = direct_traits<T>;
  constexpr index_t w = tr::width;
  if (direct_mode != 1 || !has_xsimd_arch || s.dilation_w != 1) return {};
  if (tr::mr(4) >= 6 && s.out_c % (4 * w) == 0) return {4, tr::mr(4) >= 6 ? 6 : 0};
  // A run of at most 6 (kw, c_in) values is one tile of exactly that many rows: no idle rows.
  if (s.out_c % (2 * w) == 0) return {2, s.filter_w * s.in_c <= 6 ? static_cast<int>(s.filter_w * s.in_c) : tr::mr(2)};
  return {};
}

template <class T, class Shape>
bool direct_backward_filter_applies(const Shape& s) {
  return choose_filter_tiling<T>(s).nv != 0;
}

template <class T, int MR, int NV, class Shape>
void direct_backward_filter_tiles(const Shape& s, const T* grad_output, T* grad_filter, const T* planes,
                                  index_t plane_size, index_t cols) {
  constexpr index_t nb = NV * simd_ops<T>::width;
  const index_t c = s.in_c, run = s.filter_w * c, row_tiles = gemm_detail::ceil_div(run, MR);
  const index_t slivers = s.out_c / nb, tiles = s.filter_h * row_tiles * slivers;
  const index_t image_out = s.out_h * s.out_w * s.out_c;
  // Any split of the tiles gives the same results: each tile sums all pixels itself, in order.
  const int threads = get_num_threads();
  const double flops = 2.0 * s.batch * s.out_h * s.out_w * s.filter_h * run * s.out_c;
  const bool parallel = threads > 1 && flops >= gemm_detail::min_parallel_flops;
  const index_t tasks = parallel ? std::min<index_t>(tiles, 4 * threads) : 1;
  gemm_detail::run_tasks<T>(parallel, tasks, [&](index_t task) {
    const index_t t0 = tiles * task / tasks, t1 = tiles * (task + 1) / tasks;
    for (index_t n = 0; n < s.batch; ++n)
      for (index_t t = t0; t < t1; ++t) {
        const index_t kh = t / (row_tiles * slivers), m0 = t / slivers % row_tiles * MR, j = t % slivers;
        filter_tile<T, MR, NV>(planes + n * plane_size + kh * s.dilation_h * cols * c + m0, s.out_h, s.out_w,
                               s.stride_h * cols * c, s.stride_w * c, grad_output + n * image_out + j * nb, s.out_c,
                               grad_filter + (kh * run + m0) * s.out_c + j * nb, s.out_c, std::min<index_t>(MR, run - m0),
                               n == 0);
      }
  });
}

/// grad_filter for direct_backward_filter_applies shapes (batch >= 1).
template <class T, class Shape>
void direct_backward_filter(const Shape& s, const T* input, const T* grad_output, T* grad_filter) {
  const index_t c = s.in_c;
  const index_t rows = (s.out_h - 1) * s.stride_h + (s.filter_h - 1) * s.dilation_h + 1;
  const index_t cols = (s.out_w - 1) * s.stride_w + s.filter_w, plane_size = rows * cols * c;
  // Every image bordered once; a tile's last rows may read up to MR values past the last plane.
  constexpr index_t slack = 32;
  T* planes = scratch<T, scratch_slot::conv_partials>(static_cast<std::size_t>(s.batch * plane_size + slack));
  std::fill_n(planes + s.batch * plane_size, slack, T(0));
  gemm_detail::run_tasks<T>(s.batch * plane_size >= (1 << 16), s.batch, [&](index_t n) {
    bordered_plane(input + n * s.in_h * s.in_w * c, s.in_h, s.in_w, c, -s.pad_top, rows, -s.pad_left, cols,
                   planes + n * plane_size);
  });
  const auto tiling = choose_filter_tiling<T>(s);
  constexpr int mr2 = direct_traits<T>::mr(2);
  if (tiling.nv == 4) {
    if constexpr (direct_traits<T>::mr(4) >= 6)
      direct_backward_filter_tiles<T, 6, 4>(s, grad_output, grad_filter, planes, plane_size, cols);
  } else if (tiling.mr <= 6) {
    auto short_run = [&]<int MR>(std::integral_constant<int, MR>) {
      direct_backward_filter_tiles<T, MR, 2>(s, grad_output, grad_filter, planes, plane_size, cols);
    };
    switch (tiling.mr) {
      case 1: short_run(std::integral_constant<int, 1>{}); break;
      case 2: short_run(std::integral_constant<int, 2>{}); break;
      case 3: short_run(std::integral_constant<int, 3>{}); break;
      case 4: short_run(std::integral_constant<int, 4>{}); break;
      case 5: short_run(std::integral_constant<int, 5>{}); break;
      default: short_run(std::integral_constant<int, 6>{}); break;
    }
  } else {
    direct_backward_filter_tiles<T, mr2, 2>(s, grad_output, grad_filter, planes, plane_size, cols);
  }
}

}  // namespace fluxion::detail::kernels::conv_detail
