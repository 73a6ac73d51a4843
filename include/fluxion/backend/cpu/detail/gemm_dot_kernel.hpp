// The GEMM path for a handful of output columns (a matrix-vector product, a layer with one to six
// units): when op(A) has contiguous rows, each C element is a dot product along k, vectorized over
// k. Packing A into slivers would cost more than the product itself, and a register tile NR
// columns (or, transposed, MR rows) wide would be mostly padding.
//
//   dot_rows<float>(k, n, a, lda, bt, ldbt, c, ldc, rows, update);  // bt: op(B)^T, n rows of ldbt
#pragma once

#include <cmath>

#include "gemm_micro_kernel.hpp"

namespace fluxion::detail::kernels {

template <class T, int RB, int CB>
FLUXION_ALWAYS_INLINE void dot_block(index_t k, const T* FLUXION_RESTRICT a, index_t lda, const T* FLUXION_RESTRICT bt,
                                     index_t ldbt, T* FLUXION_RESTRICT c, index_t ldc, const tile_update<T>& u) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  batch acc[RB][CB];
#pragma GCC unroll 4
  for (int i = 0; i < RB; ++i)
#pragma GCC unroll 4
    for (int j = 0; j < CB; ++j) acc[i][j] = ops::splat(T(0));
  const index_t kv = k / w * w;
  for (index_t p = 0; p < kv; p += w) {
    batch bv[CB];
#pragma GCC unroll 4
    for (int j = 0; j < CB; ++j) bv[j] = ops::load(bt + j * ldbt + p);
#pragma GCC unroll 4
    for (int i = 0; i < RB; ++i) {
      const batch av = ops::loadu(a + i * lda + p);
#pragma GCC unroll 4
      for (int j = 0; j < CB; ++j) acc[i][j] = ops::fma(av, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < CB; ++j) {
      T s = ops::sum(acc[i][j]);
      for (index_t p = kv; p < k; ++p) s = std::fma(a[i * lda + p], bt[j * ldbt + p], s);
      T& out = c[i * ldc + j];
      if (u.alpha != T(1)) s *= u.alpha;
      if (u.beta != T(0)) s = std::fma(u.beta, out, s);
      if (u.bias) s += u.bias[j];
      if (u.relu) s = s > T(0) ? s : T(0);
      out = s;
    }
}

/// One column (a matrix-vector product): W rows at a time, their W sums reduced together by one
/// transposing horizontal add instead of W separate ones (which cost more than the FMAs at k = 16).
template <class T>
index_t dot_rows_one_column(index_t k, const T* a, index_t lda, const T* bt, T* c, index_t ldc, index_t rows,
                            const tile_update<T>& u) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  const index_t kv = k / w * w;
  index_t i = 0;
  for (; i + w <= rows; i += w) {
    batch acc[w];
#pragma GCC unroll 16
    for (index_t r = 0; r < w; ++r) acc[r] = ops::splat(T(0));
    for (index_t p = 0; p < kv; p += w) {
      const batch bv = ops::load(bt + p);
#pragma GCC unroll 16
      for (index_t r = 0; r < w; ++r) acc[r] = ops::fma(ops::loadu(a + (i + r) * lda + p), bv, acc[r]);
    }
    alignas(64) T sums[w];
    ops::sum_each(acc, sums);
    for (index_t r = 0; r < w; ++r) {
      T s = sums[r];
      for (index_t p = kv; p < k; ++p) s = std::fma(a[(i + r) * lda + p], bt[p], s);
      T& out = c[(i + r) * ldc];
      if (u.alpha != T(1)) s *= u.alpha;
      if (u.beta != T(0)) s = std::fma(u.beta, out, s);
      if (u.bias) s += u.bias[0];
      if (u.relu) s = s > T(0) ? s : T(0);
      out = s;
    }
  }
  return i;
}

/// Rows [0, rows) of C, all n columns, from rows of op(A) (unit stride along k) and op(B)^T.
template <class T>
void dot_rows(index_t k, index_t n, const T* a, index_t lda, const T* bt, index_t ldbt, T* c, index_t ldc, index_t rows,
              const tile_update<T>& u) {
  if constexpr (simd_ops<T>::width > 1)
    if (n == 1) {
      const index_t done = dot_rows_one_column(k, a, lda, bt, c, ldc, rows, u);
      a += done * lda;
      c += done * ldc;
      rows -= done;
    }
  constexpr int rb = 4, cb = 2;
  auto row_block = [&]<int RB>(index_t i) {
    const T* ai = a + i * lda;
    T* ci = c + i * ldc;
    index_t j = 0;
    for (; j + cb <= n; j += cb) {
      tile_update<T> uj = u;
      if (u.bias) uj.bias = u.bias + j;
      dot_block<T, RB, cb>(k, ai, lda, bt + j * ldbt, ldbt, ci + j, ldc, uj);
    }
    for (; j < n; ++j) {
      tile_update<T> uj = u;
      if (u.bias) uj.bias = u.bias + j;
      dot_block<T, RB, 1>(k, ai, lda, bt + j * ldbt, ldbt, ci + j, ldc, uj);
    }
  };
  index_t i = 0;
  for (; i + rb <= rows; i += rb) row_block.template operator()<rb>(i);
  switch (rows - i) {
    case 3:
      row_block.template operator()<3>(i);
      break;
    case 2:
      row_block.template operator()<2>(i);
      break;
    case 1:
      row_block.template operator()<1>(i);
      break;
    default:
      break;
  }
}

}  // namespace fluxion::detail::kernels
