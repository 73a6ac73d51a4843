// The CPU matmul entry point used by fx::matmul: batched, broadcasting batch dimensions, with
// transpose flags, on top of the packed GEMM in gemm.hpp when it is available.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../../core/config.hpp"
#include "gemm.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::cpu_kernel {

/// C[m, n] = op(A) op(B) for one matrix pair; A is m x k (or k x m when trans_a), row-major.
/// Integer and bool types use this loop; float and double go through the GEMM.
template <class T>
void matmul_reference(bool trans_a, bool trans_b, index_t m, index_t n, index_t k, const T* a, const T* b, T* c) {
  const index_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
  for (index_t i = 0; i < m; ++i) {
    T* ci = c + i * n;
    for (index_t j = 0; j < n; ++j) ci[j] = T(0);
    for (index_t p = 0; p < k; ++p) {
      const T aip = trans_a ? a[p * lda + i] : a[i * lda + p];
      if (trans_b)
        for (index_t j = 0; j < n; ++j) ci[j] = static_cast<T>(ci[j] + aip * b[j * ldb + p]);
      else
        for (index_t j = 0; j < n; ++j) ci[j] = static_cast<T>(ci[j] + aip * b[p * ldb + j]);
    }
  }
}

}  // namespace fluxion::detail::cpu_kernel

namespace fluxion::detail::cpu_kernel {

/// C_b = op(A_{a_off[b]}) op(B_{b_off[b]}) for each of `batch` matrix pairs. Tasks are fixed
/// (one per batch entry and row block), so results never depend on the thread count.
template <class T>
void matmul_batched(bool trans_a, bool trans_b, index_t batch, index_t m, index_t n, index_t k, const T* a,
                    const index_t* a_off, const T* b, const index_t* b_off, T* c) {
  if (batch == 0 || m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    // The packed GEMM (gemm.hpp) threads each product itself, with fixed task boundaries.
    const auto ta = trans_a ? kernels::transpose::yes : kernels::transpose::no;
    const auto tb = trans_b ? kernels::transpose::yes : kernels::transpose::no;
    const index_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
    for (index_t bi = 0; bi < batch; ++bi)
      kernels::gemm<T>(ta, tb, m, n, k, T(1), a + a_off[bi], lda, b + b_off[bi], ldb, T(0), c + bi * m * n, n);
    return;
  }
  constexpr index_t rows_per_task = 64;
  const index_t blocks = (m + rows_per_task - 1) / rows_per_task;
  auto run = [&](index_t t) {
    const index_t bi = t / blocks, r0 = (t % blocks) * rows_per_task, r1 = std::min(m, r0 + rows_per_task);
    const T* ab = a + a_off[bi];
    const T* bb = b + b_off[bi];
    T* cb = c + bi * m * n;
    // Row block [r0, r1) of op(A): shift A's origin to row r0 of op(A).
    const T* a_rows = trans_a ? ab + r0 : ab + r0 * k;
    if (trans_a) {
      // op(A) rows are A's columns: index with the full leading dimension m.
      for (index_t i = r0; i < r1; ++i) {
        T* ci = cb + i * n;
        for (index_t j = 0; j < n; ++j) ci[j] = T(0);
        for (index_t p = 0; p < k; ++p) {
          const T aip = ab[p * m + i];
          if (trans_b)
            for (index_t j = 0; j < n; ++j) ci[j] = static_cast<T>(ci[j] + aip * bb[j * k + p]);
          else
            for (index_t j = 0; j < n; ++j) ci[j] = static_cast<T>(ci[j] + aip * bb[p * n + j]);
        }
      }
    } else {
      matmul_reference(false, trans_b, r1 - r0, n, k, a_rows, bb, cb + r0 * n);
    }
  };
  const index_t tasks = batch * blocks;
  if (tasks == 1 || m * n * k < 32768) {
    for (index_t t = 0; t < tasks; ++t) run(t);
  } else {
    parallel_for(tasks, run);
  }
}

}  // namespace fluxion::detail::cpu_kernel
