// Packing for the blocked GEMM: copies a block of op(A) into MR-row slivers and a block of op(B)
// into NR-column slivers, contiguous in k and padded with zeros, so the micro-kernel reads both
// with unit stride from aligned memory whatever the caller's transposes and leading dimensions.
//
//   pack_a<float>(dst, a, lda, /*transposed=*/false, i0, rows, k0, kc);   // sliver s at dst + s*mr*kc
//   pack_b<float>(dst, b, ldb, /*transposed=*/true, k0, kc, j0, cols);    // sliver s at dst + s*nr*kc
#pragma once

#include <algorithm>

#include "gemm_micro_kernel.hpp"

namespace fluxion::detail::cpu {

template <class T>
void pack_a(T* FLUXION_RESTRICT dst, const T* FLUXION_RESTRICT a, index_t lda, bool transposed, index_t i0,
            index_t rows, index_t k0, index_t kc) {
  constexpr index_t mr = gemm_kernel_traits<T>::mr;
  for (index_t s = 0; s < rows; s += mr) {
    const index_t h = std::min(mr, rows - s);
    T* d = dst + s * kc;
    if (!transposed) {
      const T* src = a + (i0 + s) * lda + k0;
      if (h == mr) {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 32
          for (index_t i = 0; i < mr; ++i) d[p * mr + i] = src[i * lda + p];
      } else {
        for (index_t p = 0; p < kc; ++p) {
          for (index_t i = 0; i < h; ++i) d[p * mr + i] = src[i * lda + p];
          for (index_t i = h; i < mr; ++i) d[p * mr + i] = T(0);
        }
      }
    } else {
      const T* src = a + k0 * lda + i0 + s;
      if (h == mr) {
        for (index_t p = 0; p < kc; ++p)
#pragma GCC unroll 32
          for (index_t i = 0; i < mr; ++i) d[p * mr + i] = src[p * lda + i];
      } else {
        for (index_t p = 0; p < kc; ++p) {
          for (index_t i = 0; i < h; ++i) d[p * mr + i] = src[p * lda + i];
          for (index_t i = h; i < mr; ++i) d[p * mr + i] = T(0);
        }
      }
    }
  }
}

template <class T>
void pack_b(T* FLUXION_RESTRICT dst, const T* FLUXION_RESTRICT b, index_t ldb, bool transposed, index_t k0,
            index_t kc, index_t j0, index_t cols) {
  constexpr index_t nr = gemm_kernel_traits<T>::nr;
  for (index_t s = 0; s < cols; s += nr) {
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

}  // namespace fluxion::detail::cpu
