// The GEMM path for up to one vector of output columns when op(A) is stored transposed (the weight
// gradient X^T * dY of a dense layer with 10 units): op(A)'s columns are then contiguous, so each
// vector holds W rows of one column of C, and op(B)'s values are broadcast. No lane is padding, and
// A is read where it lies. The tile's columns of C are transposed into C's rows through a small
// buffer, where the epilogue is applied.
//
//   column_rows<float>(k, n, a, lda, bp, ldbp, c, ldc, rows, update);  // op(A)(i, q) = a[q * lda + i]
#pragma once

#include <cmath>

#include "gemm_micro_kernel.hpp"

namespace fluxion::detail::kernels {

/// RV * W rows by CB columns of C. `a` is op(A) at (row 0, k 0) with op(A)(i, q) = a[q * lda + i];
/// `bp` holds op(B) packed as k rows of ldbp values, column 0 of this tile first. Per k: RV loads of
/// A and CB broadcasts of B feed RV * CB FMAs.
template <class T, int RV, int CB>
FLUXION_ALWAYS_INLINE void column_tile(index_t k, const T* FLUXION_RESTRICT a, index_t lda,
                                       const T* FLUXION_RESTRICT bp, index_t ldbp, T* FLUXION_RESTRICT c, index_t ldc,
                                       const tile_update<T>& u) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr int w = static_cast<int>(ops::width);
  batch acc[RV * CB];
#pragma GCC unroll 16
  for (int r = 0; r < RV * CB; ++r) acc[r] = ops::splat(T(0));
  for (index_t q = 0; q < k; ++q) {
    batch av[RV];
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) {
      av[v] = ops::loadu(a + q * lda + v * w);
      keep_in_register(av[v]);
    }
#pragma GCC unroll 4
    for (int j = 0; j < CB; ++j) {
      const batch bj = ops::splat(bp[q * ldbp + j]);
#pragma GCC unroll 4
      for (int v = 0; v < RV; ++v) acc[v * CB + j] = ops::fma(av[v], bj, acc[v * CB + j]);
    }
  }
  alignas(64) T cols[CB][RV * w];  // cols[j][i]: column j of the tile
#pragma GCC unroll 4
  for (int j = 0; j < CB; ++j)
#pragma GCC unroll 4
    for (int v = 0; v < RV; ++v) ops::storeu(cols[j] + v * w, acc[v * CB + j]);
  const bool plain = u.alpha == T(1) && u.beta == T(0) && !u.bias && !u.relu;
  for (int i = 0; i < RV * w; ++i) {
    T* out = c + i * ldc;
    if (plain) {
#pragma GCC unroll 4
      for (int j = 0; j < CB; ++j) out[j] = cols[j][i];
      continue;
    }
    for (int j = 0; j < CB; ++j) update_element(out[j], cols[j][i], u, j);
  }
}

/// Rows [0, rows / W * W) of C, all n columns; returns how many rows that is (the rest, fewer than
/// W, are left to the caller). Tiles of RV vectors of rows by 4 columns, then the last columns, then
/// single vectors of rows.
template <class T>
index_t column_rows(index_t k, index_t n, const T* a, index_t lda, const T* bp, index_t ldbp, T* c, index_t ldc,
                    index_t rows, const tile_update<T>& u) {
  constexpr index_t w = simd_ops<T>::width;
  constexpr int rv = simd_register_count >= 32 ? 4 : 2, cb = 4;
  auto columns = [&]<int RV>(index_t i) {
    auto block = [&]<int CB>(index_t j) {
      tile_update<T> uj = u;
      if (u.bias) uj.bias = u.bias + j;
      column_tile<T, RV, CB>(k, a + i, lda, bp + j, ldbp, c + i * ldc + j, ldc, uj);
    };
    index_t j = 0;
    for (; j + cb <= n; j += cb) block.template operator()<cb>(j);
    if (n - j == 3) block.template operator()<3>(j);
    if (n - j == 2) block.template operator()<2>(j);
    if (n - j == 1) block.template operator()<1>(j);
  };
  index_t i = 0;
  for (; i + rv * w <= rows; i += rv * w) columns.template operator()<rv>(i);
  for (; i + w <= rows; i += w) columns.template operator()<1>(i);
  return i;
}

}  // namespace fluxion::detail::kernels
