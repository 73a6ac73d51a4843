// Depthwise 2-D convolution on the CPU in TensorFlow's layouts (tf.nn.depthwise_conv2d): input
// NHWC, filters (KH, KW, C, M), output NHWC with C * M channels, output channel c * M + j being
// input channel c convolved with filter (., ., c, j). Forward, gradient with respect to the input
// and gradient with respect to the filters; fx::depthwise_conv2d and its vector-Jacobian products
// call these.
//
//   using namespace fluxion::detail::kernels;
//   auto s = depthwise2d_tf_shape(/*batch=*/64, 32, 32, /*channels=*/64, /*filter=*/3, 3, /*multiplier=*/1,
//                                 padding_mode::same);
//   depthwise_conv2d_forward<float>(s, x, w, y);
//   depthwise_conv2d_backward_input<float>(s, dy, w, dx);
//   depthwise_conv2d_backward_filter<float>(s, x, dy, dw);
//
// Each output element reads only its own channel, so there is no reduction over channels for a
// GEMM to do: the kernels are direct loops that vectorize over channels (NHWC keeps them
// contiguous) and keep each vector of sums in a register over the window's taps.
//   - forward: one task per output row (n, oh); each output pixel sums its taps in (kh, kw) order;
//   - input gradient: a gather, one task per input row (n, ih); each input pixel sums the taps
//     that reach it, in (kh, kw) order, then (multiplier > 1) over j;
//   - at stride 1 and dilation 1 with filters 3, 5 or 7 wide (multiplier 1), both slide the window
//     along the row (slide_block): each source vector is loaded once for all the outputs it
//     reaches, in the same order of taps, so the sums are the same bits;
//   - filter gradient: the output rows are cut into chunks whose size depends only on the shape;
//     each chunk goes through its rows in order, each row adding its products into the taps it
//     reaches of the chunk's own partial filter, and the partials are added in chunk order.
// With a multiplier of 1 (MobileNet's, and Keras's default) every loop runs on xsimd vectors of
// channels; other multipliers run the same order in scalars. Results are bitwise identical for
// any thread count.
#pragma once

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "detail/gemm_micro_kernel.hpp"  // FLUXION_ALWAYS_INLINE_LAMBDA
#include "detail/simd_ops.hpp"
#include "conv.hpp"  // conv2d_shape's checks
#include "detail/window_geometry.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::kernels {

/// Sizes of one depthwise convolution. Padding is explicit (rows above, columns left); the output
/// size implies the padding below and right. depthwise2d_tf_shape fills it from TF's `same`/`valid`.
struct depthwise2d_shape {
  index_t batch = 0, in_h = 0, in_w = 0, channels = 0;
  index_t filter_h = 1, filter_w = 1, multiplier = 1;
  index_t stride_h = 1, stride_w = 1;
  index_t dilation_h = 1, dilation_w = 1;
  index_t pad_top = 0, pad_left = 0;
  index_t out_h = 0, out_w = 0;

  index_t out_c() const { return channels * multiplier; }
  index_t input_size() const { return batch * in_h * in_w * channels; }
  index_t filter_size() const { return filter_h * filter_w * channels * multiplier; }
  index_t output_size() const { return batch * out_h * out_w * out_c(); }
};

inline depthwise2d_shape depthwise2d_tf_shape(index_t batch, index_t in_h, index_t in_w, index_t channels,
                                              index_t filter_h, index_t filter_w, index_t multiplier,
                                              padding_mode padding, index_t stride_h = 1, index_t stride_w = 1,
                                              index_t dilation_h = 1, index_t dilation_w = 1) {
  const window_extent h = tf_window("depthwise_conv2d", in_h, filter_h, stride_h, dilation_h, padding);
  const window_extent w = tf_window("depthwise_conv2d", in_w, filter_w, stride_w, dilation_w, padding);
  return {batch,      in_h,       in_w,         channels,     filter_h, filter_w, multiplier, stride_h,
          stride_w,   dilation_h, dilation_w,   h.pad_before, w.pad_before, h.out, w.out};
}

// The sliding window's kernels are compiled as at -O3 by g++ whatever the program's level: at -O2
// (the README's flags) g++ 12 left slide_block's accumulators on the stack, through every way of
// writing the unrolled loops tried (loops unrolled on request, folds over index sequences), and the
// passes took 1.5-1.7x their -O3 time. -O3 unrolls the outer loops early enough for the
// accumulators to become registers. Other compilers get no attribute.
#if defined(__GNUC__) && !defined(__clang__)
#define FLUXION_DEPTHWISE_O3 __attribute__((optimize("O3")))
#else
#define FLUXION_DEPTHWISE_O3
#endif

namespace depthwise_detail {

/// conv2d's checks of the sizes (the depthwise output has channels * multiplier channels), and the
/// multiplier's.
inline void check_shape(const char* op, const depthwise2d_shape& s) {
  if (s.multiplier < 1)
    throw invalid_argument(std::string(op) + ": multiplier = " + std::to_string(s.multiplier) + " must be at least 1");
  conv_detail::check_shape(op, {s.batch, s.in_h, s.in_w, s.channels, s.filter_h, s.filter_w, s.out_c(), s.stride_h,
                                s.stride_w, s.dilation_h, s.dilation_w, s.pad_top, s.pad_left, s.out_h, s.out_w});
}

// Loops with fewer elements than this run on the calling thread.
inline constexpr index_t min_parallel_elements = 1 << 15;

template <class Task>
void run_tasks(index_t tasks, index_t elements, Task&& task) {
  if (elements >= min_parallel_elements) parallel_for(tasks, task);
  else
    for (index_t t = 0; t < tasks; ++t) task(t);
}

struct tap {
  index_t k, at;
};
/// For each position p of one axis, its taps: forward, the (tap, input position) pairs that reach
/// output p; backward, the (tap, output position) pairs through which input p reaches an output.
/// Built once per call.
class tap_table {
 public:
  tap_table(bool forward, index_t positions, index_t stride, index_t pad, index_t dilation, index_t filter,
            index_t other)
      : m_filter(filter), m_taps(static_cast<std::size_t>(positions * filter)),
        m_count(static_cast<std::size_t>(positions)) {
    for (index_t p = 0; p < positions; ++p) {
      index_t n = 0;
      for (index_t k = 0; k < filter; ++k) {
        if (forward) {
          const index_t i = p * stride - pad + k * dilation;
          if (i >= 0 && i < other) m_taps[static_cast<std::size_t>(p * filter + n++)] = {k, i};
        } else {
          const index_t t = p + pad - k * dilation;
          if (t >= 0 && t % stride == 0 && t / stride < other) m_taps[static_cast<std::size_t>(p * filter + n++)] = {k, t / stride};
        }
      }
      m_count[static_cast<std::size_t>(p)] = n;
    }
  }
  const tap* at(index_t p) const { return m_taps.data() + p * m_filter; }
  index_t count(index_t p) const { return m_count[static_cast<std::size_t>(p)]; }

 private:
  index_t m_filter;
  std::vector<tap> m_taps;
  std::vector<index_t> m_count;
};

/// Whether a vector of T is half a 64-byte cache line (AVX2's floats and doubles): there, where a
/// pixel's channels take a multiple of 2 KiB, slide_row reads two vectors at once. (sum_interior's
/// blocks of two vectors made no difference at stride 2, 14x14x512 on AVX2: 1800-2488 us against
/// 1872-2461.)
template <class T>
inline constexpr bool half_cache_line = simd_ops<T>::width * static_cast<index_t>(sizeof(T)) == 32;

/// out[ch] = (Accumulate ? out[ch] : 0) + the sum over terms t < count, in order, of a(t)[ch] *
/// b(t)[ch], for ch < c. Four vectors of channels at a time keep four independent chains of fused
/// multiply-adds in flight (one chain waits on each FMA's latency: 2.4x slower on MobileNet's
/// 14x14x512 layer).
template <bool Accumulate, class T, class A, class B>
FLUXION_ALWAYS_INLINE void sum_products(index_t c, index_t count, A&& a, B&& b, T* out) {
  using V = simd_ops<T>;
  constexpr index_t w = V::width;
  auto first = [&](auto ops, index_t at) {
    using O = decltype(ops);
    if constexpr (Accumulate) return O::loadu(out + at);
    else return O::splat(T(0));
  };
  index_t ch = 0;
  if constexpr (w > 1) {
    for (; ch + 4 * w <= c; ch += 4 * w) {
      auto s0 = first(V{}, ch), s1 = first(V{}, ch + w), s2 = first(V{}, ch + 2 * w), s3 = first(V{}, ch + 3 * w);
      for (index_t t = 0; t < count; ++t) {
        const T* pa = a(t) + ch;
        const T* pb = b(t) + ch;
        s0 = V::fma(V::loadu(pa), V::loadu(pb), s0);
        s1 = V::fma(V::loadu(pa + w), V::loadu(pb + w), s1);
        s2 = V::fma(V::loadu(pa + 2 * w), V::loadu(pb + 2 * w), s2);
        s3 = V::fma(V::loadu(pa + 3 * w), V::loadu(pb + 3 * w), s3);
      }
      V::storeu(out + ch, s0);
      V::storeu(out + ch + w, s1);
      V::storeu(out + ch + 2 * w, s2);
      V::storeu(out + ch + 3 * w, s3);
    }
  }
  for_each_channel_chunk<T>(c - ch, [&](auto ops, index_t k) {
    using O = decltype(ops);
    auto acc = first(ops, ch + k);
    for (index_t t = 0; t < count; ++t) acc = O::fma(O::loadu(a(t) + ch + k), O::loadu(b(t) + ch + k), acc);
    O::storeu(out + ch + k, acc);
  });
}

/// Pixels of one row whose taps along the row are the same range [kw0, kw1) (the interior, where
/// every tap of the filter's width lies inside the input, or one pixel at the border): out[p] (at
/// out + p * c) for p in [p0, p1) is the sum over taps (a < rows, kw0 <= kw < kw1), in that order,
/// of src[a][(step * p + base + kw * spacing) * c + ch] * w[a][kw * c + ch]. Four vectors of
/// channels at a time (four chains of fused multiply-adds in flight: one chain waits on each FMA's
/// latency), and within them four pixels of one vector at a time: each weight vector is loaded
/// once for four pixels, and the few rows of a vector of channels stay in L1.
template <class T>
void sum_interior(index_t c, index_t p0, index_t p1, index_t step, index_t base, index_t spacing, index_t kw0,
                  index_t kw1, index_t rows, const T* const* src, const T* const* w, T* out) {
  // P pixels by V vectors of channels: P * V independent chains of fused multiply-adds.
  auto block = [&]<int P, int V>(auto ops, index_t ch, index_t p) FLUXION_ALWAYS_INLINE_LAMBDA {
    using O = decltype(ops);
    constexpr index_t lanes = O::width;
    // The loops over P and V are unrolled on request: g++'s -O2 (the README's flags) leaves them
    // rolled, the accumulators go to the stack, and the pass took 2-3.6x its -O3 time.
    typename O::batch acc[P][V];
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[i][v] = O::splat(T(0));
    for (index_t a = 0; a < rows; ++a)
      for (index_t kw = kw0; kw < kw1; ++kw) {
        typename O::batch wv[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) wv[v] = O::loadu(w[a] + kw * c + ch + v * lanes);
        const T* sp = src[a] + (step * p + base + kw * spacing) * c + ch;
#pragma GCC unroll 4
        for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
          for (int v = 0; v < V; ++v) acc[i][v] = O::fma(O::loadu(sp + i * step * c + v * lanes), wv[v], acc[i][v]);
      }
#pragma GCC unroll 4
    for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) O::storeu(out + (p + i) * c + ch + v * lanes, acc[i][v]);
  };
  // Four pixels of one vector at a time; pixels left over, four vectors of one pixel at a time.
  auto pixels = [&]<int V>(auto ops, index_t ch) FLUXION_ALWAYS_INLINE_LAMBDA {
    constexpr index_t lanes = decltype(ops)::width;
    const index_t whole = p0 + (p1 - p0) / 4 * 4;
    for (int v = 0; v < V; ++v)  // one vector's rows at a time stay in L1
      for (index_t p = p0; p < whole; p += 4) block.template operator()<4, 1>(ops, ch + v * lanes, p);
    for (index_t p = whole; p < p1; ++p) block.template operator()<1, V>(ops, ch, p);
  };
  using vector_ops = simd_ops<T>;
  constexpr index_t lanes = vector_ops::width;
  index_t ch = 0;
  if constexpr (lanes > 1)
    for (; ch + 4 * lanes <= c; ch += 4 * lanes) pixels.template operator()<4>(vector_ops{}, ch);
  for (; ch + lanes <= c; ch += lanes) pixels.template operator()<1>(vector_ops{}, ch);
  for (; ch < c; ++ch) pixels.template operator()<1>(simd_ops<T, false>{}, ch);
}

/// P outputs of one row at stride 1 and dilation 1, [p, p + P), of V neighbouring vectors of
/// channels (from ch), for a filter K taps wide: out[p + i] = the sum over tap rows a < rows, then
/// taps kw < K whose source position lies in [0, src_width), of src[a][q * c + ch] * w[a][kw * c +
/// ch], where q = q0 + i + kw, or q = q0 + i + (K - 1) - kw with Reverse (the input gradient, whose
/// taps run backwards along the source). The window slides: each source vector is loaded once and
/// meets every output of the block it reaches, with the K weight vectors held in registers, so a
/// block of P * K fused multiply-adds loads K + P + K - 1 vectors (sum_interior loads P + 1 for
/// every P of them: 1.25 loads a multiply-add at P = 4, the bound of ConvNeXt's 7x7 layer). Each
/// output still adds its taps in (a, kw) order, from zero, so the sums are bitwise those of
/// sum_interior. Only the first `valid` outputs are stored (the last block of a row).
template <int K, int P, int V, bool Reverse, class O, class T>
FLUXION_DEPTHWISE_O3 FLUXION_ALWAYS_INLINE void slide_block(index_t c, index_t ch, index_t rows, const T* const* src, const T* const* w,
                                       index_t q0, index_t src_width, index_t valid, T* out) {
  using batch = typename O::batch;
  constexpr index_t lanes = O::width;
  // Loops of constant counts: unrolled (FLUXION_DEPTHWISE_O3), every index is a constant, the
  // accumulators are registers and the tests on kw vanish.
  batch acc[P][V];
#pragma GCC unroll 16
  for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[i][v] = O::splat(T(0));
  for (index_t a = 0; a < rows; ++a) {
    batch wv[K][V];
    const T* wa = w[a] + ch;
#pragma GCC unroll 16
    for (int kw = 0; kw < K; ++kw)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[kw][v] = O::loadu(wa + kw * c + v * lanes);
    const T* row = src[a] + ch;
    // Source position q0 + j meets output i through tap kw = j - i (Reverse: i + K - 1 - j). With
    // Reverse the positions are taken from the last, so that each output's taps still come in kw
    // order.
#pragma GCC unroll 32
    for (int jj = 0; jj < P + K - 1; ++jj) {
      const int j = Reverse ? P + K - 2 - jj : jj;
      const index_t q = q0 + j;
      if (q < 0 || q >= src_width) continue;
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const batch x = O::loadu(row + q * c + v * lanes);
#pragma GCC unroll 16
        for (int i = 0; i < P; ++i) {
          const int kw = Reverse ? i + K - 1 - j : j - i;
          if (kw >= 0 && kw < K) acc[i][v] = O::fma(x, wv[kw][v], acc[i][v]);
        }
      }
    }
  }
  if (valid == P) {
#pragma GCC unroll 16
    for (int i = 0; i < P; ++i)
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) O::storeu(out + i * c + ch + v * lanes, acc[i][v]);
    return;
  }
  for (int i = 0; i < P && i < valid; ++i)
    for (int v = 0; v < V; ++v) O::storeu(out + i * c + ch + v * lanes, acc[i][v]);
}

/// One row of slide_block's, P outputs at a time, and within them every V vectors of channels, then
/// each vector and each channel left over (a block's P pixels x rows lines stay in L1 for the next
/// vectors of channels: 12-14% faster on 14x14 layers than each vector of channels along the whole
/// row). Source position of output p's tap kw: p + base + kw * spacing, spacing 1 or -1.
template <int K, int P, int V, class T>
FLUXION_DEPTHWISE_O3 void slide_row_blocks(index_t c, index_t width, index_t base, index_t spacing, index_t src_width,
                                           index_t rows, const T* const* src, const T* const* w, T* out) {
  using vector_ops = simd_ops<T>;
  constexpr index_t lanes = vector_ops::width;
  for (index_t p = 0; p < width; p += P) {
    const index_t valid = std::min<index_t>(P, width - p);
    auto block = [&]<int N, class O>(O, index_t ch) FLUXION_ALWAYS_INLINE_LAMBDA {
      if (spacing > 0)
        slide_block<K, P, N, false, O>(c, ch, rows, src, w, p + base, src_width, valid, out + p * c);
      else
        slide_block<K, P, N, true, O>(c, ch, rows, src, w, p + base - (K - 1), src_width, valid, out + p * c);
    };
    index_t ch = 0;
    if constexpr (V > 1) {  // slide_row calls it for channels that are whole blocks of V vectors
      for (; ch < c; ch += V * lanes) block.template operator()<V>(vector_ops{}, ch);
    } else {
      for (; ch + lanes <= c; ch += lanes) block.template operator()<1>(vector_ops{}, ch);
      for (; ch < c; ++ch) block.template operator()<1>(simd_ops<T, false>{}, ch);
    }
  }
}

/// slide_row_blocks with the block that fits the registers: 8 outputs of one vector of channels
/// (K + 8 + 1 vector registers, 16 at K = 7, of AVX-512's 32 and AVX2's 16). With one vector a
/// block's rows x (P + K - 1) source lines must stay in L1 until the next vector of channels reads
/// them again, which holds unless a pixel's channels take a multiple of 2 KiB (MobileNet's 512
/// floats): then those lines fall in two of L1's 64 sets, 16 ways for 30 lines. Where a vector is
/// half a line (AVX2's floats) each line was read twice from L2 (14x14x512 took 1.8x the time per
/// output of 14x14x520); there, for K = 3, a block is 4 outputs of two vectors, so each line is read
/// whole at once (elsewhere that block was 5-10% slower: more loads a multiply-add).
template <int K, class T>
void slide_row(index_t c, index_t width, index_t base, index_t spacing, index_t src_width, index_t rows,
               const T* const* src, const T* const* w, T* out) {
  if constexpr (K == 3 && half_cache_line<T>)
    if (c * static_cast<index_t>(sizeof(T)) % 2048 == 0)  // whole blocks of two vectors
      return slide_row_blocks<K, 4, 2>(c, width, base, spacing, src_width, rows, src, w, out);
  slide_row_blocks<K, 8, 1>(c, width, base, spacing, src_width, rows, src, w, out);
}

/// The positions p in [0, n) whose tap list holds every one of the filter's `width` taps: a
/// contiguous range [first, last + 1), empty where first > last.
inline std::pair<index_t, index_t> full_range(const tap_table& t, index_t n, index_t width) {
  index_t first = 0, last = n - 1;
  while (first < n && t.count(first) < width) ++first;
  while (last >= first && t.count(last) < width) --last;
  return {first, last + 1};
}

/// One row of multiplier 1 whose pixels' taps along the row are each a range of kw (the forward
/// pass; the input gradient at stride 1): the interior's all of them, four pixels at a time, each
/// border pixel on its own (sum_interior). Tap row a reads src + hs[a].at * src_row.
template <class T>
void sum_row(index_t c, const tap* hs, index_t nh, const tap_table& cols, index_t width,
             std::pair<index_t, index_t> interior, index_t step, index_t base, index_t spacing, index_t filter_w,
             const T* src, index_t src_row, index_t src_width, const T* filter, T* out) {
  std::vector<const T*> rows(static_cast<std::size_t>(nh)), w(rows.size());
  for (index_t a = 0; a < nh; ++a) {
    rows[static_cast<std::size_t>(a)] = src + hs[a].at * src_row;
    w[static_cast<std::size_t>(a)] = filter + hs[a].k * filter_w * c;
  }
  // Stride 1 and dilation 1 with the common odd widths: the sliding window.
  if (step == 1 && (spacing == 1 || spacing == -1)) {
    switch (filter_w) {
      case 3: return slide_row<3>(c, width, base, spacing, src_width, nh, rows.data(), w.data(), out);
      case 5: return slide_row<5>(c, width, base, spacing, src_width, nh, rows.data(), w.data(), out);
      case 7: return slide_row<7>(c, width, base, spacing, src_width, nh, rows.data(), w.data(), out);
      default: break;
    }
  }
  const auto [lo, hi] = interior;
  for (index_t p = 0; p < width; ++p) {
    if (p == lo && lo < hi) {
      sum_interior(c, lo, hi, step, base, spacing, 0, filter_w, nh, rows.data(), w.data(), out);
      p = hi - 1;
      continue;
    }
    const tap* ws = cols.at(p);
    const index_t nw = cols.count(p);
    const index_t kw0 = nw > 0 ? ws[0].k : 0, kw1 = nw > 0 ? ws[nw - 1].k + 1 : 0;
    sum_interior(c, p, p + 1, step, base, spacing, kw0, kw1, nh, rows.data(), w.data(), out);
  }
}

/// Chunks of output rows for the filter gradient: a size that depends only on the shape (about
/// 64K output elements, at most 64 chunks: adding up more partial filters cost MobileNet's
/// 14x14x512 layer a fifth of its time).
inline index_t rows_per_chunk(const depthwise2d_shape& s) {
  const index_t rows = s.batch * s.out_h, per_row = std::max<index_t>(s.out_w * s.out_c(), 1);
  return std::max({index_t(1), (index_t(1) << 16) / per_row, (rows + 63) / 64});
}

}  // namespace depthwise_detail

template <class T>
void depthwise_conv2d_forward(const depthwise2d_shape& s, const T* input, const T* filter, T* output) {
  namespace dd = depthwise_detail;
  dd::check_shape("depthwise_conv2d_forward", s);
  const index_t c = s.channels, m = s.multiplier, oc = s.out_c();
  if (s.output_size() == 0) return;
  const dd::tap_table rows_h(true, s.out_h, s.stride_h, s.pad_top, s.dilation_h, s.filter_h, s.in_h);
  const dd::tap_table cols_w(true, s.out_w, s.stride_w, s.pad_left, s.dilation_w, s.filter_w, s.in_w);
  const auto interior = dd::full_range(cols_w, s.out_w, s.filter_w);
  dd::run_tasks(s.batch * s.out_h, s.output_size() * s.filter_h * s.filter_w, [&](index_t row) {
    const index_t n = row / s.out_h, oh = row % s.out_h;
    const dd::tap* hs = rows_h.at(oh);
    const index_t nh = rows_h.count(oh);
    const T* x = input + n * s.in_h * s.in_w * c;
    if (m == 1) {
      dd::sum_row(c, hs, nh, cols_w, s.out_w, interior, s.stride_w, -s.pad_left, s.dilation_w, s.filter_w, x,
                  s.in_w * c, s.in_w, filter, output + (n * s.out_h + oh) * s.out_w * c);
      return;
    }
    for (index_t ow = 0; ow < s.out_w; ++ow) {
      const dd::tap* ws = cols_w.at(ow);
      const index_t nw = cols_w.count(ow);
      T* y = output + ((n * s.out_h + oh) * s.out_w + ow) * oc;
      std::fill_n(y, oc, T(0));
      for (index_t a = 0; a < nh; ++a)
        for (index_t b = 0; b < nw; ++b) {
          const T* xp = x + (hs[a].at * s.in_w + ws[b].at) * c;
          const T* wp = filter + (hs[a].k * s.filter_w + ws[b].k) * oc;
          for (index_t ch = 0; ch < c; ++ch)
            for (index_t j = 0; j < m; ++j) y[ch * m + j] = std::fma(xp[ch], wp[ch * m + j], y[ch * m + j]);
        }
    }
  });
}

template <class T>
void depthwise_conv2d_backward_input(const depthwise2d_shape& s, const T* grad_output, const T* filter,
                                     T* grad_input) {
  namespace dd = depthwise_detail;
  dd::check_shape("depthwise_conv2d_backward_input", s);
  const index_t c = s.channels, m = s.multiplier, oc = s.out_c();
  if (s.input_size() == 0) return;
  const dd::tap_table rows_h(false, s.in_h, s.stride_h, s.pad_top, s.dilation_h, s.filter_h, s.out_h);
  const dd::tap_table cols_w(false, s.in_w, s.stride_w, s.pad_left, s.dilation_w, s.filter_w, s.out_w);
  const auto interior = dd::full_range(cols_w, s.in_w, s.filter_w);
  dd::run_tasks(s.batch * s.in_h, s.input_size() * s.filter_h * s.filter_w * m, [&](index_t row) {
    const index_t n = row / s.in_h, ih = row % s.in_h;
    const dd::tap* hs = rows_h.at(ih);
    const index_t nh = rows_h.count(ih);
    const T* dy = grad_output + n * s.out_h * s.out_w * oc;
    if (m == 1 && s.stride_w == 1) {
      // At stride 1 input column iw reaches output column iw + pad - kw * dilation through tap kw,
      // for a range of kw: as the forward pass.
      dd::sum_row(c, hs, nh, cols_w, s.in_w, interior, 1, s.pad_left, -s.dilation_w, s.filter_w, dy, s.out_w * c,
                  s.out_w, filter, grad_input + (n * s.in_h + ih) * s.in_w * c);
      return;
    }
    std::vector<index_t> g_off(static_cast<std::size_t>(s.filter_h * s.filter_w)), w_off(g_off.size());
    for (index_t iw = 0; iw < s.in_w; ++iw) {
      const dd::tap* ws = cols_w.at(iw);
      const index_t nw = cols_w.count(iw);
      T* dx = grad_input + ((n * s.in_h + ih) * s.in_w + iw) * c;
      if (m == 1) {
        index_t taps = 0;
        for (index_t a = 0; a < nh; ++a)
          for (index_t b = 0; b < nw; ++b, ++taps) {
            g_off[taps] = (hs[a].at * s.out_w + ws[b].at) * c;
            w_off[taps] = (hs[a].k * s.filter_w + ws[b].k) * c;
          }
        dd::sum_products<false>(
            c, taps, [&](index_t t) { return dy + g_off[static_cast<std::size_t>(t)]; },
            [&](index_t t) { return filter + w_off[static_cast<std::size_t>(t)]; }, dx);
        continue;
      }
      for (index_t ch = 0; ch < c; ++ch) {
        T acc = T(0);
        for (index_t a = 0; a < nh; ++a)
          for (index_t b = 0; b < nw; ++b) {
            const T* g = dy + (hs[a].at * s.out_w + ws[b].at) * oc + ch * m;
            const T* wp = filter + (hs[a].k * s.filter_w + ws[b].k) * oc + ch * m;
            for (index_t j = 0; j < m; ++j) acc = std::fma(g[j], wp[j], acc);
          }
        dx[ch] = acc;
      }
    }
  });
}

template <class T>
void depthwise_conv2d_backward_filter(const depthwise2d_shape& s, const T* input, const T* grad_output,
                                      T* grad_filter) {
  namespace dd = depthwise_detail;
  dd::check_shape("depthwise_conv2d_backward_filter", s);
  const index_t c = s.channels, m = s.multiplier, oc = s.out_c(), fsize = s.filter_size();
  if (fsize == 0) return;
  const index_t rows = s.batch * s.out_h, chunk = dd::rows_per_chunk(s);
  const index_t chunks = rows == 0 ? 0 : (rows + chunk - 1) / chunk;
  if (chunks == 0) {
    std::fill_n(grad_filter, fsize, T(0));
    return;
  }
  // Chunk 0 writes the result itself; the others their own partial filters, added in order below.
  std::vector<T> partials(static_cast<std::size_t>((chunks - 1) * fsize));
  const dd::tap_table rows_h(true, s.out_h, s.stride_h, s.pad_top, s.dilation_h, s.filter_h, s.in_h);
  dd::run_tasks(chunks, s.output_size() * s.filter_h * s.filter_w, [&](index_t k) {
    T* dw = k == 0 ? grad_filter : partials.data() + (k - 1) * fsize;
    std::fill_n(dw, fsize, T(0));
    const index_t r0 = k * chunk, r1 = std::min(rows, r0 + chunk);
    // Row by row: each tap (kh, kw) the row reaches adds its products over the row's pixels into
    // vector sums held in registers, four vectors of channels at a time (adding pixel by pixel
    // into memory instead stalls on stores, 2x slower). Each filter element sums its pixels in row
    // order.
    for (index_t r = r0; r < r1; ++r) {
      const index_t n = r / s.out_h, oh = r % s.out_h;
      const dd::tap* hs = rows_h.at(oh);
      const index_t nh = rows_h.count(oh);
      const T* g = grad_output + r * s.out_w * oc;
      for (index_t a = 0; a < nh; ++a) {
        const T* xrow = input + (n * s.in_h + hs[a].at) * s.in_w * c;
        for (index_t kw = 0; kw < s.filter_w; ++kw) {
          // The outputs whose tap kw lies inside the input: iw = ow * stride - pad + kw * dilation.
          const index_t shift = kw * s.dilation_w - s.pad_left;
          const index_t ow0 = shift >= 0 ? 0 : (-shift + s.stride_w - 1) / s.stride_w;
          const index_t ow1 = s.in_w - 1 - shift < 0 ? -1 : std::min(s.out_w - 1, (s.in_w - 1 - shift) / s.stride_w);
          if (ow0 > ow1) continue;
          T* out = dw + (hs[a].k * s.filter_w + kw) * oc;
          if (m == 1) {
            // One tap over the row's pixels: out += the products, in ow order.
            const T* x0 = xrow + (ow0 * s.stride_w + shift) * c;
            const T* g0 = g + ow0 * c;
            const index_t x_step = s.stride_w * c;
            dd::sum_products<true>(
                c, ow1 - ow0 + 1, [&](index_t p) { return x0 + p * x_step; }, [&](index_t p) { return g0 + p * c; },
                out);
            continue;
          }
          for (index_t ow = ow0; ow <= ow1; ++ow) {
            const T* x = xrow + (ow * s.stride_w + shift) * c;
            const T* gp = g + ow * oc;
            for (index_t ch = 0; ch < c; ++ch)
              for (index_t j = 0; j < m; ++j) out[ch * m + j] = std::fma(x[ch], gp[ch * m + j], out[ch * m + j]);
          }
        }
      }
    }
  });
  for (index_t k = 1; k < chunks; ++k) {
    add_arrays(grad_filter, grad_filter, partials.data() + (k - 1) * fsize, fsize);
  }
}

}  // namespace fluxion::detail::kernels
