// The GEMM path for up to one vector of output columns when op(A) has contiguous rows (a
// matrix-vector product, a dense layer with 10 units, a convolution with few output channels): each
// C element is a dot product along k, vectorized over k, so no lane is padding. Tiles of up to W
// outputs are reduced together by one transposing horizontal add (W separate reductions cost more
// than the FMAs at k = 16). Packing A into slivers would cost more than the product itself, and a
// register tile NR columns wide would be mostly padding.
//
//   dot_rows<float>(k, n, a, lda, bt, ldbt, c, ldc, rows, update);  // bt: op(B)^T, n rows of ldbt
#pragma once

#include <algorithm>
#include <cmath>

#include "gemm_micro_kernel.hpp"

namespace fluxion::detail::kernels {

/// An RB x CB block of C (RB * CB <= W outputs), each a dot product along k; the RB * CB sums are
/// reduced together by one transposing horizontal add. `bt` is op(B)^T with rows of ldbt (a multiple
/// of W) values, aligned and zero-padded past k. Per vector of k: RB loads of A and CB of B feed RB * CB FMAs.
template <class T, int RB, int CB>
FLUXION_ALWAYS_INLINE void dot_tile(index_t k, const T* FLUXION_RESTRICT a, index_t lda, const T* FLUXION_RESTRICT bt,
                                    index_t ldbt, T* FLUXION_RESTRICT c, index_t ldc, const tile_update<T>& u) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  static_assert(RB * CB <= w, "dot_tile: more outputs than one transposing reduction sums");
  batch acc[w];
#pragma GCC unroll 16
  for (index_t r = 0; r < w; ++r) acc[r] = ops::splat(T(0));
  const index_t kv = k / w * w;
  for (index_t p = 0; p < kv; p += w) {
    batch bv[CB];
#pragma GCC unroll 4
    for (int j = 0; j < CB; ++j) {
      bv[j] = ops::load(bt + j * ldbt + p);
      keep_in_register(bv[j]);
    }
#pragma GCC unroll 8
    for (int i = 0; i < RB; ++i) {
      batch av = ops::loadu(a + i * lda + p);
      keep_in_register(av);
#pragma GCC unroll 4
      for (int j = 0; j < CB; ++j) acc[i * CB + j] = ops::fma(av, bv[j], acc[i * CB + j]);
    }
  }
  if (kv < k) {  // the last k % W values: A's copied into zero-padded vectors (B's rows are padded)
    alignas(64) T at[RB][w] = {};
    for (int i = 0; i < RB; ++i) std::copy(a + i * lda + kv, a + i * lda + k, at[i]);
    batch bv[CB];
#pragma GCC unroll 4
    for (int j = 0; j < CB; ++j) bv[j] = ops::load(bt + j * ldbt + kv);
#pragma GCC unroll 8
    for (int i = 0; i < RB; ++i) {
      const batch av = ops::load(at[i]);
#pragma GCC unroll 4
      for (int j = 0; j < CB; ++j) acc[i * CB + j] = ops::fma(av, bv[j], acc[i * CB + j]);
    }
  }
  alignas(64) T sums[w];
  ops::sum_each(acc, sums);
  if (u.alpha == T(1) && u.beta == T(0) && !u.bias && !u.relu) {
#pragma GCC unroll 16
    for (int i = 0; i < RB; ++i)
#pragma GCC unroll 4
      for (int j = 0; j < CB; ++j) c[i * ldc + j] = sums[i * CB + j];
    return;
  }
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < CB; ++j) update_element(c[i * ldc + j], sums[i * CB + j], u, j);
}

/// Rows [0, rows) of C, all n columns, from rows of op(A) (unit stride along k) and op(B)^T, in
/// dot_tile blocks. With four columns or more: W / 4 rows by four columns at a time, then two, then
/// one. With n < 4 columns: W / n rows by all n columns first. The last rows go W / 4 and then one at
/// a time, with the same column steps. Nine tiles in all: when every (rows, columns) pair had its
/// own tile there were 26, 37 KB of code in every program with a float matmul, and the shapes the
/// pairs served run as fast or faster now (AVX-512, one thread: 64 x 10 x 256 0.84, 64 x 5 x 256
/// 0.86, 37 x 7 x 100 1.0; n = 1 to 3 use the same tiles as before).
template <class T>
void dot_rows(index_t k, index_t n, const T* a, index_t lda, const T* bt, index_t ldbt, T* c, index_t ldc, index_t rows,
              const tile_update<T>& u) {
  constexpr int w = static_cast<int>(simd_ops<T>::width), quarter = w >= 4 ? w / 4 : 1;
  auto tile = [&]<int RB, int CB>(index_t i, index_t j) {
    tile_update<T> uj = u;
    if (u.bias) uj.bias = u.bias + j;
    dot_tile<T, RB, CB>(k, a + i * lda, lda, bt + j * ldbt, ldbt, c + i * ldc + j, ldc, uj);
  };
  auto row_block = [&]<int RB>(index_t i) {
    index_t j = 0;
    if constexpr (RB * 4 <= w)
      for (; j + 4 <= n; j += 4) tile.template operator()<RB, 4>(i, j);
    if constexpr (RB * 2 <= w)
      if (n - j >= 2) {
        tile.template operator()<RB, 2>(i, j);
        j += 2;
      }
    for (; j < n; ++j) tile.template operator()<RB, 1>(i, j);
  };
  index_t i = 0;
  auto all_columns = [&]<int CB>() {
    for (; i + w / CB <= rows; i += w / CB) tile.template operator()<w / CB, CB>(i, 0);
  };
  if constexpr (w >= 4) {
    if (n == 1)
      all_columns.template operator()<1>();
    else if (n == 2)
      all_columns.template operator()<2>();
    else if (n == 3)
      all_columns.template operator()<3>();
  }
  if constexpr (quarter > 1)
    for (; i + quarter <= rows; i += quarter) row_block.template operator()<quarter>(i);
  for (; i < rows; ++i) row_block.template operator()<1>(i);
}

}  // namespace fluxion::detail::kernels
