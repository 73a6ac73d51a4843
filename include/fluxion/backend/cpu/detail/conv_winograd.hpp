// Winograd convolution F(2x2, 5x5) for NHWC at stride 1 and dilation 1: each 2x2 block of output
// pixels is computed from a 6x6 block of input as Y = A^T [ (G g G^T) (.) (B^T d B) ] A, with 36
// multiplications a channel pair instead of 100. The 36 elementwise products over channels are 36
// GEMMs (tiles x C_in) * (C_in x C_out), run by the GEMM's register tile on blocks of tiles small
// enough to stay in L2.
//
//   if (winograd_applies<float>(s)) winograd_forward<float>(s, x, w, y, epilogue);
//   if (winograd_backward_input_applies<float>(s)) winograd_backward_input<float>(s, dy, w, dx);
//
// The transforms are Toom-Cook's at the points 0, 1, -1, 2, -2 and infinity (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016), with B^T's rows scaled to integers and G's
// rows divided by the same factors:
//   B^T = [4 0 -5 0 1 0; 0 4 4 -1 -1 0; 0 -4 4 1 -1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
//   G   = [1/4 0 0 0 0; 1/6 1/6 1/6 1/6 1/6; 1/6 -1/6 1/6 -1/6 1/6;
//          1/24 1/12 1/6 1/3 2/3; 1/24 -1/12 1/6 -1/3 2/3; 0 0 0 0 1]
//   A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 1]
// In float the result differs from the direct sum by about 1e-6 of the output's scale (8e-6 at
// worst over 500 random 6x6 blocks, numpy); in double by about 1e-14.
// The input gradient at stride 1 is the forward convolution of dY with the filter flipped and each
// tap's C_in x C_out slice transposed, so it runs the same code. Work is split into fixed blocks of
// tiles and each output element is computed in one order: results do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <vector>

#include "../../../core/allocator.hpp"
#include "../gemm.hpp"
#include "../thread_pool.hpp"
#include "scratch_buffer.hpp"
#include "simd_ops.hpp"

namespace fluxion::detail::kernels::conv_detail {

// 1: use Winograd where it applies and pays (winograd_min_tiles), 2: wherever it applies (tests),
// 0: never (measurements, tests).
inline int winograd_mode = 1;

// Below this many input channels the GEMMs are too short (k = C_in) to pay for the transforms.
inline constexpr index_t winograd_min_channels = 16;

struct winograd_geometry {
  index_t batch, in_h, in_w, in_c, out_h, out_w, out_c, pad_top, pad_left;
};

// Below this many 2x2 output tiles (batch x ceil(h / 2) x ceil(w / 2)) the filter transform, some 300
// operations per channel pair and redone on every call, costs more than Winograd saves: a batch-1
// 14x14x32 -> 64 layer (49 tiles) spent half its time transforming filters.
inline constexpr index_t winograd_min_tiles = 128;

/// Whether Winograd can run these channels and output size at all (any batch).
template <class T>
bool winograd_channels_fit(index_t in_c, index_t out_c, index_t out_h, index_t out_w) {
  return winograd_mode >= 1 && has_xsimd_arch && in_c >= winograd_min_channels &&
         out_c % gemm_kernel_traits<T>::nr == 0 && out_h >= 2 && out_w >= 2;
}

template <class T>
bool winograd_fits(index_t batch, index_t in_c, index_t out_c, index_t out_h, index_t out_w) {
  return winograd_channels_fit<T>(in_c, out_c, out_h, out_w) &&
         (winograd_mode == 2 || batch * ((out_h + 1) / 2) * ((out_w + 1) / 2) >= winograd_min_tiles);
}

template <class Shape>
bool is_5x5_stride_1(const Shape& s) {
  return s.filter_h == 5 && s.filter_w == 5 && s.stride_h == 1 && s.stride_w == 1 && s.dilation_h == 1 &&
         s.dilation_w == 1;
}

template <class T, class Shape>
bool winograd_applies(const Shape& s) {
  return is_5x5_stride_1(s) && winograd_fits<T>(s.batch, s.in_c, s.out_c, s.out_h, s.out_w);
}

template <class T, class Shape>
bool winograd_backward_input_applies(const Shape& s) {
  return is_5x5_stride_1(s) && winograd_fits<T>(s.batch, s.out_c, s.in_c, s.in_h, s.in_w);
}

/// o = B^T d for one column of six values (vectors or scalars).
template <class B>
FLUXION_ALWAYS_INLINE void winograd_bt(const B* d, index_t stride, B* o, index_t ostride) {
  const B d0 = d[0], d1 = d[stride], d2 = d[2 * stride], d3 = d[3 * stride], d4 = d[4 * stride], d5 = d[5 * stride];
  const B four(4), five(5), two(2);
  const B a = four * d2 - d4, b = four * d1 - d3, c = d4 - d2, e = two * (d3 - d1);
  o[0] = (four * d0 - five * d2) + d4;
  o[ostride] = a + b;
  o[2 * ostride] = a - b;
  o[3 * ostride] = c + e;
  o[4 * ostride] = c - e;
  o[5 * ostride] = (four * d1 - five * d3) + d5;
}

/// The 36 values G g G^T of one (input channel, output channel) pair, g(kh, kw) its 5x5 taps.
template <class G>
void winograd_filter_tile(G&& g, double* u) {
  static constexpr double gm[6][5] = {{1.0 / 4, 0, 0, 0, 0},
                                      {1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6, 1.0 / 6},
                                      {1.0 / 6, -1.0 / 6, 1.0 / 6, -1.0 / 6, 1.0 / 6},
                                      {1.0 / 24, 1.0 / 12, 1.0 / 6, 1.0 / 3, 2.0 / 3},
                                      {1.0 / 24, -1.0 / 12, 1.0 / 6, -1.0 / 3, 2.0 / 3},
                                      {0, 0, 0, 0, 1}};
  double taps[5][5], t[6][5];
  for (int y = 0; y < 5; ++y)
    for (int x = 0; x < 5; ++x) taps[y][x] = static_cast<double>(g(y, x));
  for (int i = 0; i < 6; ++i)
    for (int x = 0; x < 5; ++x) {
      double s = 0;
      for (int y = 0; y < 5; ++y) s += gm[i][y] * taps[y][x];
      t[i][x] = s;
    }
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) {
      double s = 0;
      for (int x = 0; x < 5; ++x) s += t[i][x] * gm[j][x];
      u[i * 6 + j] = s;
    }
}

/// V[xi][c] = (B^T d B)[xi] for one tile and all c < channels: d(y, x) is at input[origin + y * row +
/// x * pixel] (origin may be negative), zero outside rows [y0, y1) and columns [x0, x1). V[xi]
/// starts at v + xi * vs.
template <class T>
void winograd_input_tile(const T* input, index_t origin, index_t row, index_t pixel, index_t channels, int y0, int y1, int x0, int x1,
                         T* v, index_t vs) {
  for_each_channel_chunk<T>(channels, [&]<class Ops>(Ops, index_t c) FLUXION_ALWAYS_INLINE_LAMBDA {
    using batch = typename Ops::batch;
    batch d[6], e[36], o[6];
#pragma GCC unroll 6
    for (int x = 0; x < 6; ++x) {  // columns: e = B^T d
#pragma GCC unroll 6
      for (int y = 0; y < 6; ++y)
        d[y] = y >= y0 && y < y1 && x >= x0 && x < x1 ? Ops::loadu(input + (origin + y * row + x * pixel + c)) : Ops::splat(T(0));
      winograd_bt(d, 1, e + x, 6);
    }
#pragma GCC unroll 6
    for (int y = 0; y < 6; ++y) {  // rows: V = e B
      winograd_bt(e + y * 6, 1, o, 1);
#pragma GCC unroll 6
      for (int x = 0; x < 6; ++x) Ops::storeu(v + (y * 6 + x) * vs + c, o[x]);
    }
  });
}

/// out(y, x)[c] = act((A^T M A)(y, x)[c] + bias[c]) for y < rows, x < cols (each 1 or 2), c < channels:
/// M[xi] at m + xi * ms, out(y, x) at out + y * row + x * channels.
template <class T>
void winograd_output_tile(const T* m, index_t ms, index_t channels, T* out, index_t row, int rows, int cols,
                          const T* bias, bool relu) {
  for_each_channel_chunk<T>(channels, [&]<class Ops>(Ops, index_t c) FLUXION_ALWAYS_INLINE_LAMBDA {
    using batch = typename Ops::batch;
    batch r[2][6];
    const batch two(T(2));
#pragma GCC unroll 6
    for (int x = 0; x < 6; ++x) {  // r = A^T M
      const batch m0 = Ops::loadu(m + x * ms + c), m1 = Ops::loadu(m + (6 + x) * ms + c),
                  m2 = Ops::loadu(m + (12 + x) * ms + c), m3 = Ops::loadu(m + (18 + x) * ms + c),
                  m4 = Ops::loadu(m + (24 + x) * ms + c), m5 = Ops::loadu(m + (30 + x) * ms + c);
      r[0][x] = ((m0 + m1) + (m2 + m3)) + m4;
      r[1][x] = ((m1 - m2) + two * (m3 - m4)) + m5;
    }
    const batch b = bias ? Ops::loadu(bias + c) : Ops::splat(T(0));
#pragma GCC unroll 2
    for (int y = 0; y < 2; ++y) {
      if (y == rows) break;
      const batch* q = r[y];
      const batch o[2] = {((q[0] + q[1]) + (q[2] + q[3])) + q[4], ((q[1] - q[2]) + two * (q[3] - q[4])) + q[5]};
#pragma GCC unroll 2
      for (int x = 0; x < 2; ++x) {
        if (x == cols) break;
        batch v = o[x];
        if (bias) v = v + b;
        if (relu) v = Ops::relu(v);
        Ops::storeu(out + y * row + x * channels + c, v);
      }
    }
  });
}

/// U, the filter's transform: for each of the 36 positions, slivers of nr output channels (in_c x
/// nr), where filter(kh, kw, c, o) gives a tap. out_c is a multiple of the GEMM's NR.
template <class T, class Filter>
void winograd_filter_transform(index_t ic, index_t oc, Filter&& filter, T* u) {
  constexpr index_t nr = gemm_kernel_traits<T>::nr;
  const index_t slivers = oc / nr;
  gemm_detail::run_tasks<T>(ic * oc >= 1024, ic, [&](index_t c) {
    double tile[36];
    for (index_t o = 0; o < oc; ++o) {
      winograd_filter_tile([&](int y, int x) { return filter(y, x, c, o); }, tile);
      const index_t j = o / nr, lane = o % nr;
      for (index_t xi = 0; xi < 36; ++xi) u[((xi * slivers + j) * ic + c) * nr + lane] = static_cast<T>(tile[xi]);
    }
  });
}

/// out (batch, out_h, out_w, out_c) = act(correlation of in with the 5x5 filter + bias), the filter
/// given by its transform u (winograd_filter_transform).
template <class T>
void winograd_5x5_transformed(const winograd_geometry& s, const T* input, const T* u, T* output,
                              const gemm_epilogue<T>& ep) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr;
  constexpr index_t block = mr * ((28 + mr - 1) / mr);  // tiles a task transforms and multiplies at once
  const index_t ic = s.in_c, oc = s.out_c, slivers = oc / nr;
  const index_t th = (s.out_h + 1) / 2, tw = (s.out_w + 1) / 2, tiles = s.batch * th * tw;

  // V and M hold 36 matrices each; their strides are an odd number of cache lines, so that the 36
  // values of one tile do not fall into a few L1 sets (64 tiles x 64 channels: 7 KiB apart, which
  // used 4 of 64 sets and made the output transform 3x slower).
  auto odd_lines = [](index_t values) {
    constexpr index_t per_line = 64 / static_cast<index_t>(sizeof(T));
    const index_t lines = gemm_detail::ceil_div(values, per_line);
    return (lines | 1) * per_line;
  };
  const index_t vs = odd_lines(block * ic), ms = odd_lines(block * oc);
  const double flops = 2.0 * 36 * tiles * ic * oc;
  gemm_detail::run_tasks<T>(flops >= gemm_detail::min_parallel_flops, gemm_detail::ceil_div(tiles, block),
                            [&](index_t b) {
    const index_t t0 = b * block, count = std::min(block, tiles - t0);
    T* v = scratch<T, scratch_slot::conv_columns>(static_cast<std::size_t>(36 * vs));
    T* m = scratch<T, scratch_slot::conv_partials>(static_cast<std::size_t>(36 * ms));
    // Input transform: V[xi][tile][c].
    for (index_t tt = 0; tt < block; ++tt) {
      if (tt >= count) {  // the last block's missing tiles: zeros, so the register tiles stay whole
        for (index_t xi = 0; xi < 36; ++xi) std::fill_n(v + xi * vs + tt * ic, ic, T(0));
        continue;
      }
      const index_t t = t0 + tt, n = t / (th * tw), ty = t / tw % th, tx = t % tw;
      const index_t ih0 = 2 * ty - s.pad_top, iw0 = 2 * tx - s.pad_left;
      const int y0 = static_cast<int>(std::clamp<index_t>(-ih0, 0, 6)), y1 = static_cast<int>(std::clamp<index_t>(s.in_h - ih0, 0, 6));
      const int x0 = static_cast<int>(std::clamp<index_t>(-iw0, 0, 6)), x1 = static_cast<int>(std::clamp<index_t>(s.in_w - iw0, 0, 6));
      winograd_input_tile(input, ((n * s.in_h + ih0) * s.in_w + iw0) * ic, s.in_w * ic, ic, ic, y0, y1, x0, x1,
                          v + tt * ic, vs);
    }
    // 36 products M[xi] (block x oc) = V[xi] (block x ic) * U[xi] (ic x oc), V read in place.
    const tile_update<T> plain{T(1), T(0), nullptr, false};
    for (index_t xi = 0; xi < 36; ++xi)
      for (index_t j = 0; j < slivers; ++j)
        for (index_t r = 0; r < block; r += mr)
          micro_kernel<T>(ic, v + xi * vs + r * ic, ic, u + (xi * slivers + j) * ic * nr, m + xi * ms + r * oc + j * nr,
                          oc, plain);
    // Output transform: Y = A^T M A, then bias and activation.
    for (index_t tt = 0; tt < count; ++tt) {
      const index_t t = t0 + tt, n = t / (th * tw), ty = t / tw % th, tx = t % tw;
      const index_t oh0 = 2 * ty, ow0 = 2 * tx;
      winograd_output_tile(m + tt * oc, ms, oc, output + ((n * s.out_h + oh0) * s.out_w + ow0) * oc, s.out_w * oc,
                           oh0 + 1 < s.out_h ? 2 : 1, ow0 + 1 < s.out_w ? 2 : 1, ep.bias,
                           ep.act == activation::relu);
    }
  });
}

/// out (batch, out_h, out_w, out_c) = act(correlation of in with the 5x5 filter + bias), where
/// filter(kh, kw, c, o) gives a tap. out_c is a multiple of the GEMM's NR.
template <class T, class Filter>
void winograd_5x5(const winograd_geometry& s, const T* input, Filter&& filter, T* output, const gemm_epilogue<T>& ep) {
  T* u = scratch<T, scratch_slot::conv_packed>(static_cast<std::size_t>(36 * s.in_c * s.out_c));
  winograd_filter_transform<T>(s.in_c, s.out_c, std::forward<Filter>(filter), u);
  winograd_5x5_transformed<T>(s, input, u, output, ep);
}

/// Tap (kh, kw) from input channel c to output channel o of a 5x5 HWIO filter.
template <class T>
auto hwio_5x5_taps(const T* filter, index_t ic, index_t oc) {
  return [=](int kh, int kw, index_t c, index_t o) { return filter[((kh * 5 + kw) * ic + c) * oc + o]; };
}

/// output = act(conv(input, filter) + bias) for winograd_applies shapes (filters HWIO).
template <class T, class Shape>
void winograd_forward(const Shape& s, const T* input, const T* filter, T* output, const gemm_epilogue<T>& ep) {
  winograd_5x5<T>({s.batch, s.in_h, s.in_w, s.in_c, s.out_h, s.out_w, s.out_c, s.pad_top, s.pad_left}, input,
                  hwio_5x5_taps(filter, s.in_c, s.out_c), output, ep);
}

/// grad_input for winograd_backward_input_applies shapes: dY correlated with the flipped filter,
/// whose input channels are the forward pass's output channels.
template <class T, class Shape>
void winograd_backward_input(const Shape& s, const T* grad_output, const T* filter, T* grad_input) {
  const index_t ic = s.in_c, oc = s.out_c;
  winograd_5x5<T>({s.batch, s.out_h, s.out_w, oc, s.in_h, s.in_w, ic, 4 - s.pad_top, 4 - s.pad_left}, grad_output,
                  [&](int kh, int kw, index_t c, index_t o) {
                    return filter[(((4 - kh) * 5 + (4 - kw)) * ic + o) * oc + c];
                  },
                  grad_input, {});
}

/// Filter transforms kept for filters that are passed again unchanged. Inference calls a layer
/// with the same weights again and again, and at small batches the transform (some 300 operations
/// a channel pair) costs as much as the products Winograd saves: a batch-1 14x14x32 -> 64 layer
/// spent half its time on it. An entry is found by the caller's key for the filter's values (the
/// filter tensor's id: tensors are immutable, so new values come with a new id) together with the
/// filter's address and channel counts; the least recently used go beyond max_bytes. Kernel
/// scratch, like the thread-local buffers: not counted by fx::memory_stats, and emptied by
/// fx::memory::empty_cache().
template <class T>
class winograd_filter_cache {
 public:
  static constexpr std::size_t max_bytes = std::size_t{64} << 20;

  static winograd_filter_cache& instance() {
    static winograd_filter_cache cache;
    static const bool registered = (kept_host_memory::instance().add([] { instance().clear(); }), true);
    (void)registered;
    return cache;
  }
  static std::size_t transform_bytes(index_t ic, index_t oc) {
    return static_cast<std::size_t>(36 * ic * oc) * sizeof(T);
  }

  /// The transform of the HWIO filter (5 x 5 x ic x oc) known as `key`, made on a miss.
  std::shared_ptr<const T> get(std::uint64_t key, const T* filter, index_t ic, index_t oc) {
    const std::lock_guard lock(m_mutex);
    for (std::size_t i = 0; i < m_entries.size(); ++i) {
      if (m_entries[i].key == key && m_entries[i].filter == filter && m_entries[i].ic == ic && m_entries[i].oc == oc) {
        std::rotate(m_entries.begin() + static_cast<std::ptrdiff_t>(i), m_entries.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                    m_entries.end());  // most recently used last
        return m_entries.back().u;
      }
    }
    const std::size_t bytes = transform_bytes(ic, oc);
    while (!m_entries.empty() && m_bytes + bytes > max_bytes) {
      m_bytes -= transform_bytes(m_entries.front().ic, m_entries.front().oc);
      m_entries.erase(m_entries.begin());
    }
    std::shared_ptr<T> u(static_cast<T*>(::operator new(bytes, std::align_val_t{64})),
                         [](T* p) { ::operator delete(p, std::align_val_t{64}); });
    winograd_filter_transform<T>(ic, oc, hwio_5x5_taps(filter, ic, oc), u.get());
    m_entries.push_back({key, filter, ic, oc, u});
    m_bytes += bytes;
    return u;
  }
  void clear() {
    const std::lock_guard lock(m_mutex);
    m_entries.clear();
    m_bytes = 0;
  }
  std::size_t size() {
    const std::lock_guard lock(m_mutex);
    return m_entries.size();
  }

 private:
  struct entry {
    std::uint64_t key;
    const T* filter;
    index_t ic, oc;
    std::shared_ptr<const T> u;
  };
  std::mutex m_mutex;
  std::vector<entry> m_entries;
  std::size_t m_bytes = 0;
};

/// winograd_forward for a filter that will be passed again with the same values under `key`
/// (inference): the transform comes from winograd_filter_cache, so Winograd pays at any batch.
/// False, having done nothing, where it does not apply.
template <class T, class Shape>
bool winograd_forward_reused(const Shape& s, const T* input, const T* filter, std::uint64_t key, T* output,
                             const gemm_epilogue<T>& ep) {
  if (!is_5x5_stride_1(s) || !winograd_channels_fit<T>(s.in_c, s.out_c, s.out_h, s.out_w) ||
      winograd_filter_cache<T>::transform_bytes(s.in_c, s.out_c) > winograd_filter_cache<T>::max_bytes / 4)
    return false;
  const std::shared_ptr<const T> u = winograd_filter_cache<T>::instance().get(key, filter, s.in_c, s.out_c);
  winograd_5x5_transformed<T>({s.batch, s.in_h, s.in_w, s.in_c, s.out_h, s.out_w, s.out_c, s.pad_top, s.pad_left},
                              input, u.get(), output, ep);
  return true;
}

}  // namespace fluxion::detail::kernels::conv_detail
