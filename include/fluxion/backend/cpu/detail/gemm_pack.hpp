// Packing for the blocked GEMM: copies a block of op(A) into MR-row slivers and a block of op(B)
// into NR-column slivers, contiguous in k and padded with zeros, so the micro-kernel reads both
// with unit stride from aligned memory whatever the caller's transposes and leading dimensions.
//
//   pack_a<float>(dst, a, lda, /*transposed=*/false, i0, rows, k0, kc);   // sliver s at dst + s*mr*kc
//   pack_b<float>(dst, b, ldb, /*transposed=*/true, k0, kc, j0, cols);    // sliver s at dst + s*nr*kc
#pragma once

#include <algorithm>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "gemm_micro_kernel.hpp"

namespace fluxion::detail::kernels {

/// dst[c * ldd + r] = src[r * lds + c] for an 8 x 8 float block. Strided gathers cost two to three
/// cycles per element; the register transpose about a fifth of that. xsimd 8 has no transpose,
/// hence the intrinsics, with the plain loop for other targets.
FLUXION_ALWAYS_INLINE void transpose_8x8(const float* FLUXION_RESTRICT src, index_t lds, float* FLUXION_RESTRICT dst,
                                         index_t ldd) {
#if defined(__AVX__)
  __m256 r0 = _mm256_loadu_ps(src + 0 * lds), r1 = _mm256_loadu_ps(src + 1 * lds);
  __m256 r2 = _mm256_loadu_ps(src + 2 * lds), r3 = _mm256_loadu_ps(src + 3 * lds);
  __m256 r4 = _mm256_loadu_ps(src + 4 * lds), r5 = _mm256_loadu_ps(src + 5 * lds);
  __m256 r6 = _mm256_loadu_ps(src + 6 * lds), r7 = _mm256_loadu_ps(src + 7 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
  __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
  __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  _mm256_storeu_ps(dst + 0 * ldd, _mm256_permute2f128_ps(s0, s4, 0x20));
  _mm256_storeu_ps(dst + 1 * ldd, _mm256_permute2f128_ps(s1, s5, 0x20));
  _mm256_storeu_ps(dst + 2 * ldd, _mm256_permute2f128_ps(s2, s6, 0x20));
  _mm256_storeu_ps(dst + 3 * ldd, _mm256_permute2f128_ps(s3, s7, 0x20));
  _mm256_storeu_ps(dst + 4 * ldd, _mm256_permute2f128_ps(s0, s4, 0x31));
  _mm256_storeu_ps(dst + 5 * ldd, _mm256_permute2f128_ps(s1, s5, 0x31));
  _mm256_storeu_ps(dst + 6 * ldd, _mm256_permute2f128_ps(s2, s6, 0x31));
  _mm256_storeu_ps(dst + 7 * ldd, _mm256_permute2f128_ps(s3, s7, 0x31));
#else
  for (index_t r = 0; r < 8; ++r)
    for (index_t c = 0; c < 8; ++c) dst[c * ldd + r] = src[r * lds + c];
#endif
}

/// h rows of A (element (i, p) at src[i * row + p * col]) as one sliver of `width` >= h values per k,
/// zero-padded: a bottom edge, packed for a shorter kernel or read past the end of A.
template <class T>
void pack_partial_sliver(T* FLUXION_RESTRICT d, const T* FLUXION_RESTRICT src, index_t row, index_t col, index_t h,
                         index_t width, index_t kc) {
  for (index_t p = 0; p < kc; ++p) {
    for (index_t i = 0; i < h; ++i) d[p * width + i] = src[i * row + p * col];
    for (index_t i = h; i < width; ++i) d[p * width + i] = T(0);
  }
}

/// Rows [i0, i0 + rows) of op(A), columns [k0, k0 + kc), as slivers of MR rows: sliver s at dst + s * kc
/// holds MR values per k. A last sliver of h < MR rows holds edge_height(h) values per k, zero-padded.
template <class T>
void pack_a(T* FLUXION_RESTRICT dst, const T* FLUXION_RESTRICT a, index_t lda, bool transposed, index_t i0,
            index_t rows, index_t k0, index_t kc) {
  constexpr index_t mr = gemm_kernel_traits<T>::mr;
  // op(A)(i, p) of this block is src[i * row + p * col].
  const index_t row = transposed ? 1 : lda, col = transposed ? lda : 1;
  for (index_t s = 0; s < rows; s += mr) {
    const index_t h = std::min(mr, rows - s);
    T* d = dst + s * kc;
    const T* src = a + (i0 + s) * row + k0 * col;
    if (h == mr) {
      if (!transposed) {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 32
          for (index_t i = 0; i < mr; ++i) d[p * mr + i] = src[i * lda + p];
      } else {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 32
          for (index_t i = 0; i < mr; ++i) d[p * mr + i] = src[p * lda + i];
      }
      continue;
    }
    pack_partial_sliver(d, src, row, col, h, edge_height<T>(h), kc);
  }
}

template <class T>
void pack_b(T* FLUXION_RESTRICT dst, const T* FLUXION_RESTRICT b, index_t ldb, bool transposed, index_t k0, index_t kc,
            index_t j0, index_t cols) {
  constexpr index_t nr = gemm_kernel_traits<T>::nr;
  if (!transposed) {
    // Row by row, so that each row of B is read front to back, as the prefetcher expects; sliver
    // by sliver would touch one cache line per row per pass.
    const index_t full = cols / nr * nr;
    constexpr index_t line = 64 / static_cast<index_t>(sizeof(T)), ahead = 8;
    for (index_t p = 0; p < kc; ++p) {
      const T* src = b + (k0 + p) * ldb + j0;
      if (p + ahead < kc)
        for (index_t x = 0; x < cols; x += line) __builtin_prefetch(src + ahead * ldb + x, 0, 3);
      for (index_t s = 0; s < full; s += nr)
#pragma GCC unroll 64
        for (index_t j = 0; j < nr; ++j) dst[s * kc + p * nr + j] = src[s + j];
    }
    if (full == cols) return;
  }
  for (index_t s = transposed ? 0 : cols / nr * nr; s < cols; s += nr) {
    const index_t w = std::min(nr, cols - s);
    T* d = dst + s * kc;
    if (!transposed) {
      const T* src = b + k0 * ldb + j0 + s;
      if (w == nr) {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 64
          for (index_t j = 0; j < nr; ++j) d[p * nr + j] = src[p * ldb + j];
      } else {
        for (index_t p = 0; p < kc; ++p) {
          for (index_t j = 0; j < w; ++j) d[p * nr + j] = src[p * ldb + j];
          for (index_t j = w; j < nr; ++j) d[p * nr + j] = T(0);
        }
      }
    } else {
      const T* src = b + (j0 + s) * ldb + k0;
      if constexpr (std::is_same_v<T, float> && nr % 8 == 0) {
        if (w == nr) {
          const index_t kv = kc / 8 * 8;
          for (index_t p = 0; p < kv; p += 8)
            for (index_t j = 0; j < nr; j += 8) transpose_8x8(src + j * ldb + p, ldb, d + p * nr + j, nr);
          for (index_t p = kv; p < kc; ++p)
            for (index_t j = 0; j < nr; ++j) d[p * nr + j] = src[j * ldb + p];
          continue;
        }
      }
      if (w == nr) {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 64
          for (index_t j = 0; j < nr; ++j) d[p * nr + j] = src[j * ldb + p];
      } else {
        for (index_t p = 0; p < kc; ++p) {
          for (index_t j = 0; j < w; ++j) d[p * nr + j] = src[j * ldb + p];
          for (index_t j = w; j < nr; ++j) d[p * nr + j] = T(0);
        }
      }
    }
  }
}

}  // namespace fluxion::detail::kernels
