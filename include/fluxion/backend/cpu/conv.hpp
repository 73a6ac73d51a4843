// 2-D convolution on the CPU in TensorFlow's layouts: input NHWC, filters HWIO (KH, KW, C_in, C_out),
// output NHWC. Forward, gradient with respect to the input and gradient with respect to the
// filters; fx::conv2d and its vector-Jacobian products call these.
//
//   using namespace fluxion::detail::kernels;
//   auto s = conv2d_tf_shape(/*batch=*/64, 28, 28, 1, /*filter=*/5, 5, /*out_c=*/32, padding_mode::same);
//   conv2d_forward<float>(s, x, w, y, {.bias = b, .act = activation::relu});
//   conv2d_backward_input<float>(s, dy, w, dx);
//   conv2d_backward_filter<float>(s, x, dy, dw);
//
// Algorithms, as measured on AVX-512 (Zen 4, 1 thread; bench/conv.bench.cpp, tutorial convnet at
// batch 64):
//   - Winograd F(2x2, 5x5) (detail/conv_winograd.hpp) for 5x5 filters at stride 1 and dilation 1 with
//     at least 16 input channels and output channels in whole GEMM tiles, forward and input
//     gradient: 36 instead of 100 multiplications a channel pair. conv 14x14x32 -> 64, 5x5: forward
//     11.7 -> 7.5 ms, input gradient 11.7 -> 6.8-7.9 ms (the direct kernels below already ran at 94% of
//     the FMA peak). Float results differ from the direct sum by about 1e-6 of the output's scale.
//   - direct kernels (detail/conv_direct.hpp) wherever dilation_w == 1, the channels that a tile
//     vectorizes are a multiple of 2 vectors (32 floats) and (forward, input gradient) rows are long
//     enough for 14-pixel tiles: the register tile reads a zero-bordered copy of one image instead
//     of im2col columns. Whole 14-row tiles alone took the im2col input gradient from 20.8 to 15 ms.
//     conv 14x14x32 -> 64, 5x5: forward 12.8 -> 11.7 ms, input gradient (stride 1) 20.8 -> 11.9 ms,
//     filter gradient 15.5 -> 12.0 ms, i.e. 92-96% of the FMA peak; the 28x28x1 -> 32 forward
//     1.28 -> 0.79 ms and filter gradient 3.2-4.5 -> 1.0 ms (then 0.9 ms with a 5-row tile: runs of
//     at most 6 (kw, c_in) values get a tile of exactly that many rows).
//   - single-channel input (detail/conv_single_channel.hpp): direct input gradient at stride 1
//     (output channels are reduced per pixel, so the channel tile above does not apply), and the
//     forward pass where rows are too short for the direct tile.
//   - otherwise im2col plus the packed GEMM:
//       forward      Y (pixels x C_out)    = columns(X) (pixels x KH*KW*C_in) * W
//       input grad   dX (pixels x C_in)    = columns(dY) (input pixels x KH*KW*C_out) * W' (gather;
//                                          W' is W with each (kh, kw) slice transposed), or
//                                          dY * W^T then col2im per image (scatter), chosen by data
//                                          moved
//       filter grad  dW (KH*KW*C_in x C_out) = columns(X)^T * dY, reduced over fixed chunks of output
//                                          pixels whose partial sums are added in chunk order.
//     Row blocks of columns are built per task, in whole register tiles, and stay in cache; the
//     filter is packed once per call.
// Work is split into blocks whose size depends only on the shape, or (direct filter gradient) into
// tiles that each sum every pixel in one order, so results are bitwise identical for any thread
// count.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "detail/conv_direct.hpp"
#include "detail/conv_single_channel.hpp"
#include "detail/conv_winograd.hpp"
#include "detail/scratch_buffer.hpp"
#include "detail/simd_ops.hpp"
#include "detail/window_geometry.hpp"
#include "gemm.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::kernels {

/// Sizes of one convolution. Padding is explicit (rows above, columns left); the output size
/// implies the padding below and right. conv2d_tf_shape fills it from TF's `same`/`valid`.
struct conv2d_shape {
  index_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  index_t filter_h = 1, filter_w = 1, out_c = 0;
  index_t stride_h = 1, stride_w = 1;
  index_t dilation_h = 1, dilation_w = 1;
  index_t pad_top = 0, pad_left = 0;
  index_t out_h = 0, out_w = 0;

  index_t input_size() const { return batch * in_h * in_w * in_c; }
  index_t filter_size() const { return filter_h * filter_w * in_c * out_c; }
  index_t output_size() const { return batch * out_h * out_w * out_c; }
};

inline conv2d_shape conv2d_tf_shape(index_t batch, index_t in_h, index_t in_w, index_t in_c, index_t filter_h,
                                    index_t filter_w, index_t out_c, padding_mode padding, index_t stride_h = 1,
                                    index_t stride_w = 1, index_t dilation_h = 1, index_t dilation_w = 1) {
  const window_extent h = tf_window("conv2d", in_h, filter_h, stride_h, dilation_h, padding);
  const window_extent w = tf_window("conv2d", in_w, filter_w, stride_w, dilation_w, padding);
  return {batch,    in_h,       in_w,       in_c,         filter_h,     filter_w, out_c, stride_h,
          stride_w, dilation_h, dilation_w, h.pad_before, w.pad_before, h.out,    w.out};
}

namespace conv_detail {

inline void check_shape(const char* op, const conv2d_shape& s) {
  auto v = [](const char* name, index_t x) { return std::string(name) + " = " + std::to_string(x); };
  auto require = [&](bool ok, const char* name, index_t x, const char* what) {
    if (!ok) throw invalid_argument(std::string(op) + ": " + v(name, x) + " " + what);
  };
  require(s.batch >= 0, "batch", s.batch, "is negative");
  require(s.in_h >= 0, "in_h", s.in_h, "is negative");
  require(s.in_w >= 0, "in_w", s.in_w, "is negative");
  require(s.in_c >= 0, "in_c", s.in_c, "is negative");
  require(s.out_c >= 0, "out_c", s.out_c, "is negative");
  require(s.filter_h >= 1, "filter_h", s.filter_h, "must be at least 1");
  require(s.filter_w >= 1, "filter_w", s.filter_w, "must be at least 1");
  require(s.stride_h >= 1, "stride_h", s.stride_h, "must be at least 1");
  require(s.stride_w >= 1, "stride_w", s.stride_w, "must be at least 1");
  require(s.dilation_h >= 1, "dilation_h", s.dilation_h, "must be at least 1");
  require(s.dilation_w >= 1, "dilation_w", s.dilation_w, "must be at least 1");
  require(s.pad_top >= 0, "pad_top", s.pad_top, "is negative");
  require(s.pad_left >= 0, "pad_left", s.pad_left, "is negative");
  require(s.out_h >= 0, "out_h", s.out_h, "is negative");
  require(s.out_w >= 0, "out_w", s.out_w, "is negative");
}

// Row blocks of about this many column elements stay in L2 next to the packed filter.
inline constexpr index_t block_elements = 1 << 15;

// Whole register tiles: a block ending in a partial tile repacks that tile's rows on every call.
template <class T>
index_t block_rows(index_t k) {
  constexpr index_t mr = gemm_kernel_traits<T>::mr;
  return std::clamp<index_t>((block_elements / std::max<index_t>(k, 1) + mr - 1) / mr * mr, 2 * mr, 1024 / mr * mr);
}

// The input gradient scatters (fewer, but read-modify-write, column elements) or gathers.
inline int input_grad_method = 0;  // 0: choose, 1: gather, 2: scatter (for measurements)
inline bool use_scatter(const conv2d_shape& s) {
  if (input_grad_method != 0) return input_grad_method == 2;
  return s.batch >= 2 && 2 * s.out_h * s.out_w * s.in_c < s.in_h * s.in_w * s.out_c;
}

inline bool is_pointwise(const conv2d_shape& s) {
  return s.filter_h == 1 && s.filter_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_top == 0 &&
         s.pad_left == 0 && s.out_h == s.in_h && s.out_w == s.in_w;
}

// Runs are short (a few channels): a library call per run would cost more than the copy.
template <class T>
FLUXION_ALWAYS_INLINE void copy_run(const T* FLUXION_RESTRICT src, index_t n, T* FLUXION_RESTRICT dst) {
  if (n >= 64) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
    return;
  }
  for (index_t i = 0; i < n; ++i) dst[i] = src[i];
}

template <class T>
FLUXION_ALWAYS_INLINE void zero_run(index_t n, T* dst) {
  for (index_t i = 0; i < n; ++i) dst[i] = T(0);
}

/// Rows [r0, r0 + rows) of columns(X): row (n, oh, ow) holds the window (kh, kw, ci) of the input.
template <class T>
void im2col(const conv2d_shape& s, const T* x, index_t r0, index_t rows, T* cols) {
  const index_t k = s.filter_h * s.filter_w * s.in_c, hw = s.out_h * s.out_w, c = s.in_c;
  const index_t tap_row = s.filter_w * c;
  for (index_t r = 0; r < rows; ++r) {
    const index_t pixel = r0 + r, n = pixel / hw, oh = pixel % hw / s.out_w, ow = pixel % s.out_w;
    T* dst = cols + r * k;
    const index_t iw0 = ow * s.stride_w - s.pad_left;
    // Taps kw in [kw0, kw1) fall inside the input row.
    index_t kw0 = 0, kw1 = s.filter_w;
    while (kw0 < kw1 && iw0 + kw0 * s.dilation_w < 0) ++kw0;
    while (kw1 > kw0 && iw0 + (kw1 - 1) * s.dilation_w >= s.in_w) --kw1;
    for (index_t kh = 0; kh < s.filter_h; ++kh, dst += tap_row) {
      const index_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
      if (ih < 0 || ih >= s.in_h || kw0 == kw1) {
        zero_run(tap_row, dst);
        continue;
      }
      const T* row = x + ((n * s.in_h + ih) * s.in_w) * c;
      zero_run(kw0 * c, dst);
      if (s.dilation_w == 1)  // consecutive taps are consecutive pixels: one run
        copy_run(row + (iw0 + kw0) * c, (kw1 - kw0) * c, dst + kw0 * c);
      else
        for (index_t kw = kw0; kw < kw1; ++kw) copy_run(row + (iw0 + kw * s.dilation_w) * c, c, dst + kw * c);
      zero_run((s.filter_w - kw1) * c, dst + kw1 * c);
    }
  }
}

/// Rows [r0, r0 + rows) of columns(dY) for the input gradient: row (n, ih, iw) holds, for each
/// (kh, kw), the output gradient at the position whose window put tap (kh, kw) on (ih, iw).
template <class T>
void im2col_transposed(const conv2d_shape& s, const T* dy, index_t r0, index_t rows, T* cols) {
  const index_t k = s.filter_h * s.filter_w * s.out_c, hw = s.in_h * s.in_w;
  for (index_t r = 0; r < rows; ++r) {
    const index_t pixel = r0 + r, n = pixel / hw, ih = pixel % hw / s.in_w, iw = pixel % s.in_w;
    T* dst = cols + r * k;
    for (index_t kh = 0; kh < s.filter_h; ++kh) {
      const index_t oh_scaled = ih + s.pad_top - kh * s.dilation_h;
      const index_t oh = oh_scaled / s.stride_h;
      if (oh_scaled < 0 || oh_scaled % s.stride_h != 0 || oh >= s.out_h) {
        zero_run(s.filter_w * s.out_c, dst);
        dst += s.filter_w * s.out_c;
        continue;
      }
      const T* row = dy + ((n * s.out_h + oh) * s.out_w) * s.out_c;
      for (index_t kw = 0; kw < s.filter_w; ++kw, dst += s.out_c) {
        const index_t ow_scaled = iw + s.pad_left - kw * s.dilation_w;
        const index_t ow = ow_scaled / s.stride_w;
        if (ow_scaled < 0 || ow_scaled % s.stride_w != 0 || ow >= s.out_w)
          zero_run(s.out_c, dst);
        else
          copy_run(row + ow * s.out_c, s.out_c, dst);
      }
    }
  }
}

/// C (rows x n) = A (rows x k, from make_rows) * B for many row blocks, B packed once.
template <class T, class MakeRows>
void blocked_product(index_t rows_total, index_t k, index_t n, const T* b, index_t ldb, bool tb, T* c,
                     const gemm_epilogue<T>& ep, MakeRows&& make_rows) {
  using namespace gemm_detail;
  problem<T> p{false, tb, rows_total, n, k, T(1), nullptr, k, b, ldb, T(0), c, n, ep};
  const index_t block = block_rows<T>(k), tasks = ceil_div(rows_total, block);
  const bool parallel = 2.0 * rows_total * n * k >= min_parallel_flops;
  const bool dot = uses_dot_kernel(p);
  T* bp = dot ? nullptr : scratch<T, scratch_slot::conv_packed>(static_cast<std::size_t>(packed_b_size<T>(k, n)));
  auto* flags =
      scratch<std::int32_t, scratch_slot::conv_flags>(static_cast<std::size_t>(packed_b<T>::flag_count(k, n)));
  const packed_b<T> packed(p, bp, flags);
  run_tasks<T>(parallel, tasks, [&](index_t t) {
    const index_t r0 = t * block, rows = std::min(block, rows_total - r0);
    problem<T> q = p;
    q.m = rows;
    q.a = make_rows(r0, rows);
    q.c = c + r0 * n;
    if (dot)
      gemm_unchecked(q, false);
    else
      rows_with_packed_b(q, packed, 0, rows, 0, n);
  });
}

}  // namespace conv_detail

/// output (N, OH, OW, C_out) = act(conv(input, filter) + bias); `epilogue.bias` has C_out values.
template <gemm_scalar T>
void conv2d_forward(const conv2d_shape& s, const T* input, const T* filter, T* output,
                    const gemm_epilogue<T>& epilogue = {}) {
  conv_detail::check_shape("conv2d_forward", s);
  const index_t pixels = s.batch * s.out_h * s.out_w, k = s.filter_h * s.filter_w * s.in_c;
  if (pixels == 0 || s.out_c == 0) return;
  if (k == 0) {
    gemm_detail::scale_only(pixels, s.out_c, T(0), output, s.out_c, epilogue);
    return;
  }
  if (conv_detail::is_pointwise(s)) {  // the columns are the input itself
    gemm_detail::gemm_unchecked<T>(
        {false, false, pixels, s.out_c, k, T(1), input, k, filter, s.out_c, T(0), output, s.out_c, epilogue}, true);
    return;
  }
  if (conv_detail::winograd_applies<T>(s)) {
    conv_detail::winograd_forward(s, input, filter, output, epilogue);
    return;
  }
  if (conv_detail::direct_forward_applies<T>(s)) {
    conv_detail::direct_forward(s, input, filter, output, epilogue);
    return;
  }
  if (conv_detail::single_channel_direct<T>(s)) {
    conv_detail::single_channel_forward(s, input, filter, output, epilogue);
    return;
  }
  conv_detail::blocked_product<T>(
      pixels, k, s.out_c, filter, s.out_c, false, output, epilogue, [&](index_t r0, index_t rows) {
        T* cols = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * k));
        conv_detail::im2col(s, input, r0, rows, cols);
        return static_cast<const T*>(cols);
      });
}

/// conv2d_forward for a filter that is passed again with the same values under `filter_key`
/// (inference: the filter tensor's id, which changes with its values). Where the 5x5 Winograd
/// kernel applies it runs at any batch, on a transform of the filter made once per key
/// (conv_detail::winograd_filter_cache); otherwise this is conv2d_forward. Below Winograd's batch
/// threshold the float results then differ from conv2d_forward's by about 1e-6 of the output's
/// scale; above it they are the same, bitwise. Batch-1 14x14x32 -> 64, 5x5: see conv_winograd.hpp.
template <gemm_scalar T>
void conv2d_forward_reused_filter(const conv2d_shape& s, const T* input, const T* filter, std::uint64_t filter_key,
                                  T* output, const gemm_epilogue<T>& epilogue = {}) {
  conv_detail::check_shape("conv2d_forward", s);
  if (s.batch * s.out_h * s.out_w > 0 && s.out_c > 0 &&
      conv_detail::winograd_forward_reused(s, input, filter, filter_key, output, epilogue))
    return;
  conv2d_forward(s, input, filter, output, epilogue);
}

namespace conv_detail {

/// dX by gathering: rows of columns(dY) times W' (each tap's C_in x C_out slice transposed).
template <class T>
void backward_input_gather(const conv2d_shape& s, const T* grad_output, const T* filter, T* grad_input) {
  const index_t pixels = s.batch * s.in_h * s.in_w, taps = s.filter_h * s.filter_w, k = taps * s.out_c;
  T* wt = scratch<T, scratch_slot::conv_filters>(static_cast<std::size_t>(k * s.in_c));
  for (index_t t = 0; t < taps; ++t)
    for (index_t ci = 0; ci < s.in_c; ++ci)
      for (index_t co = 0; co < s.out_c; ++co)
        wt[(t * s.out_c + co) * s.in_c + ci] = filter[(t * s.in_c + ci) * s.out_c + co];
  blocked_product<T>(pixels, k, s.in_c, wt, s.in_c, false, grad_input, {}, [&](index_t r0, index_t rows) {
    T* cols = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * k));
    im2col_transposed(s, grad_output, r0, rows, cols);
    return static_cast<const T*>(cols);
  });
}

/// dX by scattering: dcolumns = dY * W^T, then each row is added back onto its window. Windows of
/// one image overlap, so each image is one task and adds in a fixed order.
template <class T>
void backward_input_scatter(const conv2d_shape& s, const T* grad_output, const T* filter, T* grad_input) {
  using namespace gemm_detail;
  const index_t k = s.filter_h * s.filter_w * s.in_c, c = s.in_c, image_out = s.out_h * s.out_w;
  const index_t image_in = s.in_h * s.in_w * c, block = block_rows<T>(k);
  problem<T> p{false, true, image_out, k, s.out_c, T(1), nullptr, s.out_c, filter, s.out_c, T(0), nullptr, k, {}};
  const bool dot = uses_dot_kernel(p);
  T* bp = dot ? nullptr : scratch<T, scratch_slot::conv_packed>(static_cast<std::size_t>(packed_b_size<T>(s.out_c, k)));
  auto* flags =
      scratch<std::int32_t, scratch_slot::conv_flags>(static_cast<std::size_t>(packed_b<T>::flag_count(s.out_c, k)));
  const packed_b<T> packed(p, bp, flags);
  run_tasks<T>(2.0 * s.batch * image_out * k * s.out_c >= min_parallel_flops, s.batch, [&](index_t n) {
    T* dx = grad_input + n * image_in;
    std::fill_n(dx, image_in, T(0));
    T* cols = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(std::min(block, image_out) * k));
    for (index_t r0 = 0; r0 < image_out; r0 += block) {
      const index_t rows = std::min(block, image_out - r0);
      problem<T> q = p;
      q.m = rows;
      q.a = grad_output + (n * image_out + r0) * s.out_c;
      q.c = cols;
      if (dot)
        gemm_unchecked(q, false);
      else
        rows_with_packed_b(q, packed, 0, rows, 0, k);
      for (index_t r = 0; r < rows; ++r) {
        const index_t oh = (r0 + r) / s.out_w, ow = (r0 + r) % s.out_w;
        const T* src = cols + r * k;
        for (index_t kh = 0; kh < s.filter_h; ++kh) {
          const index_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
          if (ih < 0 || ih >= s.in_h) continue;
          for (index_t kw = 0; kw < s.filter_w; ++kw) {
            const index_t iw = ow * s.stride_w - s.pad_left + kw * s.dilation_w;
            if (iw < 0 || iw >= s.in_w) continue;
            T* d = dx + (ih * s.in_w + iw) * c;
            const T* g = src + (kh * s.filter_w + kw) * c;
            add_arrays(d, d, g, c);  // in vectors at -O2 too (the rows may overlap, as far as g++ knows)
          }
        }
      }
    }
  });
}

}  // namespace conv_detail

/// grad_input (N, H, W, C_in) = the gradient of sum(conv(input, filter) * grad_output) w.r.t. input.
template <gemm_scalar T>
void conv2d_backward_input(const conv2d_shape& s, const T* grad_output, const T* filter, T* grad_input) {
  conv_detail::check_shape("conv2d_backward_input", s);
  const index_t pixels = s.batch * s.in_h * s.in_w, k = s.filter_h * s.filter_w * s.out_c;
  if (pixels == 0 || s.in_c == 0) return;
  if (k == 0 || s.out_h == 0 || s.out_w == 0) {
    std::fill_n(grad_input, pixels * s.in_c, T(0));
    return;
  }
  if (conv_detail::single_channel_direct<T>(s) && s.stride_h == 1 && s.stride_w == 1)
    conv_detail::single_channel_backward_input(s, grad_output, filter, grad_input);
  else if (conv_detail::winograd_backward_input_applies<T>(s))
    conv_detail::winograd_backward_input(s, grad_output, filter, grad_input);
  else if (conv_detail::direct_backward_input_applies<T>(s))
    conv_detail::direct_backward_input(s, grad_output, filter, grad_input);
  else if (conv_detail::use_scatter(s))
    conv_detail::backward_input_scatter(s, grad_output, filter, grad_input);
  else
    conv_detail::backward_input_gather(s, grad_output, filter, grad_input);
}

/// grad_filter (KH, KW, C_in, C_out) = the gradient of sum(conv(input, filter) * grad_output) w.r.t. filter.
template <gemm_scalar T>
void conv2d_backward_filter(const conv2d_shape& s, const T* input, const T* grad_output, T* grad_filter) {
  using namespace gemm_detail;
  conv_detail::check_shape("conv2d_backward_filter", s);
  const index_t pixels = s.batch * s.out_h * s.out_w, k = s.filter_h * s.filter_w * s.in_c, n = s.out_c;
  if (k == 0 || n == 0) return;
  if (pixels == 0) {
    std::fill_n(grad_filter, k * n, T(0));
    return;
  }
  if (!conv_detail::is_pointwise(s) && conv_detail::direct_backward_filter_applies<T>(s)) {
    conv_detail::direct_backward_filter(s, input, grad_output, grad_filter);
    return;
  }
  // Pixels are summed in fixed chunks (in parallel), and the chunks' partial sums in chunk order.
  constexpr index_t chunk = 1024;
  const index_t chunks = ceil_div(pixels, chunk),
                sub = std::clamp<index_t>(2 * conv_detail::block_elements / k, 64, chunk);
  const bool pointwise = conv_detail::is_pointwise(s);
  T* partials =
      chunks == 1 ? grad_filter : scratch<T, scratch_slot::conv_partials>(static_cast<std::size_t>(chunks * k * n));
  run_tasks<T>(2.0 * pixels * k * n >= min_parallel_flops, chunks, [&](index_t c) {
    T* out = partials + c * k * n;
    const index_t end = std::min(pixels, (c + 1) * chunk);
    for (index_t r0 = c * chunk; r0 < end; r0 += sub) {
      const index_t rows = std::min(sub, end - r0);
      const T* cols = input + r0 * k;
      if (!pointwise) {
        T* buffer = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(rows * k));
        conv_detail::im2col(s, input, r0, rows, buffer);
        cols = buffer;
      }
      gemm_unchecked<T>(
          {true, false, k, n, rows, T(1), cols, k, grad_output + r0 * n, n, r0 == c * chunk ? T(0) : T(1), out, n, {}},
          false);
    }
  });
  if (chunks == 1) return;
  const index_t total = k * n;
  constexpr index_t span = 4096;
  run_tasks<T>(total * chunks >= (1 << 18), ceil_div(total, span), [&](index_t t) {
    const index_t e0 = t * span, e1 = std::min(total, e0 + span);
    for (index_t e = e0; e < e1; ++e) grad_filter[e] = partials[e];
    for (index_t c = 1; c < chunks; ++c)
      for (index_t e = e0; e < e1; ++e) grad_filter[e] += partials[c * total + e];
  });
}

}  // namespace fluxion::detail::kernels
