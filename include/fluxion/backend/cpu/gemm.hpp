// Dense matrix multiplication on the CPU, header-only: C = act(alpha * op(A) * op(B) + beta * C + bias),
// row-major, for float and double, with a strided-batched form. fx::matmul, dense layers and the
// convolution kernels call it; no external BLAS is needed.
//
//   using namespace fluxion::detail::kernels;
//   // y = relu(x * W + b) for x (64 x 784), W (784 x 256), b (256)
//   gemm<float>(transpose::no, transpose::no, 64, 256, 784, 1.f, x, 784, w, 256, 0.f, y, 256,
//               {.bias = b, .act = activation::relu});
//
// The algorithm is BLIS's, with the register tile of detail/gemm_micro_kernel.hpp:
//   - tall C (more than MC rows): op(B) is packed once into NR-column slivers; blocks of C rows are
//     tasks that pack their rows of op(A) per KC-deep slice (or read them in place when C has few
//     columns) and run the micro-kernel over the B slivers;
//   - short, wide C: op(A) is packed once; column blocks are tasks that pack B a few hundred
//     columns at a time;
//   - at most one vector of columns: dot products along k when op(A)'s rows are contiguous
//     (detail/gemm_dot_kernel.hpp; n <= 6, or k of 4 vectors or more), vectors down C's columns when
//     op(A) is stored transposed (detail/gemm_column_kernel.hpp), else tiles of rows by one padded
//     vector; up to n = 12, the transposed product C^T = op(B)^T op(A)^T.
// Every element of C is summed in the same order whichever task computes it (KC-deep slices in
// sequence, one FMA chain per slice), and the path and the task grid depend only on the shape, so
// results are bitwise identical for any thread count. As in BLAS, beta == 0 never reads C.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <concepts>
#include <string>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "detail/gemm_column_kernel.hpp"
#include "detail/gemm_dot_kernel.hpp"
#include "detail/gemm_micro_kernel.hpp"
#include "detail/gemm_pack.hpp"
#include "detail/scratch_buffer.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail::kernels {

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

/// k is cut into slices of equal depth, at most KC: a short last slice would pay the micro-kernel's
/// loads and stores of C for little work (7% at k = 784 = 3 * 256 + 16).
template <class T>
index_t slice_depth(index_t k) {
  return ceil_div(k, ceil_div(k, gemm_kernel_traits<T>::kc));
}

/// The task grid: blocks of mt rows by nt columns. It is a function of the shape only.
struct task_grid {
  index_t mt, nt, tm, tn;
};

// Enough tasks for a few cores to balance, each big enough to pay for its scheduling.
inline constexpr index_t target_tasks = 8;
inline constexpr double min_task_flops = 2.0 * (1 << 20);
// Below this many flops, waking other threads costs more than it saves.
inline constexpr double min_parallel_flops = 4.0 * (1 << 20);

template <class T>
task_grid plan_tasks(index_t m, index_t n, index_t k) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr;
  const index_t tm0 = ceil_div(m, traits::mc);
  index_t tm = tm0, tn = 1;
  auto mt_of = [&](index_t parts) { return round_up(ceil_div(m, parts), mr); };
  auto nt_of = [&](index_t parts) { return round_up(ceil_div(n, parts), nr); };
  for (;;) {
    const index_t mt = mt_of(tm), nt = nt_of(tn);
    if (ceil_div(m, mt) * ceil_div(n, nt) >= target_tasks) break;
    if (static_cast<double>(mt) * nt * k < min_task_flops) break;  // halves would be too small
    // A short, wide C keeps all rows in one block and splits columns; a tall one splits rows.
    if (tm0 > 1 && mt >= 4 * mr)
      tm *= 2;
    else if (nt >= 4 * nr)
      tn *= 2;
    else
      break;
  }
  const index_t mt = mt_of(tm), nt = nt_of(tn);
  return {mt, nt, ceil_div(m, mt), ceil_div(n, nt)};
}

template <class T>
void scale_only(index_t m, index_t n, T beta, T* c, index_t ldc, const gemm_epilogue<T>& ep) {
  const tile_update<T> u{T(0), beta, ep.bias, ep.act == activation::relu};  // alpha * 0: k = 0 ignores alpha
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) update_element(c[i * ldc + j], T(0), u, j);
}

template <class T>
struct problem {
  bool ta, tb;
  index_t m, n, k;
  T alpha;
  const T* a;
  index_t lda;
  const T* b;
  index_t ldb;
  T beta;
  T* c;
  index_t ldc;
  gemm_epilogue<T> ep;
};

/// The whole update in one pass (paths that sum all of k at once).
template <class T>
tile_update<T> full_update(const problem<T>& p) {
  return {p.alpha, p.beta, p.ep.bias, p.ep.act == activation::relu};
}

/// The update for k-slice q of `slices`: beta only on the first, the epilogue only on the last.
template <class T>
tile_update<T> slice_update(const problem<T>& p, index_t q, index_t slices) {
  const bool last = q == slices - 1;
  return {p.alpha, q == 0 ? p.beta : T(1), nullptr, last && p.ep.act == activation::relu};
}

/// The h (< MR) rows of A at `as` (row stride lda) packed as MR-value slivers, padded with zeros.
template <class T, index_t MR>
const T* edge_sliver(index_t kc, const T* as, index_t lda, index_t h) {
  T* packed = scratch<T, scratch_slot::gemm_edge>(static_cast<std::size_t>(MR * kc));
  pack_partial_sliver(packed, as, lda, 1, h, MR, kc);
  return packed;
}

/// One tile of MR rows (the first h stored) by NR columns (the first w stored). `as` is an A sliver
/// of MR values per k (a_stride == 0) or MR rows read in place. A right-edge tile runs the same kernel
/// on a padded copy, so edge elements round like the rest.
/// The micro-kernel is inlined at one call site only: it is most of GEMM's compile time, so the
/// padded edge tile and the full tile share it, with the destination chosen before the call.
template <class T, index_t MR>
FLUXION_ALWAYS_INLINE void tile(index_t kc, const T* as, index_t a_stride, const T* bs, T* cp, index_t ldc,
                                const tile_update<T>& u, index_t h, index_t w) {
  constexpr index_t nr = gemm_kernel_traits<T>::nr;
  alignas(buffer_alignment) T padded[MR * nr];
  alignas(buffer_alignment) T padded_bias[nr];
  const bool edge = w != nr;
  tile_update<T> ue = u;
  if (edge) {
    std::fill_n(padded, MR * nr, T(0));
    if (u.beta != T(0))
      for (index_t i = 0; i < h; ++i)
        for (index_t j = 0; j < w; ++j) padded[i * nr + j] = cp[i * ldc + j];
    if (u.bias) {
      std::fill_n(padded_bias, nr, T(0));
      for (index_t j = 0; j < w; ++j) padded_bias[j] = u.bias[j];
      ue.bias = padded_bias;
    }
  }
  micro_kernel<T, MR>(kc, as, a_stride, bs, edge ? padded : cp, edge ? nr : ldc, ue, h);
  if (edge)
    for (index_t i = 0; i < h; ++i)
      for (index_t j = 0; j < w; ++j) cp[i * ldc + j] = padded[i * nr + j];
}

/// All tiles of rows [i0, i0 + rows) in the NR columns starting at js, for one k-slice. `ap` holds
/// those rows' A slivers as pack_a lays them out (lda == 0), or is row i0 of op(A) at column k0, read
/// in place with row stride lda; `bs` is the B sliver. A bottom edge of h rows runs the kernel of
/// edge_height(h) rows (a full tile is h = MR), in place when exactly that many rows are left, else on a
/// padded sliver.
template <class T>
void sliver_tiles(const problem<T>& p, tile_update<T> u, bool last, index_t kc, const T* ap, index_t lda, index_t i0,
                  index_t rows, const T* bs, index_t js) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr;
  const index_t w = std::min(nr, p.n - js);
  u.bias = last && p.ep.bias ? p.ep.bias + js : nullptr;
  for (index_t is = 0; is < rows; is += mr) {
    const index_t h = std::min(mr, rows - is);
    const T* as = lda == 0 ? ap + is * kc : ap + is * lda;
    T* cp = p.c + (i0 + is) * p.ldc + js;
    with_edge_height<T>(h, [&]<index_t MR>() {
      const bool copy = lda != 0 && h < MR;  // rows past the end cannot be read in place
      tile<T, MR>(kc, copy ? edge_sliver<T, MR>(kc, as, lda, h) : as, copy ? 0 : lda, bs, cp, p.ldc, u, h, w);
    });
  }
}

template <class T, class Task>
void run_tasks(bool parallel, index_t n_tasks, Task&& task) {
  if (parallel)
    parallel_for(n_tasks, task);
  else
    for (index_t t = 0; t < n_tasks; ++t) task(t);
}

// op(A) with rows contiguous along k is read in place by the micro-kernel instead of packed when
// C has few columns: packing would be amortized over only a few B slivers (7-10% faster at n = 64,
// as in convolutions), while with many slivers the packed copy's locality wins (5-8% at n >= 256).
inline constexpr index_t a_in_place_max_n = 128;
inline int a_in_place_mode = 1;  // 0: never, 1: by the rule above (a switch for measurements)
template <class T>
bool reads_a_in_place(const problem<T>& p) {
  return a_in_place_mode == 1 && !p.ta && p.n <= a_in_place_max_n;
}

/// Elements packed op(B) needs: slice q (rows k0..k0+kc of op(B)) starts at k0 * npad, and its
/// sliver at column j at + j * kc.
template <class T>
index_t packed_b_size(index_t k, index_t n) {
  return k * round_up(n, gemm_kernel_traits<T>::nr);
}

/// Shared packed panels that the tasks needing a piece pack on demand, so that packing and the
/// product share one parallel region: waking the pool twice costs more than the packing on mid-sized
/// products. A task claims each idle piece it needs with a compare-and-swap and packs it, then waits
/// for the pieces other tasks claimed first: tasks that start together pack different pieces side by
/// side instead of one packing while the others wait. Nothing can deadlock (a claimed piece is being
/// packed by a running task), and packing is a copy, so who packs changes no result.
class pack_once {
 public:
  pack_once(std::int32_t* flags, index_t pieces) : m_flags(flags) { std::fill_n(flags, pieces, idle); }

  /// Makes pieces [first, first + count) ready; pack(piece) packs one.
  template <class Pack>
  void require(index_t first, index_t count, Pack&& pack) const {
    bool others = false;
    for (index_t piece = first; piece < first + count; ++piece) {
      std::atomic_ref<std::int32_t> state(m_flags[piece]);
      if (state.load(std::memory_order_acquire) == ready) continue;
      std::int32_t expected = idle;
      if (state.compare_exchange_strong(expected, packing, std::memory_order_acq_rel)) {
        pack(piece);
        state.store(ready, std::memory_order_release);
      } else {
        others = true;
      }
    }
    if (!others) return;
    for (index_t piece = first; piece < first + count; ++piece) {
      std::atomic_ref<std::int32_t> state(m_flags[piece]);
      while (state.load(std::memory_order_acquire) != ready) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
  }

 private:
  static constexpr std::int32_t idle = 0, packing = 1, ready = 2;
  std::int32_t* m_flags;
};

/// op(B) in the layout above, packed on demand in pieces of about 128 columns of one k-slice: small
/// enough that two tasks needing the same columns pack them together, long enough that each row of
/// B is read a few cache lines at a time.
template <class T>
class packed_b {
 public:
  static constexpr index_t strips_per_piece = std::max<index_t>(1, 128 / gemm_kernel_traits<T>::nr);

  static index_t flag_count(index_t k, index_t n) {
    using traits = gemm_kernel_traits<T>;
    return ceil_div(k, slice_depth<T>(k)) * ceil_div(round_up(n, traits::nr) / traits::nr, strips_per_piece);
  }

  packed_b(const problem<T>& p, T* data, std::int32_t* flags)
      : m_p(p),
        m_data(data),
        m_once(flags, flag_count(p.k, p.n)),
        m_npad(round_up(p.n, gemm_kernel_traits<T>::nr)),
        m_pieces(ceil_div(m_npad / gemm_kernel_traits<T>::nr, strips_per_piece)) {}

  const T* data() const { return m_data; }

  /// Makes slice q of columns [j0, j0 + cols) ready to read.
  void require(index_t q, index_t j0, index_t cols) const {
    constexpr index_t piece_cols = strips_per_piece * gemm_kernel_traits<T>::nr;
    const index_t g0 = j0 / piece_cols, g1 = ceil_div(j0 + cols, piece_cols);
    m_once.require(q * m_pieces + g0, g1 - g0, [&](index_t piece) {
      const index_t g = piece - q * m_pieces;
      const index_t depth = slice_depth<T>(m_p.k), k0 = q * depth, kc = std::min(depth, m_p.k - k0);
      const index_t c0 = g * piece_cols, w = std::min(piece_cols, m_p.n - c0);
      pack_b(m_data + k0 * m_npad + c0 * kc, m_p.b, m_p.ldb, m_p.tb, k0, kc, c0, w);
    });
  }

 private:
  const problem<T>& m_p;
  T* m_data;
  pack_once m_once;
  index_t m_npad, m_pieces;
};

/// Rows [i0, i0 + rows) by columns [j0, j0 + cols) of C against op(B) in `b` (p.b is read only
/// to pack it). Runs on the calling thread.
template <class T>
void rows_with_packed_b(const problem<T>& p, const packed_b<T>& b, index_t i0, index_t rows, index_t j0, index_t cols) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t nr = traits::nr;
  const index_t npad = round_up(p.n, nr), depth = slice_depth<T>(p.k), slices = ceil_div(p.k, depth);
  const bool in_place = reads_a_in_place(p);
  T* ap = in_place ? nullptr
                   : scratch<T, scratch_slot::gemm_a>(static_cast<std::size_t>(round_up(rows, traits::mr) * depth));
  for (index_t q = 0; q < slices; ++q) {
    const index_t k0 = q * depth, kc = std::min(depth, p.k - k0);
    if (!in_place) pack_a(ap, p.a, p.lda, p.ta, i0, rows, k0, kc);
    b.require(q, j0, cols);
    const T* a_slice = in_place ? p.a + i0 * p.lda + k0 : ap;
    const tile_update<T> u = slice_update(p, q, slices);
    for (index_t js = j0; js < j0 + cols; js += nr)
      sliver_tiles(p, u, q == slices - 1, kc, a_slice, in_place ? p.lda : 0, i0, rows, b.data() + k0 * npad + js * kc,
                   js);
  }
}

// Tall C: op(B) is packed once, shared by all tasks; each task packs its own rows of op(A) per
// k-slice, so that block stays in L2 while the B slivers stream through L1. Convolutions reuse
// packed_b and rows_with_packed_b directly: one packed filter, many row blocks of im2col columns.

template <class T>
void gemm_tall(const problem<T>& p, const task_grid& grid, bool parallel) {
  T* bp = scratch<T, scratch_slot::gemm_b>(static_cast<std::size_t>(packed_b_size<T>(p.k, p.n)));
  auto* flags =
      scratch<std::int32_t, scratch_slot::gemm_flags>(static_cast<std::size_t>(packed_b<T>::flag_count(p.k, p.n)));
  const packed_b<T> b(p, bp, flags);
  run_tasks<T>(parallel, grid.tm * grid.tn, [&](index_t t) {
    const index_t i0 = (t % grid.tm) * grid.mt, j0 = (t / grid.tm) * grid.nt;
    rows_with_packed_b(p, b, i0, std::min(grid.mt, p.m - i0), j0, std::min(grid.nt, p.n - j0));
  });
}

// Short, wide C (m fits one block): op(A) is packed once (on demand, a k-slice at a time) and
// shared; each task owns a range of columns and packs B right before the micro-kernels use it.
/// Prefetches (into L2) part `part` of `parts` of the rows of op(B) block [k0, k0 + kc) x [j0, j0 + w).
template <class T>
void prefetch_b(const problem<T>& p, index_t k0, index_t kc, index_t j0, index_t w, index_t part, index_t parts) {
  constexpr index_t line = 64 / sizeof(T);
  const index_t rows = p.tb ? w : kc, length = p.tb ? kc : w;
  const T* base = p.tb ? p.b + j0 * p.ldb + k0 : p.b + k0 * p.ldb + j0;
  for (index_t r = part * rows / parts; r < (part + 1) * rows / parts; ++r)
    for (index_t x = 0; x < length; x += line) __builtin_prefetch(base + r * p.ldb + x, 0, 2);
}

template <class T>
void gemm_wide(const problem<T>& p, const task_grid& grid, bool parallel) {
  using traits = gemm_kernel_traits<T>;
  constexpr index_t mr = traits::mr, nr = traits::nr;
  const index_t mpad = round_up(p.m, mr), depth = slice_depth<T>(p.k), slices = ceil_div(p.k, depth);
  // With few columns, A's rows are read in place, as in rows_with_packed_b: packing all of A for a
  // few B slivers cost a third of a 32 x 32 x 32 product.
  const bool in_place = reads_a_in_place(p);
  T* ap = in_place ? nullptr : scratch<T, scratch_slot::gemm_a>(static_cast<std::size_t>(p.k * mpad));
  // A is packed on demand one MR-row sliver of one k-slice at a time, so tasks pack it side by side.
  const index_t slivers = ceil_div(p.m, mr);
  const pack_once a_slivers(scratch<std::int32_t, scratch_slot::gemm_flags>(static_cast<std::size_t>(slices * slivers)),
                            slices * slivers);
  // B is packed a few hundred columns at a time: whole rows of cache lines, so the hardware
  // prefetcher follows, where one sliver per row would miss on every line.
  constexpr index_t chunk = nr * (512 / nr / static_cast<index_t>(sizeof(T)) * 2);
  run_tasks<T>(parallel, grid.tn, [&](index_t t) {
    const index_t j0 = t * grid.nt, cols = std::min(grid.nt, p.n - j0);
    T* bs = scratch<T, scratch_slot::gemm_b>(static_cast<std::size_t>(chunk * depth));
    for (index_t q = 0; q < slices; ++q) {
      const index_t k0 = q * depth, kc = std::min(depth, p.k - k0);
      const tile_update<T> u = slice_update(p, q, slices);
      if (!in_place)
        a_slivers.require(q * slivers, slivers, [&](index_t piece) {
          const index_t i0 = (piece - q * slivers) * mr;
          pack_a(ap + k0 * mpad + i0 * kc, p.a, p.lda, p.ta, i0, std::min(mr, p.m - i0), k0, kc);
        });
      const T* a_slice = in_place ? p.a + k0 : ap + k0 * mpad;
      for (index_t jc = j0; jc < j0 + cols; jc += chunk) {
        const index_t w = std::min(chunk, j0 + cols - jc);
        pack_b(bs, p.b, p.ldb, p.tb, k0, kc, jc, w);
        // The next chunk of B comes from memory: fetch it while this one is multiplied, a few lines
        // per tile (a burst per sliver overflows the miss buffers and evicts the sliver from L1).
        const bool wraps = jc + chunk >= j0 + cols;
        const index_t next_q = wraps ? q + 1 : q, next_j = wraps ? j0 : jc + chunk;
        const index_t row_tiles = ceil_div(p.m, mr), parts = ceil_div(w, nr) * row_tiles;
        for (index_t js = jc; js < jc + w; js += nr)
          for (index_t is = 0; is < p.m; is += mr) {
            if (next_q < slices) {
              const index_t next_k0 = next_q * depth;
              prefetch_b(p, next_k0, std::min(depth, p.k - next_k0), next_j, std::min(chunk, j0 + cols - next_j),
                         (js - jc) / nr * row_tiles + is / mr, parts);
            }
            sliver_tiles(p, u, q == slices - 1, kc, in_place ? a_slice + is * p.lda : a_slice + is * kc,
                         in_place ? p.lda : 0, is, std::min(mr, p.m - is), bs + (js - jc) * kc, js);
          }
      }
    }
  });
}

// A few columns and rows of op(A) contiguous in k: dot products along k (detail/gemm_dot_kernel.hpp).
// Measured against the transposed product below, dot products win up to about 6 columns (3-5x at
// n = 1, a matrix-vector product); up to one vector of columns they beat the narrow path below once
// k has 4 vectors or more (AVX-512, against cblas_sgemm in the same process: 64 x 10 x 256 0.71 ->
// 1.05-1.25 of OpenBLAS's speed, 64 x 10 x 64 0.61 -> 0.86; at k = 20 they reach 0.45, narrow 0.47).
inline constexpr index_t dot_max_n = 6;
inline constexpr index_t dot_min_k_vectors = 4;
inline constexpr index_t swapped_max_n = 12;

template <class T>
bool uses_dot_kernel(const problem<T>& p) {
  return !p.ta && (p.n <= dot_max_n || (p.n <= simd_ops<T>::width && p.k >= dot_min_k_vectors * simd_ops<T>::width));
}

template <class T>
void gemm_dot(const problem<T>& p, bool parallel) {
  constexpr index_t w = simd_ops<T>::width;
  const index_t ldbt = round_up(p.k, w);
  T* bt = scratch<T, scratch_slot::gemm_b>(static_cast<std::size_t>(p.n * ldbt));
  for (index_t j = 0; j < p.n; ++j) std::fill(bt + j * ldbt + p.k, bt + (j + 1) * ldbt, T(0));
  if (p.tb)
    for (index_t j = 0; j < p.n; ++j) std::copy_n(p.b + j * p.ldb, p.k, bt + j * ldbt);
  else
    for (index_t j = 0; j < p.n; ++j)  // written in order: 0.4 us for 256 x 10, 0.7 us by rows of B
      for (index_t q = 0; q < p.k; ++q) bt[j * ldbt + q] = p.b[q * p.ldb + j];
  constexpr index_t rows_per_task = 32;
  const tile_update<T> u = full_update(p);
  run_tasks<T>(parallel, ceil_div(p.m, rows_per_task), [&](index_t t) {
    const index_t i0 = t * rows_per_task;
    dot_rows<T>(p.k, p.n, p.a + i0 * p.lda, p.lda, bt, ldbt, p.c + i0 * p.ldc, p.ldc, std::min(rows_per_task, p.m - i0),
                u);
  });
}

// A few rows and B's rows contiguous along n (a matrix-vector product x^T * W, or the weight gradient
// X^T * g of a one-unit layer after the transposed product below): each row of C is a sum of rows of
// B scaled by one row of op(A), so B streams through once, in order, with no packing. The micro-
// kernel would fill at most few_rows_max_m of its MR rows and first repack all of B (8x slower at
// 1 x 65536 x 16).
inline constexpr index_t few_rows_max_m = 4;

template <class T>
bool uses_few_rows(const problem<T>& p) {
  return p.m <= few_rows_max_m && !p.tb;
}

/// Rows [q_begin, q_end) of B, columns [j_begin, j_begin + len), for the M rows of op(A): acc[i]
/// (len values each, from zero) += op(A)(i, q) * B(q, j), in order of q. B streams through once,
/// four rows at a time, whatever M is: the M accumulator rows stay in L1.
template <class T, index_t M>
void few_rows_chunk(const problem<T>& p, index_t q_begin, index_t q_end, index_t j_begin, index_t len, T* acc,
                    index_t ld_acc) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  const index_t sa_i = p.ta ? 1 : p.lda, sa_k = p.ta ? p.lda : 1;  // op(A)(i, q) = a[i * sa_i + q * sa_k]
  for (index_t i = 0; i < M; ++i) std::fill_n(acc + i * ld_acc, len, T(0));
  index_t q = q_begin;
  for (; q + 4 <= q_end; q += 4) {
    T x[M][4];
    for (index_t i = 0; i < M; ++i)
      for (index_t r = 0; r < 4; ++r) x[i][r] = p.a[i * sa_i + (q + r) * sa_k];
    const T* b0 = p.b + q * p.ldb + j_begin;
    const T *b1 = b0 + p.ldb, *b2 = b1 + p.ldb, *b3 = b2 + p.ldb;
    index_t j = 0;
    for (; j + w <= len; j += w) {
      const batch v0 = ops::loadu(b0 + j), v1 = ops::loadu(b1 + j), v2 = ops::loadu(b2 + j), v3 = ops::loadu(b3 + j);
#pragma GCC unroll 4
      for (index_t i = 0; i < M; ++i) {
        T* ai = acc + i * ld_acc + j;
        batch c = ops::loadu(ai);
        c = ops::fma(ops::splat(x[i][0]), v0, c);
        c = ops::fma(ops::splat(x[i][1]), v1, c);
        c = ops::fma(ops::splat(x[i][2]), v2, c);
        c = ops::fma(ops::splat(x[i][3]), v3, c);
        ops::storeu(ai, c);
      }
    }
    for (; j < len; ++j)
      for (index_t i = 0; i < M; ++i) {
        T& c = acc[i * ld_acc + j];
        c = std::fma(x[i][3], b3[j], std::fma(x[i][2], b2[j], std::fma(x[i][1], b1[j], std::fma(x[i][0], b0[j], c))));
      }
  }
  for (; q < q_end; ++q) {
    const T* b = p.b + q * p.ldb + j_begin;
    for (index_t i = 0; i < M; ++i) {
      const T x = p.a[i * sa_i + q * sa_k];
      const batch av = ops::splat(x);
      T* ai = acc + i * ld_acc;
      index_t j = 0;
      for (; j + w <= len; j += w) ops::storeu(ai + j, ops::fma(av, ops::loadu(b + j), ops::loadu(ai + j)));
      for (; j < len; ++j) ai[j] = std::fma(x, b[j], ai[j]);
    }
  }
}

/// How gemm_few_rows splits its work: column panels of at most `panel` values (4 KiB of
/// accumulator per row of A) by chunks of at most `chunk` rows of B. Whole rows of B up to the panel
/// width make one sequential stream per task (half rows, a page apart, ran 7% slower on a batch-1
/// dense layer of 3136 x 1024 at 2 threads, 13% at 1), and chunks of k give threads work when n is
/// one panel. The split depends only on the shape, so results do not depend on the thread count.
template <class T>
struct few_rows_split {
  static constexpr index_t panel = 4096 / static_cast<index_t>(sizeof(T));
  static constexpr index_t chunk = 512;
  index_t panels, chunks;
  explicit few_rows_split(const problem<T>& p) : panels(ceil_div(p.n, panel)), chunks(ceil_div(p.k, chunk)) {}
};

template <class T>
void gemm_few_rows(const problem<T>& p, bool parallel) {
  // Each row of C is a sum of rows of B scaled by one row of op(A). A task owns a panel of columns
  // and a chunk of k, streams that block of B once (four rows at a time, for all M rows of op(A)),
  // and adds into accumulator rows that stay in L1; chunks' sums are then added in chunk order.
  // (Reading one vector-wide column strip down all k rows, as a register-tile GEMM does, jumps a
  // whole row per load and a page per row once ldb reaches 1024 floats: a batch-1 dense layer of
  // 3136 x 1024 ran at 16 GB/s that way.)
  using split = few_rows_split<T>;
  const split sp(p);
  const tile_update<T> update = full_update(p);
  const index_t m = p.m, chunks = sp.chunks;
  // Partial sums: [chunk][row][n], or straight into a task's stack when k is one chunk.
  T* partial = chunks > 1 ? scratch<T, scratch_slot::gemm_c>(static_cast<std::size_t>(chunks * m * p.n)) : nullptr;
  run_tasks<T>(parallel, sp.panels * chunks, [&](index_t t) {
    const index_t pj = t / chunks, ch = t % chunks;
    const index_t j_begin = pj * split::panel, len = std::min(p.n, j_begin + split::panel) - j_begin;
    const index_t q_begin = ch * split::chunk, q_end = std::min(p.k, q_begin + split::chunk);
    alignas(64) T local[split::panel * few_rows_max_m];
    T* acc = partial ? partial + ch * m * p.n + j_begin : local;
    const index_t ld = partial ? p.n : split::panel;
    switch (m) {
      case 1: few_rows_chunk<T, 1>(p, q_begin, q_end, j_begin, len, acc, ld); break;
      case 2: few_rows_chunk<T, 2>(p, q_begin, q_end, j_begin, len, acc, ld); break;
      case 3: few_rows_chunk<T, 3>(p, q_begin, q_end, j_begin, len, acc, ld); break;
      default: few_rows_chunk<T, 4>(p, q_begin, q_end, j_begin, len, acc, ld); break;
    }
    if (!partial)
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < len; ++j)
          update_element(p.c[i * p.ldc + j_begin + j], acc[i * ld + j], update, j_begin + j);
  });
  if (!partial) return;
  // The chunks' sums, in chunk order (vectorized across columns: each column's order is the same).
  using ops = simd_ops<T>;
  constexpr index_t w = ops::width;
  const index_t stride = m * p.n;
  for (index_t i = 0; i < m; ++i) {
    T* first = partial + i * p.n;
    index_t j = 0;
    for (; j + w <= p.n; j += w) {
      auto s = ops::loadu(first + j);
      for (index_t ch = 1; ch < chunks; ++ch) s = s + ops::loadu(first + ch * stride + j);
      ops::storeu(first + j, s);
    }
    for (; j < p.n; ++j)
      for (index_t ch = 1; ch < chunks; ++ch) first[j] += first[ch * stride + j];
    for (j = 0; j < p.n; ++j) update_element(p.c[i * p.ldc + j], first[j], update, j);
  }
}

// At most one vector of columns (a dense layer with 10 units, or its weight gradient X^T * dY): B is
// packed into k rows of one zero-padded vector, and tiles of MR rows by one vector read op(A) where
// it lies, transposed or not: no repacking of A, and at most one vector's width of padding (the
// 14 x 32 register tile would compute 32 columns for 10, and the transposed product below must
// transpose a whole operand: 0.5x of OpenBLAS at 64 x 256 x 10 on AVX-512). Row tiles of 14, 8, 4, 2
// and 1 cover any m exactly, so no row past the end is read.
template <class T>
bool uses_narrow(const problem<T>& p) {
  // With at most few_rows_max_m columns the transposed product below has that few rows, and the
  // streaming path reads op(A) once without broadcasting lanes that are mostly padding; but with
  // op(A) transposed and a vector of rows or more, the column tiles here waste no lane at all, up to
  // swapped_max_n columns (AVX2's 8-float vectors: 10 columns would pad the transposed product's
  // 6 x 16 tile to 12 rows: 256 x 64 x 10 went from 0.83 to 1.22 of OpenBLAS, 784 x 64 x 12 0.92 -> 1.31).
  constexpr index_t w = simd_ops<T>::width;
  if (w == 1 || p.m <= few_rows_max_m) return false;
  if (p.ta && p.m >= w && p.n <= swapped_max_n) return true;
  return p.n <= w && p.n > few_rows_max_m;
}

template <class T, index_t MR>
FLUXION_ALWAYS_INLINE void narrow_tile(const problem<T>& p, index_t i0, const T* bp) {
  using ops = simd_ops<T>;
  using batch = typename ops::batch;
  constexpr index_t w = ops::width;
  const index_t a_row = p.ta ? 1 : p.lda, a_k = p.ta ? p.lda : 1;  // op(A)(i, q) = a[i * a_row + q * a_k]
  const T* a = p.a + i0 * a_row;
  batch acc[MR];
#pragma GCC unroll 16
  for (index_t i = 0; i < MR; ++i) acc[i] = ops::splat(T(0));
  for (index_t q = 0; q < p.k; ++q, a += a_k) {
    const batch bv = ops::load(bp + q * w);
#pragma GCC unroll 16
    for (index_t i = 0; i < MR; ++i) acc[i] = ops::fma(ops::splat(a[i * a_row]), bv, acc[i]);
  }
  alignas(64) T lanes[w];
  const bool plain = p.alpha == T(1) && p.beta == T(0) && !p.ep.bias && p.ep.act == activation::none;
  const tile_update<T> u = full_update(p);
  for (index_t i = 0; i < MR; ++i) {
    ops::storeu(lanes, acc[i]);
    T* c = p.c + (i0 + i) * p.ldc;
    if (plain) {
      std::copy_n(lanes, p.n, c);
      continue;
    }
    for (index_t j = 0; j < p.n; ++j) update_element(c[j], lanes[j], u, j);
  }
}

template <class T>
void gemm_unchecked(const problem<T>& p, bool allow_threads);

template <class T>
void gemm_narrow(const problem<T>& p, bool parallel) {
  constexpr index_t w = simd_ops<T>::width;
  const index_t ldbp = round_up(p.n, w);  // one vector, or more for column tiles only
  // Its own slot: the rows left below may run the general path on this thread, which takes gemm_b
  // while other tasks still read bp.
  T* bp = scratch<T, scratch_slot::gemm_narrow>(static_cast<std::size_t>(p.k * ldbp));
  for (index_t q = 0; q < p.k; ++q) {
    for (index_t j = 0; j < p.n; ++j) bp[q * ldbp + j] = p.tb ? p.b[j * p.ldb + q] : p.b[q * p.ldb + j];
    for (index_t j = p.n; j < ldbp; ++j) bp[q * ldbp + j] = T(0);
  }
  // Stored transposed, op(A)'s columns are contiguous: vectors run down columns of C
  // (detail/gemm_column_kernel.hpp) for all but the last rows.
  const bool columns = p.ta;
  constexpr index_t tile = 14;
  const index_t rows_per_task = columns ? 8 * w : 8 * tile;
  const tile_update<T> u = full_update(p);
  run_tasks<T>(parallel, ceil_div(p.m, rows_per_task), [&](index_t t) {
    index_t i = t * rows_per_task;
    const index_t end = std::min(p.m, i + rows_per_task);
    if (columns) i += column_rows<T>(p.k, p.n, p.a + i, p.lda, bp, ldbp, p.c + i * p.ldc, p.ldc, end - i, u);
    if (i < end && p.n > w) {  // fewer than W rows left, wider than the row tiles below: the general path
      gemm_unchecked<T>({p.ta, p.tb, end - i, p.n, p.k, p.alpha, p.a + i, p.lda, p.b, p.ldb, p.beta, p.c + i * p.ldc,
                         p.ldc, p.ep},
                        false);
      return;
    }
    for (; i + tile <= end; i += tile) narrow_tile<T, tile>(p, i, bp);
    if (i + 8 <= end) narrow_tile<T, 8>(p, i, bp), i += 8;
    if (i + 4 <= end) narrow_tile<T, 4>(p, i, bp), i += 4;
    if (i + 2 <= end) narrow_tile<T, 2>(p, i, bp), i += 2;
    if (i < end) narrow_tile<T, 1>(p, i, bp);
  });
}

// A few columns (a dense layer with 10 units, or its weight gradient X^T * dY): C^T = op(B)^T * op(A)^T
// has a few rows instead, which waste less of the MR x NR tile than a few columns do of its NR.
// The epilogue is applied while transposing back.
template <class T>
bool uses_swapped_product(const problem<T>& p) {
  return p.n <= swapped_max_n && p.m > p.n && !uses_dot_kernel(p);
}

template <class T>
void gemm_swapped(const problem<T>& p, bool allow_threads) {
  T* ct = scratch<T, scratch_slot::gemm_c>(static_cast<std::size_t>(p.n * p.m));
  gemm_unchecked<T>({!p.tb, !p.ta, p.n, p.m, p.k, p.alpha, p.b, p.ldb, p.a, p.lda, T(0), ct, p.m, {}}, allow_threads);
  T* FLUXION_RESTRICT c = p.c;
  if (p.beta == T(0) && !p.ep.bias && p.ep.act == activation::none) {
    for (index_t j = 0; j < p.n; ++j)
      for (index_t i = 0; i < p.m; ++i) c[i * p.ldc + j] = ct[j * p.m + i];
    return;
  }
  tile_update<T> u = full_update(p);
  u.alpha = T(1);  // applied by the transposed product
  for (index_t j = 0; j < p.n; ++j)
    for (index_t i = 0; i < p.m; ++i) update_element(c[i * p.ldc + j], ct[j * p.m + i], u, j);
}

template <class T>
void gemm_unchecked(const problem<T>& p, bool allow_threads) {
  if (p.m == 0 || p.n == 0) return;
  if (p.k == 0 || p.alpha == T(0)) {
    scale_only(p.m, p.n, p.beta, p.c, p.ldc, p.ep);
    return;
  }
  const bool big = 2.0 * p.m * p.n * p.k >= min_parallel_flops;
  // A few rows and more than dot_max_n columns stream B in place: the dot kernel would first copy
  // all of B transposed, as much work as the product itself (1 x 1024 x 10: 2.9 -> 2.0 us).
  if (uses_dot_kernel(p) && !(uses_few_rows(p) && p.n > dot_max_n)) {
    gemm_dot(p, allow_threads && big);
    return;
  }
  if (uses_few_rows(p)) {
    gemm_few_rows(p, allow_threads && big);
    return;
  }
  if (uses_narrow(p)) {
    gemm_narrow(p, allow_threads && big);
    return;
  }
  if (uses_swapped_product(p)) {
    gemm_swapped(p, allow_threads);
    return;
  }
  const task_grid grid = plan_tasks<T>(p.m, p.n, p.k);
  const bool parallel = allow_threads && big && grid.tm * grid.tn > 1;
  if (grid.tm == 1)
    gemm_wide(p, grid, parallel);
  else
    gemm_tall(p, grid, parallel);
}

inline void check_gemm_args(const char* op, bool ta, bool tb, index_t m, index_t n, index_t k, index_t lda, index_t ldb,
                            index_t ldc) {
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
  gemm_detail::gemm_unchecked<T>({ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, epilogue}, true);
}

/// batch_count independent products; matrix i of A starts at a + i * stride_a, and so on. The same
/// epilogue (and bias) applies to each. Matrices of C must not overlap.
template <gemm_scalar T>
void gemm_strided_batched(transpose trans_a, transpose trans_b, index_t m, index_t n, index_t k, T alpha, const T* a,
                          index_t lda, index_t stride_a, const T* b, index_t ldb, index_t stride_b, T beta, T* c,
                          index_t ldc, index_t stride_c, index_t batch_count, const gemm_epilogue<T>& epilogue = {}) {
  const bool ta = trans_a == transpose::yes, tb = trans_b == transpose::yes;
  gemm_detail::check_gemm_args("gemm_strided_batched", ta, tb, m, n, k, lda, ldb, ldc);
  if (batch_count < 0)
    throw invalid_argument("gemm_strided_batched: batch_count = " + std::to_string(batch_count) + " is negative");
  if (batch_count == 0 || m == 0 || n == 0) return;
  // Large products use all threads each, one after the other; small ones are one task each.
  if (2.0 * m * n * k >= (1 << 22)) {
    for (index_t i = 0; i < batch_count; ++i)
      gemm_detail::gemm_unchecked<T>(
          {ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc, epilogue},
          true);
    return;
  }
  parallel_for(batch_count, [&](index_t i) {
    gemm_detail::gemm_unchecked<T>(
        {ta, tb, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c, ldc, epilogue},
        false);
  });
}

}  // namespace fluxion::detail::kernels
