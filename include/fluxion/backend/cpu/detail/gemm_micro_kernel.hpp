// The GEMM register tile: an MR x NR block of C kept in SIMD registers while a packed A sliver
// (MR values per k) and a packed B sliver (NR values per k) stream through it.
//
//   using K = gemm_kernel_traits<float>;   // mr = 6, nr = 16 with AVX2; mr = 14, nr = 32 with AVX-512
//   micro_kernel<float>(kc, packed_a, packed_b, c, ldc, update);
//
// The shape follows from the register file: NV vectors of B per k, one broadcast of A, and
// MR * NV accumulators must all fit, so MR = (registers - NV - 1) / NV. The architecture is the
// one the compiler targets (detail::simd_arch); targets xsimd does not know get scalar code
// through the same template.
#pragma once

#include <cmath>

#include "simd_ops.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define FLUXION_ALWAYS_INLINE_LAMBDA __attribute__((always_inline))
#else
#define FLUXION_ALWAYS_INLINE_LAMBDA
#endif

namespace fluxion::detail::kernels {

template <class T>
struct gemm_kernel_traits {
  using ops = simd_ops<T>;
  static constexpr index_t nv = ops::width == 1 ? 4 : 2;  // B vectors per k
  static constexpr index_t nr = nv * ops::width;
  static constexpr index_t mr = ops::width == 1 ? 4 : (simd_register_count - nv - 1) / nv;
  // kc * nr * sizeof(T) (one B sliver) stays in L1; mc * kc * sizeof(T) (one A block) in L2.
  static constexpr index_t kc = 256;
  static constexpr index_t mc = mr * ((sizeof(T) == 4 ? 160 : 80) / mr);
};

/// The tile height for a bottom edge of h < MR rows: 4 or 8 rows where the full tile is taller, so
/// that a 64-row product does not compute 70 rows with AVX-512's 14-row tile (or 66 with AVX2's 6).
/// pack_a lays out a partial sliver with this many values per k.
template <class T>
constexpr index_t edge_height(index_t h) {
  constexpr index_t mr = gemm_kernel_traits<T>::mr;
  if (h >= mr) return mr;
  if (mr > 4 && h <= 4) return 4;
  if (mr > 8 && h <= 8) return 8;
  return mr;
}

/// Calls f.template operator()<edge_height<T>(h)>().
template <class T, class F>
FLUXION_ALWAYS_INLINE void with_edge_height(index_t h, F&& f) {
  constexpr index_t mr = gemm_kernel_traits<T>::mr;
  const index_t e = edge_height<T>(h);
  if constexpr (mr > 4)
    if (e == 4) return f.template operator()<4>();
  if constexpr (mr > 8)
    if (e == 8) return f.template operator()<8>();
  f.template operator()<mr>();
}

/// Keeps the compiler from folding the load of v into each instruction that uses it: A's rows are
/// often not aligned, and a vector load that crosses cache lines costs two (g++ 12 otherwise
/// reloads A or B vectors once per use, 20 loads for 16 FMAs where 8 suffice).
template <class B>
FLUXION_ALWAYS_INLINE void keep_in_register([[maybe_unused]] B& v) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))
  if constexpr (sizeof(B) >= 16) asm("" : "+v"(v.data));  // v.data: xsimd's register (or register pair)
#endif
}

/// How a finished tile is written: C = act(alpha * acc + beta * C + bias). beta == 0 never reads C.
template <class T>
struct tile_update {
  T alpha;
  T beta;
  const T* bias;  // nr values for this tile's columns, or nullptr
  bool relu;
};

/// The update of one element of C that no vector covers: c = act(alpha * acc + beta * c + bias[j]).
/// beta == 0 never reads c. The kernels' scalar edges and epilogues all use it.
template <class T>
FLUXION_ALWAYS_INLINE void update_element(T& c, T acc, const tile_update<T>& u, index_t j) {
  T r = u.alpha * acc;
  if (u.beta != T(0)) r = std::fma(u.beta, c, r);
  if (u.bias) r += u.bias[j];
  if (u.relu) r = r < T(0) ? T(0) : r;  // NaN stays NaN, as ops::relu
  c = r;
}

/// Computes one MR x NR tile and stores its first `rows` rows. `b` holds kc slivers of NR values. `a` holds kc slivers
/// of MR values (lda == 0), or is MR rows of a row-major matrix read in place (lda = its row stride): when A's rows are
/// contiguous along k, reading them directly saves a packing pass that costs 10-20% of a convolution, and a few row
/// streams are as easy on L1 as one packed stream.
/// MR below the full tile height serves bottom-edge tiles of A read in place (a 32-row product would
/// otherwise compute 42 rows with AVX-512's 14-row tile); packed slivers then hold MR values per k.
template <class T, index_t MR = gemm_kernel_traits<T>::mr>
FLUXION_ALWAYS_INLINE void micro_kernel(index_t kc, const T* FLUXION_RESTRICT a, index_t lda,
                                        const T* FLUXION_RESTRICT b, T* FLUXION_RESTRICT c, index_t ldc,
                                        const tile_update<T>& u, index_t rows = MR) {
  using traits = gemm_kernel_traits<T>;
  using ops = typename traits::ops;
  using batch = typename ops::batch;
  constexpr index_t mr = MR, nv = traits::nv, w = ops::width;

  batch acc[mr][nv];
#pragma GCC unroll 32
  for (index_t i = 0; i < mr; ++i)
#pragma GCC unroll 4
    for (index_t j = 0; j < nv; ++j) acc[i][j] = ops::splat(T(0));

#pragma GCC unroll 32
  for (index_t i = 0; i < mr; ++i) __builtin_prefetch(c + i * ldc, 1, 3);

  auto step = [&](const T* ap, index_t row_stride) FLUXION_ALWAYS_INLINE_LAMBDA {
    batch bv[nv];
#pragma GCC unroll 4
    for (index_t j = 0; j < nv; ++j) bv[j] = ops::load(b + j * w);
#pragma GCC unroll 32
    for (index_t i = 0; i < mr; ++i) {
      batch av = ops::splat(ap[i * row_stride]);
#pragma GCC unroll 4
      for (index_t j = 0; j < nv; ++j) acc[i][j] = ops::fma(av, bv[j], acc[i][j]);
    }
    b += nv * w;
  };
  if (lda == 0) {
    // The packed A sliver streams from L2: fetch it 8 steps ahead (OpenBLAS's kernels do the same;
    // 64 x 3136 x 1024 with AVX2: 0.82 -> 0.86 of OpenBLAS).
#pragma GCC unroll 4
    for (index_t p = 0; p < kc; ++p, a += mr) {
      __builtin_prefetch(a + 8 * mr, 0, 3);
      step(a, 1);
    }
  }
  else
    for (index_t p = 0; p < kc; ++p, ++a) step(a, lda);

  const batch alpha = ops::splat(u.alpha), beta = ops::splat(u.beta);
#pragma GCC unroll 32
  for (index_t i = 0; i < mr; ++i) {
    if (i == rows) break;  // a bottom-edge tile: the padded rows are computed, not stored
#pragma GCC unroll 4
    for (index_t j = 0; j < nv; ++j) {
      T* cp = c + i * ldc + j * w;
      batch r = acc[i][j];
      if (u.alpha != T(1)) r = r * alpha;
      if (u.beta != T(0)) r = ops::fma(beta, ops::loadu(cp), r);
      if (u.bias) r = r + ops::loadu(u.bias + j * w);
      if (u.relu) r = ops::relu(r);
      ops::storeu(cp, r);
    }
  }
}

}  // namespace fluxion::detail::kernels
