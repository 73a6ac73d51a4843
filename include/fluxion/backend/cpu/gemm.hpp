// Dense matrix multiplication on the CPU, header-only: C = act(alpha * op(A) * op(B) + beta * C + bias),
// row-major, for float and double, with a strided-batched form. fx::matmul, dense layers and the
// convolution kernels call it; no external BLAS is needed.
//
//   using namespace fluxion::detail::cpu;
//   // y = relu(x * W + b) for x (64 x 784), W (784 x 256), b (256)
//   gemm<float>(transpose::no, transpose::no, 64, 256, 784, 1.f, x, 784, w, 256, 0.f, y, 256,
//               {.bias = b, .act = activation::relu});
//
// The algorithm is BLIS's: op(B) is packed once into NR-column slivers, then blocks of C of at most
// MC rows are independent tasks that pack their rows of op(A) in KC-deep slices and run the
// register-tiled micro-kernel (detail/gemm_micro_kernel.hpp). Every element of C is summed in the
// same order (KC-deep slices in sequence, one FMA chain per slice) whichever task computes it, and
// the task grid depends only on (m, n, k), so results are bitwise identical for any thread count.
// As in BLAS, beta == 0 never reads C, so C may hold garbage on entry.
#pragma once

#include <algorithm>
#include <concepts>
#include <string>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "detail/gemm_micro_kernel.hpp"
#include "detail/gemm_pack.hpp"
#include "detail/scratch_buffer.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::cpu {

enum class transpose : bool { no = false, yes = true };

enum class activation : unsigned char { none, relu };

/// Work fused into the store of C, applied after alpha and beta: C = act(... + bias[column]).
template <class T>
struct gemm_epilogue {
  const T* bias = nullptr;  // n values, one per column of C, or nullptr
  activation act = activation::none;
};

template <class T>
concept gemm_scalar = std::same_as<T, float> || std::same_as<T, double>;

namespace gemm_detail {

inline index_t round_up(index_t x, index_t m) { return (x + m - 1) / m * m; }
inline index_t ceil_div(index_t x, index_t m) { return (x + m - 1) / m; }

/// The task grid: blocks of mt rows by nt columns. It is a function of the shape only.
struct task_grid {
  index_t mt, nt, tm, tn;
};

template <class T>
task_grid plan_tasks(index_t m, index_t n, index_t k) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr;
  // Enough tasks for a few cores to balance, each big enough to hide the cost of a task.
  constexpr index_t target_tasks = 8;
  constexpr double min_task_flops = 1 << 20;
  index_t tm = ceil_div(m, traits::mc), tn = 1;
  auto mt_of = [&](index_t parts) { return round_up(ceil_div(m, parts), mr); };
  auto nt_of = [&](index_t parts) { return round_up(ceil_div(n, parts), nr); };
  for (;;) {
    const index_t mt = mt_of(tm), nt = nt_of(tn);
    if (ceil_div(m, mt) * ceil_div(n, nt) >= target_tasks) break;
    if (2.0 * mt * nt * k / 2 < min_task_flops) break;
    // Splitting rows costs nothing (B is packed once); splitting columns repacks A per column block.
    if (mt >= 4 * mr)
      tm *= 2;
    else if (nt >= 8 * nr)
      tn *= 2;
    else
      break;
  }
  const index_t mt = mt_of(tm), nt = nt_of(tn);
  return {mt, nt, ceil_div(m, mt), ceil_div(n, nt)};
}

template <class T>
void scale_only(index_t m, index_t n, T beta, T* c, index_t ldc, const gemm_epilogue<T>& ep) {
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      T r = beta == T(0) ? T(0) : beta * c[i * ldc + j];
      if (ep.bias) r += ep.bias[j];
      if (ep.act == activation::relu) r = r > T(0) ? r : T(0);
      c[i * ldc + j] = r;
    }
}

/// Rows [i0, i0 + rows) by columns [j0, j0 + cols) of C, against op(B) already packed into `bp`.
template <class T>
void compute_block(bool ta, index_t k, T alpha, const T* a, index_t lda, const T* bp, index_t npad, T beta,
                   T* c, index_t ldc, const gemm_epilogue<T>& ep, index_t n, index_t i0, index_t rows,
                   index_t j0, index_t cols) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr, kc_max = traits::kc;
  T* ap = scratch<T, scratch_slot::gemm_a>(static_cast<std::size_t>(round_up(rows, mr) * std::min(k, kc_max)));
  const index_t chunks = ceil_div(k, kc_max);
  for (index_t q = 0; q < chunks; ++q) {
    const index_t k0 = q * kc_max, kc = std::min(kc_max, k - k0);
    const bool last = q == chunks - 1;
    pack_a(ap, a, lda, ta, i0, rows, k0, kc);
    tile_update<T> u{alpha, q == 0 ? beta : T(1), nullptr, last && ep.act == activation::relu};
    const T* bq = bp + k0 * npad;
    for (index_t js = j0; js < j0 + cols; js += nr) {
      const T* bs = bq + js * kc;
      const index_t w = std::min(nr, n - js);
      const T* bias = last && ep.bias ? ep.bias + js : nullptr;
      for (index_t is = 0; is < rows; is += mr) {
        const index_t h = std::min(mr, rows - is);
        const T* as = ap + is * kc;
        T* cp = c + (i0 + is) * ldc + js;
        if (h == mr && w == nr) {
          u.bias = bias;
          micro_kernel<T>(kc, as, bs, cp, ldc, u);
          continue;
        }
        // Edge tile: run the same kernel on a padded copy, so edge elements round like the rest.
        alignas(buffer_alignment) T tile[mr * nr] = {};
        alignas(buffer_alignment) T tile_bias[nr] = {};
        if (u.beta != T(0))
          for (index_t i = 0; i < h; ++i)
            for (index_t j = 0; j < w; ++j) tile[i * nr + j] = cp[i * ldc + j];
        if (bias)
          for (index_t j = 0; j < w; ++j) tile_bias[j] = bias[j];
        tile_update<T> ue = u;
        ue.bias = bias ? tile_bias : nullptr;
        micro_kernel<T>(kc, as, bs, tile, nr, ue);
        for (index_t i = 0; i < h; ++i)
          for (index_t j = 0; j < w; ++j) cp[i * ldc + j] = tile[i * nr + j];
      }
    }
  }
}

template <class T>
void gemm_unchecked(bool ta, bool tb, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
                    const T* b, index_t ldb, T beta, T* c, index_t ldc, const gemm_epilogue<T>& ep,
                    bool allow_threads) {
  if (m == 0 || n == 0) return;
  if (k == 0 || alpha == T(0)) {
    scale_only(m, n, beta, c, ldc, ep);
    return;
  }
  using traits = gemm_kernel_traits<T>;
  constexpr index_t nr = traits::nr, kc_max = traits::kc;
  const index_t npad = round_up(n, nr);
  T* bp = scratch<T, scratch_slot::gemm_b>(static_cast<std::size_t>(k * npad));

  // Pack op(B): slice q (rows k0..k0+kc) starts at bp + k0 * npad, sliver s of it at + s * nr * kc.
  constexpr index_t strips_per_task = 16;
  const index_t chunks = ceil_div(k, kc_max), strip_groups = ceil_div(npad / nr, strips_per_task);
  auto pack_task = [&](index_t t) {
    const index_t q = t / strip_groups, g = t % strip_groups;
    const index_t k0 = q * kc_max, kc = std::min(kc_max, k - k0);
    const index_t j0 = g * strips_per_task * nr, cols = std::min(strips_per_task * nr, n - j0);
    pack_b(bp + k0 * npad + j0 * kc, b, ldb, tb, k0, kc, j0, cols);
  };
  const task_grid grid = plan_tasks<T>(m, n, k);
  const bool parallel = allow_threads && grid.tm * grid.tn > 1;
  if (parallel && k * npad >= (1 << 16))
    parallel_for(chunks * strip_groups, pack_task);
  else
    for (index_t t = 0; t < chunks * strip_groups; ++t) pack_task(t);

  auto block_task = [&](index_t t) {
    const index_t bi = t % grid.tm, bj = t / grid.tm;
    const index_t i0 = bi * grid.mt, j0 = bj * grid.nt;
    compute_block(ta, k, alpha, a, lda, bp, npad, beta, c, ldc, ep, n, i0, std::min(grid.mt, m - i0), j0,
                  std::min(grid.nt, n - j0));
  };
  if (parallel)
    parallel_for(grid.tm * grid.tn, block_task);
  else
    for (index_t t = 0; t < grid.tm * grid.tn; ++t) block_task(t);
}

inline void check_gemm_args(const char* op, bool ta, bool tb, index_t m, index_t n, index_t k, index_t lda,
                            index_t ldb, index_t ldc) {
  auto s = [](index_t v) { return std::to_string(v); };
  if (m < 0 || n < 0 || k < 0)
    throw invalid_argument(std::string(op) + ": sizes must be non-negative, got m = " + s(m) + ", n = " + s(n) +
                           ", k = " + s(k));
  const index_t a_cols = ta ? m : k, b_cols = tb ? k : n;
  const char* a_name = ta ? "m" : "k";
  const char* b_name = tb ? "k" : "n";
  if (lda < std::max<index_t>(1, a_cols))
    throw invalid_argument(std::string(op) + ": lda = " + s(lda) + " is smaller than " + a_name + " = " + s(a_cols));
  if (ldb < std::max<index_t>(1, b_cols))
    throw invalid_argument(std::string(op) + ": ldb = " + s(ldb) + " is smaller than " + b_name + " = " + s(b_cols));
  if (ldc < std::max<index_t>(1, n))
    throw invalid_argument(std::string(op) + ": ldc = " + s(ldc) + " is smaller than n = " + s(n));
}

}  // namespace gemm_detail

/// C (m x n, leading dimension ldc) = act(alpha * op(A) * op(B) + beta * C + bias), where op(A) is
/// m x k and op(B) is k x n. A is stored m x k (k x m when transposed) with leading dimension lda,
/// and likewise B. Runs on fluxion's thread pool.
template <gemm_scalar T>
void gemm(transpose trans_a, transpose trans_b, index_t m, index_t n, index_t k, T alpha, const T* a, index_t lda,
          const T* b, index_t ldb, T beta, T* c, index_t ldc, const gemm_epilogue<T>& epilogue = {}) {
  const bool ta = trans_a == transpose::yes, tb = trans_b == transpose::yes;
  gemm_detail::check_gemm_args("gemm", ta, tb, m, n, k, lda, ldb, ldc);
  gemm_detail::gemm_unchecked(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue, true);
}

/// batch_count independent products; matrix i of A starts at a + i * stride_a, and so on. The same
/// epilogue (and bias) applies to each. Matrices of C must not overlap.
template <gemm_scalar T>
void gemm_strided_batched(transpose trans_a, transpose trans_b, index_t m, index_t n, index_t k, T alpha,
                          const T* a, index_t lda, index_t stride_a, const T* b, index_t ldb, index_t stride_b,
                          T beta, T* c, index_t ldc, index_t stride_c, index_t batch_count,
                          const gemm_epilogue<T>& epilogue = {}) {
  const bool ta = trans_a == transpose::yes, tb = trans_b == transpose::yes;
  gemm_detail::check_gemm_args("gemm_strided_batched", ta, tb, m, n, k, lda, ldb, ldc);
  if (batch_count < 0)
    throw invalid_argument("gemm_strided_batched: batch_count = " + std::to_string(batch_count) +
                           " is negative");
  if (batch_count == 0 || m == 0 || n == 0) return;
  // Large products use all threads each, one after the other; small ones are one task each.
  if (2.0 * m * n * k >= (1 << 22)) {
    for (index_t i = 0; i < batch_count; ++i)
      gemm_detail::gemm_unchecked(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                                  c + i * stride_c, ldc, epilogue, true);
    return;
  }
  parallel_for(batch_count, [&](index_t i) {
    gemm_detail::gemm_unchecked(ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
                                c + i * stride_c, ldc, epilogue, false);
  });
}

}  // namespace fluxion::detail::cpu
