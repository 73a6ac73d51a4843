// The CPU evaluator: runs a view tree as one loop over memory, vectorized with xsimd for the
// architecture the compiler targets (-march=native picks AVX2 or AVX-512) and split across the
// thread pool in fixed-size tasks. Task boundaries never depend on the thread count, and partial
// results are combined in task order, so every result is bitwise identical for any thread count.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "detail/xsimd.hpp"

#include "../../core/shape.hpp"
#include "../../expr/forward.hpp"
#include "../../expr/layout.hpp"
#include "../../expr/reduce_ops.hpp"
#include "../../expr/view.hpp"
#include "detail/simd_arch.hpp"
#include "matmul.hpp"
#include "simd_ops.hpp"
#include "thread_pool.hpp"

namespace fluxion::detail {

namespace simd {

template <class T>
inline constexpr bool vector_type_v = std::is_same_v<T, float> || std::is_same_v<T, double>;

template <class T>
using batch = xsimd::batch<T, simd_arch>;

/// Whether a view evaluates with SIMD batches of T: every node has a SIMD rule and every value
/// along the way is a T.
template <class V, class T>
struct enabled : std::false_type {};
template <class T>
struct enabled<leaf_view<T>, T> : std::bool_constant<vector_type_v<T>> {};
template <class T>
struct enabled<scalar_view<T>, T> : std::bool_constant<vector_type_v<T>> {};
/// gather: a batch of rows of data at one index (the index broadcast along the row: an embedding's
/// or gather_nd's rows) is a load; otherwise the elements are read one by one into a batch.
template <class T, class I>
struct enabled<gather_view<T, I>, T> : std::bool_constant<vector_type_v<T>> {};
template <class Op, class A, class T>
struct enabled<unary_view<Op, A>, T>
    : std::bool_constant<op<Op>::available && std::is_same_v<typename unary_view<Op, A>::value_type, T> &&
                         enabled<A, T>::value> {};
template <class Op, class A, class B, class T>
struct enabled<binary_view<Op, A, B>, T>
    : std::bool_constant<op<Op>::available && std::is_same_v<typename binary_view<Op, A, B>::value_type, T> &&
                         enabled<A, T>::value && enabled<B, T>::value> {};

/// Masks: bool-valued views evaluated as xsimd::batch_bool<T>, one lane per lane of a T batch.
/// where(mask, x, y) is a SIMD select and cast<T>(mask) a select of 1 and 0, so the shapes of every
/// derivative with a kink (relu, abs, max, clip: where(compare(a, b), x, y)), of a user's
/// where(keep, x, 0.f) on a bool tensor, of where((x > 0) && (y > 0), ...) and of a metric's
/// cast<double>(p > threshold) keep the whole statement in the SIMD loop. A scalar loop branches on
/// each value, and mispredicts half the time on random data: 10x slower (stop 86).
template <class Cmp>
struct compare_op {
  static constexpr bool available = false;
};
#define FLUXION_SIMD_COMPARE(Tag, sym)                                              \
  template <>                                                                       \
  struct compare_op<ops::Tag> {                                                     \
    static constexpr bool available = true;                                         \
    template <class B>                                                              \
    FLUXION_ALWAYS_INLINE static auto apply(const B& a, const B& b) { return a sym b; } \
  };
FLUXION_SIMD_COMPARE(equal, ==)
template <>  // xsimd's != is ordered (false on NaN); C++'s is not
struct compare_op<ops::not_equal> {
  static constexpr bool available = true;
  template <class B>
  FLUXION_ALWAYS_INLINE static auto apply(const B& a, const B& b) { return !(a == b); }
};
FLUXION_SIMD_COMPARE(less, <)
FLUXION_SIMD_COMPARE(less_equal, <=)
FLUXION_SIMD_COMPARE(greater, >)
FLUXION_SIMD_COMPARE(greater_equal, >=)
#undef FLUXION_SIMD_COMPARE

/// Whether a view evaluates as a mask of T's lanes. A compare reads two T-valued views; logical
/// and, or and not read masks; is_nan and is_finite read a T-valued view; a bool tensor is read
/// byte by byte.
template <class M, class T>
struct mask : std::false_type {};
template <class T>
struct mask<leaf_view<bool>, T> : std::bool_constant<vector_type_v<T>> {};
template <class T>
struct mask<scalar_view<bool>, T> : std::bool_constant<vector_type_v<T>> {};
/// Integer operands of a compare: a tensor of integers, an axis's coordinate (iota) or a constant,
/// signed and as wide as T (int32 with float, int64 with double), so that lane k of the comparison
/// is lane k of T's mask. one_hot(labels, classes), where(expand_dims(labels) == iota, 1, 0), and
/// the sparse cross entropy and its gradient built on it ran scalar (stop 87).
template <class I, class T>
inline constexpr bool int_lane_type_v =
    std::is_integral_v<I> && std::is_signed_v<I> && sizeof(I) == sizeof(T) && vector_type_v<T>;
template <class V, class T>
struct int_lanes : std::false_type {};
template <class I, class T>
struct int_lanes<leaf_view<I>, T> : std::bool_constant<int_lane_type_v<I, T>> {};
template <class I, class T>
struct int_lanes<iota_view<I>, T> : std::bool_constant<int_lane_type_v<I, T>> {};
template <class I, class T>
struct int_lanes<scalar_view<I>, T> : std::bool_constant<int_lane_type_v<I, T>> {};
template <class A, class B, class T>
inline constexpr bool int_compare_v = int_lanes<A, T>::value && int_lanes<B, T>::value &&
                                      std::is_same_v<typename A::value_type, typename B::value_type>;

template <class Cmp, class A, class B, class T>
struct mask<binary_view<Cmp, A, B>, T>
    : std::bool_constant<compare_op<Cmp>::available &&
                         ((enabled<A, T>::value && enabled<B, T>::value) || int_compare_v<A, B, T>)> {};
template <class A, class B, class T>
struct mask<binary_view<ops::logical_and, A, B>, T> : std::bool_constant<mask<A, T>::value && mask<B, T>::value> {};
template <class A, class B, class T>
struct mask<binary_view<ops::logical_or, A, B>, T> : std::bool_constant<mask<A, T>::value && mask<B, T>::value> {};
template <class A, class T>
struct mask<unary_view<ops::logical_not, A>, T> : mask<A, T> {};
template <class A, class T>
struct mask<unary_view<ops::is_nan, A>, T> : enabled<A, T> {};
template <class A, class T>
struct mask<unary_view<ops::is_finite, A>, T> : enabled<A, T> {};

template <class M, class X, class Y, class T>
struct enabled<ternary_view<ops::where, M, X, Y>, T>
    : std::bool_constant<std::is_same_v<typename ternary_view<ops::where, M, X, Y>::value_type, T> &&
                         mask<M, T>::value && enabled<X, T>::value && enabled<Y, T>::value> {};
/// cast<T> of a mask (1 or 0), or of a T-valued view (itself).
template <class A, class T>
struct enabled<unary_view<ops::cast<T>, A>, T> : std::bool_constant<mask<A, T>::value || enabled<A, T>::value> {};

/// The lanes of a statement over short rows, walked flat (lanes_span): W consecutive elements of a
/// (rows, cols) iteration from flat index `flat`, lane 0 at (row0, col0). Lane k is at row
/// row0 + rows_of[col0 + k] (rows_of[m] = m / cols, a table of the task's), so a cursor moves by
/// scalars only and the lanes' coordinates are computed where a gather needs them (lane_offsets).
/// `one_row` says every lane is in row0 (col0 + W <= cols), so a leaf's lanes are a run of its row;
/// `whole`, that all W lanes are in the statement (else `valid` are, and the rest read the last
/// element). A statement that broadcast a per-row value along rows of 10 classes ran its rows one
/// by one, each shorter than a vector: scalar (stop 87).
template <class T>
using lane_int = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
template <class T>
using lane_index = xsimd::batch<lane_int<T>, simd_arch>;
template <class T>
struct lane_cursor {
  index_t flat, row0, col0, cols;
  index_t step_rows, step_cols;  // W = step_rows * cols + step_cols
  index_t valid;
  const lane_int<T>* rows_of;
  bool one_row;
  bool whole;
};

/// The memory leaves of a view that a lane cursor can read (-1 where one cannot: a gather, whose
/// rows, an embedding's, the row path reads as runs). A statement over one leaf collapses to one
/// row unless the leaf is strided, so only two or more take the lanes path (runs_in_lanes): the
/// statements that broadcast.
template <class V>
struct lanes_leaves : std::integral_constant<int, 1> {};
template <class T>
struct lanes_leaves<scalar_view<T>> : std::integral_constant<int, 0> {};
template <class T, class I>
struct lanes_leaves<gather_view<T, I>> : std::integral_constant<int, -1> {};
inline constexpr int lanes_sum(int a, int b) { return a < 0 || b < 0 ? -1 : a + b; }
template <class Op, class A>
struct lanes_leaves<unary_view<Op, A>> : lanes_leaves<A> {};
template <class Op, class A, class B>
struct lanes_leaves<binary_view<Op, A, B>> : std::integral_constant<int, lanes_sum(lanes_leaves<A>::value, lanes_leaves<B>::value)> {};
template <class Op, class A, class B, class C>
struct lanes_leaves<ternary_view<Op, A, B, C>>
    : std::integral_constant<int, lanes_sum(lanes_sum(lanes_leaves<A>::value, lanes_leaves<B>::value), lanes_leaves<C>::value)> {};
template <class V>
struct lanes_ready : std::bool_constant<(lanes_leaves<V>::value >= 2)> {};

// Lanes j, j + 1, ... of a row (j: an index, after seek()), or the lanes of a cursor.
template <class T, class J>
batch<T> row(const leaf_view<T>& l, const J& j);
template <class T, class J>
batch<T> row(const scalar_view<T>& s, const J&);
template <class Op, class A, class J>
auto row(const unary_view<Op, A>& v, const J& j);
template <class Op, class A, class B, class J>
auto row(const binary_view<Op, A, B>& v, const J& j);
template <class M, class X, class Y, class J>
auto row(const ternary_view<ops::where, M, X, Y>& v, const J& j);
template <class T, class A, class J>
batch<T> row(const unary_view<ops::cast<T>, A>& v, const J& j);
template <class T, class I>
batch<T> row(const gather_view<T, I>& g, index_t j);

/// The same, for rows where every leaf is known to be contiguous (inner stride 1): no branches.
template <class Op, class A>
auto contiguous_row(const unary_view<Op, A>& v, index_t j);
template <class Op, class A, class B>
auto contiguous_row(const binary_view<Op, A, B>& v, index_t j);
template <class M, class X, class Y>
auto contiguous_row(const ternary_view<ops::where, M, X, Y>& v, index_t j);
template <class T, class A>
batch<T> contiguous_row(const unary_view<ops::cast<T>, A>& v, index_t j);
template <class T, class I>
batch<T> contiguous_row(const gather_view<T, I>& g, index_t j);
template <class T>
FLUXION_ALWAYS_INLINE batch<T> contiguous_row(const leaf_view<T>& l, index_t j) {
  return batch<T>::load_unaligned(l.data + l.base + j);
}
template <class T>
FLUXION_ALWAYS_INLINE batch<T> contiguous_row(const scalar_view<T>& s, index_t) {
  return batch<T>(s.value);
}
template <class Op, class A>
FLUXION_ALWAYS_INLINE auto contiguous_row(const unary_view<Op, A>& v, index_t j) {
  return op<Op>::apply(contiguous_row(v.a, j));
}
template <class Op, class A, class B>
FLUXION_ALWAYS_INLINE auto contiguous_row(const binary_view<Op, A, B>& v, index_t j) {
  return op<Op>::apply(contiguous_row(v.a, j), contiguous_row(v.b, j));
}

/// Lanes of a mask, as batch_bool<T>, at j (an index or a cursor, as row); C: every leaf is
/// contiguous (contiguous_row).
template <class T>
using mask_batch = xsimd::batch_bool<T, simd_arch>;
template <class T, bool C, class J>
mask_batch<T> mask_row(const leaf_view<bool>& l, const J& j);
template <class T, bool C, class J>
mask_batch<T> mask_row(const scalar_view<bool>& s, const J& j);
template <class T, bool C, class Cmp, class A, class B, class J>
mask_batch<T> mask_row(const binary_view<Cmp, A, B>& v, const J& j);
template <class T, bool C, class A, class B, class J>
mask_batch<T> mask_row(const binary_view<ops::logical_and, A, B>& v, const J& j);
template <class T, bool C, class A, class B, class J>
mask_batch<T> mask_row(const binary_view<ops::logical_or, A, B>& v, const J& j);
template <class T, bool C, class A, class J>
mask_batch<T> mask_row(const unary_view<ops::logical_not, A>& v, const J& j);
template <class T, bool C, class A, class J>
mask_batch<T> mask_row(const unary_view<ops::is_nan, A>& v, const J& j);
template <class T, bool C, class A, class J>
mask_batch<T> mask_row(const unary_view<ops::is_finite, A>& v, const J& j);

/// p[offsets[k]] in lane k: the gather instruction where the target has one (xsimd 8's gather falls
/// back to a lane-by-lane insert, several times slower).
template <class T>
FLUXION_ALWAYS_INLINE batch<T> gather_lanes(const T* p, const lane_index<T>& offsets) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch> && sizeof(T) == 4) {
    return _mm512_i32gather_ps(static_cast<__m512i>(offsets), p, 4);
  } else if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch>) {
    return _mm512_i64gather_pd(static_cast<__m512i>(offsets), p, 8);
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch> && sizeof(T) == 4) {
    return _mm256_i32gather_ps(p, static_cast<__m256i>(offsets), 4);
  } else if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch>) {
    return _mm256_i64gather_pd(p, static_cast<__m256i>(offsets), 8);
  }
#endif
  alignas(64) typename lane_index<T>::value_type at[batch<T>::size];
  alignas(64) T lanes[batch<T>::size];
  offsets.store_aligned(at);
  for (std::size_t k = 0; k < batch<T>::size; ++k) lanes[k] = p[at[k]];
  return batch<T>::load_aligned(lanes);
}

template <class T>
FLUXION_ALWAYS_INLINE lane_index<T> lane_steps() {  // 0, 1, ..., W - 1
  alignas(64) lane_int<T> k[batch<T>::size];
  for (std::size_t i = 0; i < batch<T>::size; ++i) k[i] = static_cast<lane_int<T>>(i);
  return lane_index<T>::load_aligned(k);
}
/// p[rows[k]] in lane k, reading p[0, n) only (rows[k] < n <= W): a masked load and a permute where
/// the target has them, else gather_lanes. A per-row operand (a softmax's log-sum-exp, a loss's
/// labels) along rows shorter than a vector: the gather took 13-17% of a loss step (stop 88).
template <class T>
FLUXION_ALWAYS_INLINE batch<T> spread_rows(const T* p, const lane_index<T>& rows, index_t n) {
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch> && sizeof(T) == 4) {
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1u);
    return _mm512_permutexvar_ps(static_cast<__m512i>(rows), _mm512_maskz_loadu_ps(m, p));
  } else if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch>) {
    const __mmask8 m = static_cast<__mmask8>((1u << n) - 1u);
    return _mm512_permutexvar_pd(static_cast<__m512i>(rows), _mm512_maskz_loadu_pd(m, p));
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch> && sizeof(T) == 4) {
    const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return _mm256_permutevar8x32_ps(_mm256_maskload_ps(p, m), static_cast<__m256i>(rows));
  } else if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch>) {
    const __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
    const __m256i r2 = _mm256_slli_epi64(static_cast<__m256i>(rows), 1);  // float lanes 2r, 2r + 1
    const __m256i idx = _mm256_or_si256(r2, _mm256_slli_epi64(_mm256_add_epi64(r2, _mm256_set1_epi64x(1)), 32));
    return _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_maskload_pd(p, m)), idx));
  }
#endif
  (void)n;
  return gather_lanes(p, rows);
}

/// Each lane's offset in a leaf whose (row, column) strides are (so, si): the first lane's, plus
/// k * si along the row and rows_of[col0 + k] * (so - cols * si) for the rows lane k has crossed
/// (in the lanes' integers, which wrap: the sum is each offset, and lanes_fit keeps it in range).
/// The last vector of a task, short of W, by division: once per task.
template <class T>
FLUXION_ALWAYS_INLINE lane_index<T> offsets_at(const lane_cursor<T>& c, index_t so, index_t si) {
  using I = lane_index<T>;
  using E = lane_int<T>;
  if (c.whole) {
    const I first(static_cast<E>(c.row0 * so + c.col0 * si));
    const I along = si == 0 ? first : first + lane_steps<T>() * I(static_cast<E>(si));
    if (c.one_row) return along;
    return along + I::load_unaligned(c.rows_of + c.col0) * I(static_cast<E>(so - c.cols * si));
  }
  alignas(64) E at[batch<T>::size];
  for (index_t k = 0; k < static_cast<index_t>(batch<T>::size); ++k) {
    const index_t f = c.flat + std::min(k, c.valid - 1);
    at[k] = static_cast<E>(f / c.cols * so + f % c.cols * si);
  }
  return I::load_aligned(at);
}
/// The lanes of a tail (the last vector of a task, short of W), out of line once per element type.
/// The cursor is passed by value here and in gathered: its address, taken by a call in the loop,
/// kept it in memory (1.2-1.3x slower, stop 88).
template <class T>
FLUXION_NOINLINE lane_index<T> tail_offsets(const lane_cursor<T> c, index_t so, index_t si) {
  return offsets_at(c, so, si);
}
/// offsets_at, inline but for a tail (an axis's coordinate, iota, reads it every vector).
template <class T>
FLUXION_ALWAYS_INLINE lane_index<T> lane_offsets(const lane_cursor<T>& c, index_t so, index_t si) {
  return c.whole ? offsets_at(c, so, si) : tail_offsets(c, so, si);
}
/// p[k * inner] in lane k of a batch B.
template <class B>
FLUXION_ALWAYS_INLINE B strided_load(const typename B::value_type* p, index_t inner) {
  alignas(64) typename B::value_type tmp[B::size];
  for (std::size_t k = 0; k < B::size; ++k) tmp[k] = p[static_cast<index_t>(k) * inner];
  return B::load_aligned(tmp);
}
/// How a leaf's lanes are read, for each kind of lanes (values of T here; integers of T's width,
/// int_lanes_of, and a mask's bools, bool_lanes, below): run(p), W elements from p; one(p), *p in
/// every lane; strided(p, inner), p[k * inner]; gather(p, offsets), p[offsets[k]]; where `spreads`,
/// spread(p, rows, n), p[rows[k]] from p[0, n) (spread_rows).
template <class T>
struct value_lanes {
  using elem = T;
  static constexpr bool spreads = true;
  FLUXION_ALWAYS_INLINE static batch<T> run(const T* p) { return batch<T>::load_unaligned(p); }
  FLUXION_ALWAYS_INLINE static batch<T> one(const T* p) { return batch<T>(*p); }
  FLUXION_ALWAYS_INLINE static batch<T> strided(const T* p, index_t inner) { return strided_load<batch<T>>(p, inner); }
  FLUXION_ALWAYS_INLINE static batch<T> gather(const T* p, const lane_index<T>& offsets) { return gather_lanes(p, offsets); }
  FLUXION_ALWAYS_INLINE static batch<T> spread(const T* p, const lane_index<T>& rows, index_t n) {
    return spread_rows(p, rows, n);
  }
};
/// The lanes at a cursor of memory laid out with (row, column) strides (so, si) that are neither a
/// run nor one value: a gather. Out of line, once per element type and kind: inlined into every
/// statement's loop it cost each program's build 2% (stop 87).
template <class L, class T>
FLUXION_NOINLINE auto gathered(const typename L::elem* p, index_t so, index_t si, const lane_cursor<T> c) {
  if (so == 0 && si == 0) return L::one(p);
  return L::gather(p, offsets_at(c, so, si));
}
/// A leaf's lanes at j, j + 1, ... of the row it was seek()-ed to (inner stride `inner`; C: known
/// to be 1), or at a cursor: a load where they are a run (a row-major leaf, or one row's run), a
/// broadcast where they are one value, else strided or gathered.
template <class L, bool C, class U>
FLUXION_ALWAYS_INLINE auto leaf_lanes(const leaf_view<U>& l, index_t j) {
  const auto* p = reinterpret_cast<const typename L::elem*>(l.data + l.base);  // U, elem: one width
  if (C || l.inner == 1) return L::run(p + j);
  if (l.inner == 0) return L::one(p);
  return L::strided(p + j * l.inner, l.inner);
}
template <class L, bool C, class U, class T>
FLUXION_ALWAYS_INLINE auto leaf_lanes(const leaf_view<U>& l, const lane_cursor<T>& c) {
  const auto* p = reinterpret_cast<const typename L::elem*>(l.data + l.offset);
  const index_t so = l.strides[0], si = l.strides[1];
  if (c.whole && si == 1 && so == c.cols) return L::run(p + c.flat);
  if (c.one_row && (si == 0 || si == 1)) {
    const auto* q = p + c.row0 * so + c.col0 * si;
    return si == 1 ? L::run(q) : L::one(q);
  }
  if constexpr (L::spreads) {  // one value per row, rows adjacent: spread across the lanes
    if (c.whole && so == 1 && si == 0) {
      const lane_int<T>* rows = c.rows_of + c.col0;
      return L::spread(p + c.row0, lane_index<T>::load_unaligned(rows), rows[batch<T>::size - 1] + 1);
    }
  }
  return gathered<L>(p, so, si, c);
}
template <class T, class J>
FLUXION_ALWAYS_INLINE batch<T> row(const leaf_view<T>& l, const J& j) {
  return leaf_lanes<value_lanes<T>, false>(l, j);
}
template <class T, class J>
FLUXION_ALWAYS_INLINE batch<T> row(const scalar_view<T>& s, const J&) {
  return batch<T>(s.value);
}
template <class T, class I>
FLUXION_ALWAYS_INLINE batch<T> row(const gather_view<T, I>& g, index_t j) {
  alignas(64) T tmp[batch<T>::size];
  if (g.index.inner == 0) {  // one index for the whole row: a row of data
    const T* p = g.data + g.base + g.clamped(g.index.row(0)) * g.axis_stride;
    if (g.inner == 1) return batch<T>::load_unaligned(p + j);
    for (std::size_t k = 0; k < batch<T>::size; ++k) tmp[k] = p[(j + static_cast<index_t>(k)) * g.inner];
  } else {
    for (std::size_t k = 0; k < batch<T>::size; ++k) tmp[k] = g.row(j + static_cast<index_t>(k));
  }
  return batch<T>::load_aligned(tmp);
}
template <class T, class I>
FLUXION_ALWAYS_INLINE batch<T> contiguous_row(const gather_view<T, I>& g, index_t j) {
  return row(g, j);
}
template <class Op, class A, class J>
FLUXION_ALWAYS_INLINE auto row(const unary_view<Op, A>& v, const J& j) {
  return op<Op>::apply(row(v.a, j));
}
template <class Op, class A, class B, class J>
FLUXION_ALWAYS_INLINE auto row(const binary_view<Op, A, B>& v, const J& j) {
  return op<Op>::apply(row(v.a, j), row(v.b, j));
}
/// A T-valued view's lanes at j: row, or contiguous_row where C.
template <bool C, class V, class J>
FLUXION_ALWAYS_INLINE auto any_row(const V& v, const J& j) {
  if constexpr (C)
    return contiguous_row(v, j);
  else
    return row(v, j);
}

/// W bools at p, inner apart, as a mask: converted lane by lane, without a branch (a branch per
/// lane mispredicted half the time on a random mask, 10x slower than the select it feeds: stop 86).
template <class T>
FLUXION_ALWAYS_INLINE mask_batch<T> strided_bools(const bool* p, index_t inner) {
  alignas(64) T lanes[batch<T>::size];
  for (std::size_t k = 0; k < batch<T>::size; ++k) lanes[k] = static_cast<T>(p[static_cast<index_t>(k) * inner]);
  return batch<T>::load_aligned(lanes) != batch<T>(T(0));
}
/// W bools at p (W: the lanes of a batch of T) as a mask: a zero-extending load and a test where the
/// target has them, else strided_bools.
template <class T>
FLUXION_ALWAYS_INLINE mask_batch<T> contiguous_bools(const bool* p) {
#if defined(__AVX512F__) || defined(__AVX2__)
  constexpr std::size_t W = batch<T>::size;
  using M = mask_batch<T>;
#endif
#if defined(__AVX512F__)
  if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch> && W == 16) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return M(_mm512_test_epi32_mask(x, x));
  } else if constexpr (std::is_base_of_v<xsimd::avx512f, simd_arch> && W == 8) {
    const __m512i x = _mm512_cvtepu8_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return M(_mm512_test_epi64_mask(x, x));
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch> && W == 8) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    return M(_mm256_castsi256_ps(_mm256_cmpgt_epi32(x, _mm256_setzero_si256())));
  } else if constexpr (std::is_base_of_v<xsimd::avx2, simd_arch> && W == 4) {
    std::int32_t word;
    std::memcpy(&word, p, sizeof word);
    const __m256i x = _mm256_cvtepu8_epi64(_mm_cvtsi32_si128(word));
    return M(_mm256_castsi256_pd(_mm256_cmpgt_epi64(x, _mm256_setzero_si256())));
  }
#endif
  return strided_bools<T>(p, 1);
}

/// The integer lanes of int_lanes operands, at j (an index or a cursor, as row). T's gather moves
/// the integers' bits unchanged.
template <class T>
struct int_lanes_of {
  using elem = lane_int<T>;
  static constexpr bool spreads = true;
  FLUXION_ALWAYS_INLINE static lane_index<T> run(const elem* p) { return lane_index<T>::load_unaligned(p); }
  FLUXION_ALWAYS_INLINE static lane_index<T> one(const elem* p) { return lane_index<T>(*p); }
  FLUXION_ALWAYS_INLINE static lane_index<T> strided(const elem* p, index_t inner) {
    return strided_load<lane_index<T>>(p, inner);
  }
  FLUXION_ALWAYS_INLINE static lane_index<T> gather(const elem* p, const lane_index<T>& offsets) {
    return xsimd::bitwise_cast<lane_index<T>>(gather_lanes(reinterpret_cast<const T*>(p), offsets));
  }
  FLUXION_ALWAYS_INLINE static lane_index<T> spread(const elem* p, const lane_index<T>& rows, index_t n) {
    return xsimd::bitwise_cast<lane_index<T>>(spread_rows(reinterpret_cast<const T*>(p), rows, n));
  }
};
template <class T, bool C, class I, class J>
FLUXION_ALWAYS_INLINE lane_index<T> int_row(const leaf_view<I>& l, const J& j) {
  return leaf_lanes<int_lanes_of<T>, C>(l, j);
}
template <class T, bool C, class I>
FLUXION_ALWAYS_INLINE lane_index<T> int_row(const iota_view<I>& l, index_t j) {
  using E = lane_int<T>;
  const lane_index<T> first(static_cast<E>(l.base + j * l.inner));
  return l.inner == 1 ? first + lane_steps<T>() : first + lane_steps<T>() * lane_index<T>(static_cast<E>(l.inner));
}
template <class T, bool C, class I>
FLUXION_ALWAYS_INLINE lane_index<T> int_row(const iota_view<I>& l, const lane_cursor<T>& c) {
  return lane_index<T>(static_cast<lane_int<T>>(l.offset)) + lane_offsets(c, l.strides[0], l.strides[1]);
}
template <class T, bool C, class I, class J>
FLUXION_ALWAYS_INLINE lane_index<T> int_row(const scalar_view<I>& s, const J&) {
  return lane_index<T>(static_cast<lane_int<T>>(s.value));
}
/// A mask of integer lanes as the mask of T's lanes (the same lanes, the same register width).
template <class T, class M>
FLUXION_ALWAYS_INLINE mask_batch<T> lane_mask(const M& m) {
  return mask_batch<T>(std::bit_cast<typename mask_batch<T>::register_type>(static_cast<typename M::register_type>(m)));
}

/// A bool tensor's lanes as a mask of T's lanes (contiguous_bools, strided_bools; gathered byte by byte).
template <class T>
struct bool_lanes {
  using elem = bool;
  static constexpr bool spreads = false;
  FLUXION_ALWAYS_INLINE static mask_batch<T> run(const bool* p) { return contiguous_bools<T>(p); }
  FLUXION_ALWAYS_INLINE static mask_batch<T> one(const bool* p) { return mask_batch<T>(*p); }
  FLUXION_ALWAYS_INLINE static mask_batch<T> strided(const bool* p, index_t inner) { return strided_bools<T>(p, inner); }
  FLUXION_ALWAYS_INLINE static mask_batch<T> gather(const bool* p, const lane_index<T>& offsets) {
    alignas(64) lane_int<T> at[batch<T>::size];
    alignas(64) T lanes[batch<T>::size];
    offsets.store_aligned(at);
    for (std::size_t k = 0; k < batch<T>::size; ++k) lanes[k] = static_cast<T>(p[at[k]]);
    return batch<T>::load_aligned(lanes) != batch<T>(T(0));
  }
};
template <class T, bool C, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const leaf_view<bool>& l, const J& j) {
  return leaf_lanes<bool_lanes<T>, C>(l, j);
}
template <class T, bool C, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const scalar_view<bool>& s, const J&) {
  return mask_batch<T>(s.value);
}
template <class T, bool C, class Cmp, class A, class B, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const binary_view<Cmp, A, B>& v, const J& j) {
  if constexpr (int_compare_v<A, B, T>)
    return lane_mask<T>(compare_op<Cmp>::apply(int_row<T, C>(v.a, j), int_row<T, C>(v.b, j)));
  else
    return compare_op<Cmp>::apply(any_row<C>(v.a, j), any_row<C>(v.b, j));
}
template <class T, bool C, class A, class B, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const binary_view<ops::logical_and, A, B>& v, const J& j) {
  return mask_row<T, C>(v.a, j) & mask_row<T, C>(v.b, j);
}
template <class T, bool C, class A, class B, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const binary_view<ops::logical_or, A, B>& v, const J& j) {
  return mask_row<T, C>(v.a, j) | mask_row<T, C>(v.b, j);
}
template <class T, bool C, class A, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const unary_view<ops::logical_not, A>& v, const J& j) {
  return !mask_row<T, C>(v.a, j);
}
template <class T, bool C, class A, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const unary_view<ops::is_nan, A>& v, const J& j) {
  return xsimd::isnan(any_row<C>(v.a, j));
}
template <class T, bool C, class A, class J>
FLUXION_ALWAYS_INLINE mask_batch<T> mask_row(const unary_view<ops::is_finite, A>& v, const J& j) {
  const auto x = any_row<C>(v.a, j);
  return !xsimd::isnan(x - x);  // as ops::is_finite: inf - inf and NaN - NaN are NaN
}

template <bool C, class M, class X, class Y, class J>
FLUXION_ALWAYS_INLINE auto where_row(const ternary_view<ops::where, M, X, Y>& v, const J& j) {
  using T = typename ternary_view<ops::where, M, X, Y>::value_type;
  return xsimd::select(mask_row<T, C>(v.a, j), any_row<C>(v.b, j), any_row<C>(v.c, j));
}
template <bool C, class T, class A, class J>
FLUXION_ALWAYS_INLINE batch<T> cast_row(const unary_view<ops::cast<T>, A>& v, const J& j) {
  if constexpr (mask<A, T>::value)
    return xsimd::select(mask_row<T, C>(v.a, j), batch<T>(T(1)), batch<T>(T(0)));
  else
    return any_row<C>(v.a, j);
}
template <class M, class X, class Y, class J>
FLUXION_ALWAYS_INLINE auto row(const ternary_view<ops::where, M, X, Y>& v, const J& j) {
  return where_row<false>(v, j);
}
template <class M, class X, class Y>
FLUXION_ALWAYS_INLINE auto contiguous_row(const ternary_view<ops::where, M, X, Y>& v, index_t j) {
  return where_row<true>(v, j);
}
template <class T, class A, class J>
FLUXION_ALWAYS_INLINE batch<T> row(const unary_view<ops::cast<T>, A>& v, const J& j) {
  return cast_row<false>(v, j);
}
template <class T, class A>
FLUXION_ALWAYS_INLINE batch<T> contiguous_row(const unary_view<ops::cast<T>, A>& v, index_t j) {
  return cast_row<true>(v, j);
}

/// SIMD combine for the reductions that have one.
template <class RedOp>
struct reduce_op {
  static constexpr bool available = false;
};
template <>
struct reduce_op<ops::reduce_sum> {
  static constexpr bool available = true;
  template <class B>
  FLUXION_ALWAYS_INLINE static B combine(const B& a, const B& b) { return a + b; }
};
template <>
struct reduce_op<ops::reduce_mean> : reduce_op<ops::reduce_sum> {};
template <>
struct reduce_op<ops::reduce_prod> {
  static constexpr bool available = true;
  template <class B>
  FLUXION_ALWAYS_INLINE static B combine(const B& a, const B& b) { return a * b; }
};
template <>
struct reduce_op<ops::reduce_max> {
  static constexpr bool available = true;
  template <class B>
  FLUXION_ALWAYS_INLINE static B combine(const B& a, const B& b) { return xsimd::select((a > b) || xsimd::isnan(a), a, b); }
};
template <>
struct reduce_op<ops::reduce_min> {
  static constexpr bool available = true;
  template <class B>
  FLUXION_ALWAYS_INLINE static B combine(const B& a, const B& b) { return xsimd::select((a < b) || xsimd::isnan(a), a, b); }
};

}  // namespace simd

namespace cpu_kernel {

/// Elements per task: large enough to amortize scheduling, small enough to balance two cores.
inline constexpr index_t task_elements = 32768;

/// Rows shorter than this many vectors run flat in lanes (runs_in_lanes). Rows of two vectors ran
/// 1.2-1.4x slower flat than by rows (a softmax over 16 classes with AVX2) while the cursor kept
/// each lane's coordinates (stop 87), and level with rows once it moved by scalars (stop 88): no
/// gain to take them. Under one vector, flat is 2-5x faster.
inline constexpr index_t lanes_cols = 2;

/// Calls f(j0, len) for the parts of rows covering flat range [begin, end) of `iter`, after
/// seeking `v` to each row.
template <class V, class F>
FLUXION_ALWAYS_INLINE void for_rows(V& v, const shape& iter, index_t begin, index_t end, F&& f) {
  const int r = iter.rank();
  const index_t len_row = r == 0 ? 1 : iter[r - 1];
  index_t coord[max_rank] = {};
  if (r <= 1) {  // one row: no coordinates to compute
    v.seek(coord, 0);
    f(begin, end - begin);
    return;
  }
  // The first row's coordinates by division, the next ones by counting (short rows, a broadcast
  // per-channel operand's, spent more on the divisions than on their values).
  const index_t first_row = begin / len_row;
  unravel_outer(first_row, iter.data(), r, coord);
  index_t i = begin, j0 = begin - first_row * len_row;
  while (i < end) {
    const index_t len = std::min(len_row - j0, end - i);
    v.seek(coord, r - 1);
    f(j0, len);
    i += len;
    j0 = 0;
    for (int d = r - 2; d >= 0 && ++coord[d] == iter[d]; --d) coord[d] = 0;
  }
}

/// The contiguous SIMD loop over [j, end), a multiple of the vector width. The view is taken by
/// value: a private copy the compiler keeps in registers across the stores.
template <class T, class View>
FLUXION_ALWAYS_INLINE void contiguous_rows(T* FLUXION_RESTRICT o, const View v, index_t j, index_t end) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  for (; j + W <= end; j += W) simd::contiguous_row(v, j).store_unaligned(o + j);
}

/// out[j] = v(j) for j in [j0, end) where the destination and every leaf are contiguous: the SIMD
/// body and the scalar tail. Shared by the flat path and assign_row (one copy per statement).
template <class T, class View>
void contiguous_span(T* FLUXION_RESTRICT o, const View& v, index_t j0, index_t end) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  const index_t body = j0 + (end - j0) / W * W;
  contiguous_rows(o, v, j0, body);
  for (index_t j = body; j < end; ++j) o[j] = static_cast<T>(v.row(j));
}

/// The lane cursor at flat element i of a (rows, cols) iteration, lanes i, i + 1, ...; lanes at or
/// past `end` read element end - 1 (a tail: no lane reads past the statement, and no load takes
/// a run of W). rows_of: m / cols for m < cols + W (lanes_rows).
template <class T>
FLUXION_ALWAYS_INLINE simd::lane_cursor<T> cursor_at(index_t i, index_t cols, index_t end, const simd::lane_int<T>* rows_of) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  const index_t col0 = i % cols, valid = std::min(W, end - i);
  return {i, i / cols, col0, cols, W / cols, W % cols, valid, rows_of, valid == W && col0 + W <= cols, valid == W};
}
/// The cursor W elements on, for a whole vector: scalars only.
template <class T>
FLUXION_ALWAYS_INLINE void advance(simd::lane_cursor<T>& c) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  c.flat += W;
  c.row0 += c.step_rows;
  c.col0 += c.step_cols;
  if (c.col0 >= c.cols) {
    c.col0 -= c.cols;
    ++c.row0;
  }
  c.one_row = c.col0 + W <= c.cols;
}
/// A cursor's rows_of table: of[m] = m / cols for m < cols + W, by counting (cols < lanes_cols * W).
template <class T>
struct lanes_rows {
  static constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  alignas(64) simd::lane_int<T> of[(lanes_cols + 1) * W];
  explicit lanes_rows(index_t cols) {
    index_t r = 0, k = 0;
    for (index_t m = 0; m < cols + W; ++m) {
      of[m] = static_cast<simd::lane_int<T>>(r);
      if (++k == cols) k = 0, ++r;
    }
  }
};

/// out[i] = v(i) for flat elements [b, e) of a (rows, cols) iteration, walked flat with a lane
/// cursor (simd::lane_cursor): the statements runs_in_lanes admits. The last vector, short of W,
/// is evaluated on clamped lanes and stored in part: one copy of the loop body per statement.
template <class T, class View>
void lanes_span(T* FLUXION_RESTRICT o, const View& v, index_t cols, index_t b, index_t e) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  const lanes_rows<T> rows(cols);
  simd::lane_cursor<T> c = cursor_at<T>(b, cols, e, rows.of);
  for (index_t i = b; i < e; i += W) {
    const simd::batch<T> x = simd::row(v, c);
    if (i + W <= e) {
      x.store_unaligned(o + i);
      if (i + 2 * W <= e) advance(c);
      else if (i + W < e) c = cursor_at<T>(i + W, cols, e, rows.of);
    } else {
      alignas(64) T lanes[W];
      x.store_aligned(lanes);
      std::copy(lanes, lanes + (e - i), o + i);
    }
  }
}

/// Whether a statement over iteration `iter` (collapsed) runs flat in lanes (lanes_span): rows
/// shorter than lanes_cols, rank 2 after collapsing, every leaf of rank 2 and every lane offset
/// within the gather's index type. Rows this short spent more on starting each row than on its
/// values, and rows under a vector ran scalar.
template <class T>
struct lanes_fit {
  index_t rows, cols;
  bool& fits;
  void operator()(const leaf_layout& l) const {
    using E = typename simd::lane_index<T>::value_type;
    const auto reach = [](index_t n, index_t stride) { return (n - 1) * (stride < 0 ? -stride : stride); };
    fits = fits && l.rank == 2 &&
           reach(rows, l.strides[0]) + reach(cols, l.strides[1]) <= static_cast<index_t>(std::numeric_limits<E>::max());
  }
};
template <class T, class View>
bool runs_in_lanes(View& v, const shape& iter) {
  constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
  if (iter.rank() != 2 || iter[1] >= lanes_cols * W) return false;
  using E = typename simd::lane_index<T>::value_type;
  bool fits = iter.size() <= static_cast<index_t>(std::numeric_limits<E>::max());
  v.for_each_leaf(lanes_fit<T>{iter[0], iter[1], fits});
  return fits;
}

/// One row of a statement: out[j * os] = v(j) for j in [j0, j0 + len). The one place a statement's
/// loops are emitted: the flat path and every task of the general path call it (a function of
/// its own, not inlined into each caller, so each statement compiles its SIMD and scalar loops
/// once).
/// `contiguous` caches whether every leaf's rows are contiguous (-1: not known yet): a leaf's
/// inner stride is the same on every row of a statement, so it is asked once per task.
template <class T, class View>
void assign_row(T* out, const with_destination<View>& w, index_t j0, index_t len, signed char& contiguous) {
  T* o = out + w.dest.base;
  const index_t os = w.dest.inner;
  const View& v = w.view;
  index_t j = j0;
  const index_t end = j0 + len;
  if constexpr (simd::enabled<View, T>::value) {
    constexpr index_t W = static_cast<index_t>(simd::batch<T>::size);
    if (os == 1) {
      if (contiguous < 0) {
        bool c = true;
        const_cast<View&>(v).for_each_leaf(unit_inner_stride{c});
        contiguous = c;
      }
      if (contiguous) {
        contiguous_span(o, v, j, end);
        return;
      }
      for (; j + W <= end; j += W) simd::row(v, j).store_unaligned(o + j);
    }
  }
  for (; j < end; ++j) o[j * os] = static_cast<T>(v.row(j));
}

/// Writes flat elements [b, e) of a view (walked in the row-major order of `iter`) to buf[0, e - b).
/// A reduction over every axis but the last reads an expression this way: only the fill is compiled
/// per expression type, and the row loops, chunks and tasks once per element type and operation.
template <class R, class View>
void fill_flat(const void* view, const shape& iter, index_t b, index_t e, R* buf) {
  View v = *static_cast<const View*>(view);
  signed char contiguous = -1;  // as assign_row's: the same on every row
  for_rows(v, iter, b, e, [&](index_t j0, index_t len) {
    R* o = buf - j0;
    index_t j = j0;
    const index_t end = j0 + len;
    buf += len;
    if constexpr (simd::enabled<View, R>::value) {
      if (contiguous < 0) {
        bool c = true;
        v.for_each_leaf(unit_inner_stride{c});
        contiguous = c;
      }
      if (contiguous) {
        contiguous_span(o, v, j, end);
        return;
      }
      constexpr index_t W = static_cast<index_t>(simd::batch<R>::size);
      for (; j + W <= end; j += W) simd::row(v, j).store_unaligned(o + j);
    }
    for (; j < end; ++j) o[j] = static_cast<R>(v.row(j));
  });
}

/// fill_flat's values for a statement that runs_in_lanes.
template <class R, class View>
void fill_lanes(const void* view, const shape& iter, index_t b, index_t e, R* buf) {
  lanes_span(buf - b, *static_cast<const View*>(view), iter[1], b, e);
}

/// A reduction's values, type-erased: fill(b, e, buf) writes flat elements [b, e) of the view.
template <class R>
struct reduction_source {
  const void* view;
  shape iter;
  void (*fill_fn)(const void*, const shape&, index_t, index_t, R*);
  /// The values themselves when they are one row-major array (a contiguous tensor): read in place.
  const R* direct = nullptr;
  /// Elements [b, e): in place, or filled into buf.
  const R* values(index_t b, index_t e, R* buf) const {
    if (direct) return direct + b;
    fill_fn(view, iter, b, e, buf);
    return buf;
  }
};

/// Elements a reduction of an expression fills at a time: 8 KB of float, in L1.
inline constexpr index_t fill_block = 2048;

}  // namespace cpu_kernel

/// Whether `l` walks shape `s` in row-major order without gaps (extent-1 axes have stride 0).
inline bool is_row_major(const leaf_layout& l, const shape& s) {
  if (l.rank != s.rank()) return false;
  index_t expected = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    if (s[d] != 1 && l.strides[d] != expected) return false;
    expected *= s[d];
  }
  return true;
}

/// Clears `dense` unless a leaf is laid out as `dest`, and sets its row cursor to walk the whole
/// statement as one row.
struct flat_leaf {
  const leaf_layout& dest;
  bool& dense;
  void operator()(leaf_layout& l) const {
    if (l.rank != dest.rank) dense = false;
    for (int d = 0; dense && d < l.rank; ++d) dense = l.strides[d] == dest.strides[d];
    l.base = l.offset;
    l.inner = 1;
  }
};

template <>
struct evaluator<cpu> {
  /// out[dest(i)] = view(i) for every i in the iteration shape s.
  template <class T, class View>
  static void assign(T* out, const leaf_layout& dest, const View& view, const shape& s) {
    const index_t n = s.size();
    if (n == 0) return;
    if constexpr (simd::enabled<View, T>::value) {
      // The most common statement, small: the destination and every leaf walk memory in row-major
      // order, so the whole statement is one flat row; skip collapsing, tasks and row cursors.
      if (n <= cpu_kernel::task_elements && is_row_major(dest, s)) {
        View flat = view;
        bool dense = true;
        flat.for_each_leaf(flat_leaf{dest, dense});
        if (dense) {
          cpu_kernel::contiguous_span(out + dest.offset, flat, 0, n);
          return;
        }
      }
    }
    with_destination<View> w{view, dest};
    shape iter = s;
    collapse_view(w, iter);
    const index_t tasks = (n + cpu_kernel::task_elements - 1) / cpu_kernel::task_elements;
    if constexpr (simd::enabled<View, T>::value && simd::lanes_ready<View>::value) {
      // Short rows into a row-major destination: flat, in lanes.
      if (iter.rank() == 2 && w.dest.strides[0] == iter[1] && w.dest.strides[1] == 1 &&
          cpu_kernel::runs_in_lanes<T>(w.view, iter)) {
        T* o = out + w.dest.offset;
        parallel_for(tasks, [&](index_t t) {
          const index_t b = t * cpu_kernel::task_elements, e = std::min(n, b + cpu_kernel::task_elements);
          cpu_kernel::lanes_span(o, w.view, iter[1], b, e);
        });
        return;
      }
    }
    // One task runs on the caller (parallel_for calls it directly): the same code either way.
    parallel_for(tasks, [&](index_t t) {
      with_destination<View> local = w;
      const index_t b = t * cpu_kernel::task_elements, e = std::min(n, b + cpu_kernel::task_elements);
      signed char contiguous = -1;
      cpu_kernel::for_rows(local, iter, b, e,
                           [&](index_t j0, index_t len) { cpu_kernel::assign_row(out, local, j0, len, contiguous); });
    });
  }

  /// out[k] = finalize(combine over the reduced axes (bits of mask) of view), kept axes in order.
  template <class RedOp, class R, class View>
  static void reduce(R* out, const View& view, const shape& s, unsigned mask) {
    const int rank = s.rank();
    // The reduced axes as one run [lo, hi) with only kept axes after it, at least one.
    int lo = 0;
    while (lo < rank && !(mask >> lo & 1u)) ++lo;
    int hi = lo;
    while (hi < rank && (mask >> hi & 1u)) ++hi;
    const bool run_then_kept = lo < rank && hi < rank && (mask >> hi) == 0 && s.size() > 0;
    if constexpr (std::is_same_v<View, leaf_view<R>>) {
      if constexpr (std::is_floating_point_v<R> &&
                    (std::is_same_v<RedOp, ops::reduce_sum> || std::is_same_v<RedOp, ops::reduce_mean>)) {
        if (sum_leading_axes<RedOp>(out, view, s, mask)) return;
      }
      if constexpr (simd::enabled<View, R>::value && simd::reduce_op<RedOp>::available) {
        if (lo == 0 && hi == rank - 1 && run_then_kept && reduce_all_but_last<RedOp>(out, view, s)) return;
      }
    }
    index_t outer = 1, rows = 1, cols = 1;  // the reduced run in the middle, cols == 1 where innermost
    for (int d = 0; d < rank; ++d) (d < lo ? outer : d < hi ? rows : cols) *= s[d];
    // Short rows over the innermost axes (a softmax's or a loss's classes, an attention row), up to
    // 16 vectors. Under four vectors the general path combines a row in order, as reduce_short_rows
    // does (the same bits), so it keeps batches of fewer rows than a vector. From four vectors
    // reduce_short_rows folds each row by vectors first, in an order of its own: every batch takes
    // it, so that a row's sum does not depend on how many rows come with it.
    bool short_rows = false;
    if constexpr (simd::vector_type_v<R> && simd::reduce_op<RedOp>::available) {
      constexpr index_t W = static_cast<index_t>(simd::batch<R>::size);
      short_rows = lo < rank && hi == rank && s.size() > 0 && rows < 16 * W && (outer >= W || rows >= 4 * W);
    }
    if (run_then_kept || short_rows) {
      // Filled a block at a time, in row-major order, into a small buffer whose rows are combined
      // by code compiled once per element type and operation.
      View flat = view;
      shape iter = s;
      collapse_view(flat, iter);  // merge what memory allows into long rows
      cpu_kernel::reduction_source<R> src{&flat, iter, &cpu_kernel::fill_flat<R, View>};
      if constexpr (simd::enabled<View, R>::value && simd::lanes_ready<View>::value)
        if (cpu_kernel::runs_in_lanes<R>(flat, iter)) src.fill_fn = &cpu_kernel::fill_lanes<R, View>;
      if constexpr (std::is_same_v<View, leaf_view<R>>)
        if (is_row_major(view, s)) src.direct = view.data + view.offset;  // no copy into the buffer
      if constexpr (simd::vector_type_v<R> && simd::reduce_op<RedOp>::available) {
        if (short_rows) {
          reduce_short_rows<RedOp, R>(out, src, outer, rows);
          return;
        }
      }
      if (reduce_rows_buffered<RedOp, R>(out, src, outer, rows, cols)) return;
    }
    View v = view;
    const reduction_space sp = prepare_reduction(v, s, mask);
    reduce_chunks<RedOp, R>(out, sp.n_out, sp.n_red, [&] { return v; },
                            [&](View& local, index_t b, index_t e) { return reduce_range<RedOp, R>(local, sp.iter, b, e); });
  }

 private:
  /// Fixed-size chunks of each output's reduced range, pair(state, b, e) combining flat elements
  /// [b, e) with a state each task makes once (make_state()), run in tasks and combined in chunk
  /// order: the same result for any thread count.
  template <class RedOp, class R, class MakeState, class Pair>
  static void reduce_chunks(R* out, index_t n_out, index_t n_red, const MakeState& make_state, const Pair& pair) {
    if (n_out == 0) return;
    if (n_red == 0) {
      for (index_t k = 0; k < n_out; ++k) out[k] = RedOp::finalize(RedOp::template identity<R>(), 0);
      return;
    }
    constexpr index_t chunk = 16384;
    const index_t n_chunks = (n_red + chunk - 1) / chunk;
    const index_t per_pair = std::min(n_red, chunk);
    const index_t pairs_per_task = std::max<index_t>(1, cpu_kernel::task_elements / per_pair);
    const index_t n_pairs = n_out * n_chunks;
    const index_t tasks = (n_pairs + pairs_per_task - 1) / pairs_per_task;
    std::unique_ptr<R[]> partial(n_chunks > 1 ? new R[static_cast<std::size_t>(n_pairs)] : nullptr);
    auto run = [&](index_t t) {
      auto state = make_state();
      const index_t p_end = std::min(n_pairs, (t + 1) * pairs_per_task);
      for (index_t p = t * pairs_per_task; p < p_end; ++p) {
        const index_t k = p / n_chunks, c = p - k * n_chunks;
        const index_t b = k * n_red + c * chunk, e = std::min(k * n_red + n_red, b + chunk);
        const R acc = pair(state, b, e);
        if (n_chunks > 1) partial[static_cast<std::size_t>(p)] = acc;
        else out[k] = RedOp::finalize(acc, n_red);
      }
    };
    if (tasks == 1) run(0);
    else parallel_for(tasks, run);
    if (n_chunks > 1) {
      for (index_t k = 0; k < n_out; ++k) {
        R acc = partial[static_cast<std::size_t>(k * n_chunks)];
        for (index_t c = 1; c < n_chunks; ++c) acc = RedOp::combine(acc, partial[static_cast<std::size_t>(k * n_chunks + c)]);
        out[k] = RedOp::finalize(acc, n_red);
      }
    }
  }

  /// A reduction over the innermost axes in rows shorter than 16 vectors (n_red values each): a
  /// softmax's or a loss's classes, an attention row. The general path combined each row alone,
  /// one dependent scalar operation per value (and a branch per value for max and min, which
  /// mispredicted on random data), and evaluated an expression operand with scalar ops: a softmax
  /// over 10 classes took 20x its time over long rows (stop 86). Here W rows at a time are combined
  /// in the lanes of one batch, a gathered column of values at a time. Under four vectors each
  /// row's values are combined in order from the identity, as the general path combines a row
  /// this short, so the result is bitwise the same for the same values. Longer rows are first
  /// folded into one vector each (max and min from two vectors, in any order); sums and products
  /// from four, in one order (lane m: x[m], x[W + m], ... of the row's whole vectors), then its
  /// lanes in order from the identity, then the values after the last whole vector, in order: the
  /// general path's 16 dependent scalar additions per row took 40% of a softmax over 64 classes
  /// (stop 89). The operand is filled a block of rows at a time with SIMD (fill_flat), or read in
  /// place. Compiled once per element type and operation.
  template <class RedOp, class R>
  static void reduce_short_rows(R* out, const cpu_kernel::reduction_source<R>& src, index_t n_out, index_t n_red) {
    using B = simd::batch<R>;
    using I = simd::lane_index<R>;
    constexpr index_t W = static_cast<index_t>(B::size);
    const index_t rows_per_block = std::max<index_t>(W, cpu_kernel::fill_block / n_red / W * W);
    const index_t n_blocks = (n_out + rows_per_block - 1) / rows_per_block;
    const index_t per_task = std::max<index_t>(1, cpu_kernel::task_elements / (rows_per_block * n_red));
    const index_t tasks = (n_blocks + per_task - 1) / per_task;
    constexpr bool any_order = std::is_same_v<RedOp, ops::reduce_max> || std::is_same_v<RedOp, ops::reduce_min>;
    const I lane_rows = simd::lane_steps<R>() * I(static_cast<typename I::value_type>(n_red));
    const I partial_rows = simd::lane_steps<R>() * I(static_cast<typename I::value_type>(W));
    const bool folded_rows = n_red >= (any_order ? 2 : 4) * W;
    // The values a row's fold covers (max and min: all of them); the rest are combined in order.
    const index_t folded_end = !folded_rows ? 0 : any_order ? n_red : n_red / W * W;
    auto run = [&](index_t t) {
      std::vector<R> buf(src.direct ? 0 : static_cast<std::size_t>(rows_per_block * n_red));
      alignas(64) R lanes[W];
      alignas(64) R partial[W * W];  // the folded rows
      for (index_t blk = t * per_task; blk < std::min(n_blocks, (t + 1) * per_task); ++blk) {
        const index_t r0 = blk * rows_per_block, r1 = std::min(n_out, r0 + rows_per_block);
        const R* x = src.values(r0 * n_red, r1 * n_red, buf.data());
        index_t r = r0;
        for (; r + W <= r1; r += W, x += W * n_red) {
          B acc(RedOp::template identity<R>());
          if (folded_rows) {
            // Each row folded into one vector first, then a row per lane over those: a gather per
            // row, not one per row and vector (stop 88).
            for (index_t k = 0; k < W; ++k) fold_row<RedOp>(x + k * n_red, n_red).store_aligned(partial + k * W);
            for (index_t m = 0; m < W; ++m) acc = simd::reduce_op<RedOp>::combine(acc, simd::gather_lanes(partial + m, partial_rows));
          }
          for (index_t j = folded_end; j < n_red; ++j) acc = simd::reduce_op<RedOp>::combine(acc, simd::gather_lanes(x + j, lane_rows));
          acc.store_aligned(lanes);
          for (index_t k = 0; k < W; ++k) out[r + k] = RedOp::finalize(lanes[k], n_red);
        }
        for (; r < r1; ++r, x += n_red) {  // the rows after the last W, each alone in the same order
          R acc = RedOp::template identity<R>();
          if (folded_rows) {
            fold_row<RedOp>(x, n_red).store_aligned(lanes);
            for (index_t m = 0; m < W; ++m) acc = RedOp::combine(acc, lanes[m]);
          }
          for (index_t j = folded_end; j < n_red; ++j) acc = RedOp::combine(acc, x[j]);
          out[r] = RedOp::finalize(acc, n_red);
        }
      }
    };
    if (tasks == 1) run(0);
    else parallel_for(tasks, run);
  }

  /// reduce_short_rows' fold of a row of n >= 2W values into one vector. Max and min: every value,
  /// the last vector overlapping the one before where W does not divide n (a value taken twice
  /// gives the same result). Sums and products: the whole vectors in order, lane m combining
  /// x[m], x[W + m], ...; the caller adds the rest.
  template <class RedOp, class R>
  FLUXION_ALWAYS_INLINE static simd::batch<R> fold_row(const R* row, index_t n) {
    using B = simd::batch<R>;
    constexpr index_t W = static_cast<index_t>(B::size);
    if constexpr (std::is_same_v<RedOp, ops::reduce_max> || std::is_same_v<RedOp, ops::reduce_min>) {
      B folded = B::load_unaligned(row + n - W);
      for (index_t j = 0; j + W < n; j += W) folded = simd::reduce_op<RedOp>::combine(folded, B::load_unaligned(row + j));
      return folded;
    } else {
      B folded = B::load_unaligned(row);
      for (index_t j = W; j + W <= n; j += W) folded = simd::reduce_op<RedOp>::combine(folded, B::load_unaligned(row + j));
      return folded;
    }
  }

  /// A reduction over a run of axes followed only by kept axes: per-channel statistics of NHWC data
  /// (batch norm's means and variances and their gradients, a bias's gradient: every axis but the
  /// last), a global average pool (axes 1 and 2 of NHWC). Seen row-major, the source is `outer`
  /// blocks of `rows` rows of `cols` values; the rows of each block are combined into a row of
  /// accumulators with SIMD batches, a block of filled values at a time, where the general path
  /// would walk each output's values at a stride (a contiguous tensor is read in place, without the
  /// buffer: group_norm's per-channel means, 1.6x faster). Rows are combined in fixed chunks, in order
  /// (combine_row_chunks), so the result does not depend on the thread count. False for fewer
  /// columns than a vector.
  template <class RedOp, class R>
  static bool reduce_rows_buffered(R* out, const cpu_kernel::reduction_source<R>& src, index_t outer, index_t rows,
                                   index_t cols) {
    if constexpr (!simd::vector_type_v<R> || !simd::reduce_op<RedOp>::available) {
      return false;
    } else {
      using B = simd::batch<R>;
      constexpr index_t W = static_cast<index_t>(B::size);
      if (cols < W) return false;
      const index_t rows_per_chunk = std::max<index_t>(1, 16384 / cols);
      const index_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
      std::vector<R> partial(static_cast<std::size_t>(outer * chunks * cols), RedOp::template identity<R>());
      auto run = [&](index_t cg) {
        alignas(64) R buf[cpu_kernel::fill_block];
        R* acc = partial.data() + cg * cols;
        const index_t o = cg / chunks, c = cg - o * chunks, block = o * rows * cols;
        const index_t end = block + std::min(rows, (c + 1) * rows_per_chunk) * cols;
        index_t col = 0;
        for (index_t i = block + c * rows_per_chunk * cols; i < end;) {
          const index_t n = std::min(cpu_kernel::fill_block, end - i);
          const R* values = src.values(i, i + n, buf);
          for (index_t p = 0; p < n;) {  // runs of one row within the block
            const index_t len = std::min(cols - col, n - p);
            const R* x = values + p;
            R* a = acc + col;
            index_t j = 0;
            for (; j + W <= len; j += W)
              simd::reduce_op<RedOp>::combine(B::load_unaligned(a + j), B::load_unaligned(x + j)).store_unaligned(a + j);
            for (; j < len; ++j) a[j] = RedOp::combine(a[j], x[j]);
            p += len;
            col += len;
            if (col == cols) col = 0;
          }
          i += n;
        }
      };
      combine_row_chunks<RedOp>(out, partial, rows, cols, rows_per_chunk, run, outer);
      return true;
    }
  }

 public:
  /// Batched matrix products; see cpu_kernel::matmul_batched.
  template <class T>
  static void matmul(bool ta, bool tb, index_t batch, index_t m, index_t n, index_t k, const T* a,
                     const index_t* a_off, const T* b, const index_t* b_off, T* c) {
    cpu_kernel::matmul_batched(ta, tb, batch, m, n, k, a, a_off, b, b_off, c);
  }

  /// Index of the first maximum (Max) or minimum along one axis; NaN counts as the extreme.
  template <bool Max, class View>
  static void arg_reduce(std::int64_t* out, const View& view, const shape& s, int axis) {
    View v = view;
    const reduction_space sp = prepare_reduction(v, s, 1u << axis);
    const index_t n_out = sp.n_out, n_red = sp.n_red;
    using T = typename View::value_type;
    const index_t per_task = std::max<index_t>(1, cpu_kernel::task_elements / std::max<index_t>(1, n_red));
    const index_t tasks = (n_out + per_task - 1) / per_task;
    auto run = [&](index_t t) {
      View local = v;
      for (index_t k = t * per_task; k < std::min(n_out, (t + 1) * per_task); ++k) {
        T best{};
        index_t best_i = -1, i = 0;
        cpu_kernel::for_rows(local, sp.iter, k * n_red, (k + 1) * n_red, [&](index_t j0, index_t len) {
          for (index_t j = j0; j < j0 + len; ++j, ++i) {
            const T x = local.row(j);
            bool better;
            if (best_i < 0) better = true;
            else if constexpr (std::is_floating_point_v<T>) better = (best == best) && (x != x || (Max ? x > best : x < best));
            else better = Max ? x > best : x < best;
            if (better) {
              best = x;
              best_i = i;
            }
          }
        });
        out[k] = best_i;
      }
    };
    if (tasks <= 1) run(0);
    else parallel_for(tasks, run);
  }

 private:
  /// The sum (or mean) of a contiguous tensor over its leading axes: a bias's gradient, summed over
  /// batch and pixels. Rows are added into an accumulator row with vectors, in fixed chunks of rows
  /// combined in chunk order (the same result for any thread count), instead of walking each
  /// output's column with a stride. False when the tensor is not contiguous or the reduced axes
  /// are not a leading run.
  template <class RedOp, class R>
  static bool sum_leading_axes(R* out, const leaf_view<R>& v, const shape& s, unsigned mask) {
    const int rank = s.rank();
    int lead = 0;
    while (lead < rank && (mask >> lead & 1u)) ++lead;
    if (lead == 0 || lead == rank) return false;
    for (int d = lead; d < rank; ++d)
      if (mask >> d & 1u) return false;
    index_t expected = 1;
    for (int d = rank - 1; d >= 0; --d) {
      if (s[d] != 1 && v.strides[d] != expected) return false;
      expected *= s[d];
    }
    index_t rows = 1, cols = 1;
    for (int d = 0; d < rank; ++d) (d < lead ? rows : cols) *= s[d];
    if (rows == 0 || cols == 0) return false;
    const R* x = v.data + v.offset;
    using batch = xsimd::batch<R, simd_arch>;
    constexpr index_t w = static_cast<index_t>(batch::size);
    const index_t rows_per_chunk = std::max<index_t>(1, 16384 / cols);
    const index_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    std::vector<R> partial(static_cast<std::size_t>(chunks * cols));
    auto run = [&](index_t c) {
      R* acc = partial.data() + c * cols;
      const index_t r_end = std::min(rows, (c + 1) * rows_per_chunk);
      std::copy_n(x + c * rows_per_chunk * cols, cols, acc);
      for (index_t r = c * rows_per_chunk + 1; r < r_end; ++r) {
        const R* row = x + r * cols;
        index_t j = 0;
        for (; j + w <= cols; j += w)
          (batch::load_unaligned(acc + j) + batch::load_unaligned(row + j)).store_unaligned(acc + j);
        for (; j < cols; ++j) acc[j] += row[j];
      }
    };
    combine_row_chunks<RedOp>(out, partial, rows, cols, rows_per_chunk, run);
    return true;
  }

  /// Runs run(c) for every chunk of rows_per_chunk rows (fixed tasks), each filling its row of
  /// `partial` (cols accumulators), then combines the chunks' rows in order into `out`.
  template <class RedOp, class R, class Run>
  static void combine_row_chunks(R* out, const std::vector<R>& partial, index_t rows, index_t cols,
                                 index_t rows_per_chunk, const Run& run, index_t outer = 1) {
    const index_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    const index_t all = outer * chunks;  // chunk c of block o is run(o * chunks + c)
    const index_t per_task = std::max<index_t>(1, cpu_kernel::task_elements / (rows_per_chunk * cols));
    const index_t tasks = (all + per_task - 1) / per_task;
    auto run_tasks = [&](index_t t) {
      for (index_t c = t * per_task; c < std::min(all, (t + 1) * per_task); ++c) run(c);
    };
    if (tasks == 1) run_tasks(0);
    else parallel_for(tasks, run_tasks);
    for (index_t o = 0; o < outer; ++o) {
      const R* block = partial.data() + o * chunks * cols;
      for (index_t j = 0; j < cols; ++j) {
        R acc = block[j];
        for (index_t c = 1; c < chunks; ++c) acc = RedOp::combine(acc, block[c * cols + j]);
        out[o * cols + j] = RedOp::finalize(acc, rows);
      }
    }
  }

  template <class RedOp, class R, class View>
  static bool reduce_all_but_last(R* out, const View& view, const shape& s) {
    const int rank = s.rank();
    const index_t cols = s[rank - 1], rows = cols == 0 ? 0 : s.size() / cols;
    if (rows == 0 || cols < static_cast<index_t>(simd::batch<R>::size)) return false;
    using B = simd::batch<R>;
    constexpr index_t W = static_cast<index_t>(B::size);
    const index_t rows_per_chunk = std::max<index_t>(1, 16384 / cols);
    const index_t chunks = (rows + rows_per_chunk - 1) / rows_per_chunk;
    std::vector<R> partial(static_cast<std::size_t>(chunks * cols), RedOp::template identity<R>());
    auto run = [&](index_t c) {
      View local = view;
      R* acc = partial.data() + c * cols;
      const index_t r_end = std::min(rows, (c + 1) * rows_per_chunk);
      cpu_kernel::for_rows(local, s, c * rows_per_chunk * cols, r_end * cols, [&](index_t j0, index_t len) {
        index_t j = j0;
        const index_t end = j0 + len;
        for (; j + W <= end; j += W)
          simd::reduce_op<RedOp>::combine(B::load_unaligned(acc + j), simd::row(local, j)).store_unaligned(acc + j);
        for (; j < end; ++j) acc[j] = RedOp::combine(acc[j], static_cast<R>(local.row(j)));
      });
    };
    combine_row_chunks<RedOp>(out, partial, rows, cols, rows_per_chunk, run);
    return true;
  }

  template <class RedOp, class R, class View>
  static R reduce_range(View& v, const shape& iter, index_t b, index_t e) {
    R acc = RedOp::template identity<R>();
    cpu_kernel::for_rows(v, iter, b, e, [&](index_t j0, index_t len) {
      index_t j = j0;
      const index_t end = j0 + len;
      if constexpr (simd::enabled<View, R>::value && simd::reduce_op<RedOp>::available) {
        using B = simd::batch<R>;
        constexpr index_t W = static_cast<index_t>(B::size);
        if (len >= 4 * W) {
          B a0(RedOp::template identity<R>()), a1 = a0, a2 = a0, a3 = a0;
          bool contiguous = true;
          v.for_each_leaf(unit_inner_stride{contiguous});
          if (contiguous) {
            for (; j + 4 * W <= end; j += 4 * W) {
              a0 = simd::reduce_op<RedOp>::combine(a0, simd::contiguous_row(v, j));
              a1 = simd::reduce_op<RedOp>::combine(a1, simd::contiguous_row(v, j + W));
              a2 = simd::reduce_op<RedOp>::combine(a2, simd::contiguous_row(v, j + 2 * W));
              a3 = simd::reduce_op<RedOp>::combine(a3, simd::contiguous_row(v, j + 3 * W));
            }
          } else {
            // Strided or broadcast leaves load lane by lane, so one accumulator keeps up; unrolling
            // would only multiply the code every reduction statement compiles.
            for (; j + W <= end; j += W) a0 = simd::reduce_op<RedOp>::combine(a0, simd::row(v, j));
          }
          a0 = simd::reduce_op<RedOp>::combine(simd::reduce_op<RedOp>::combine(a0, a1),
                                               simd::reduce_op<RedOp>::combine(a2, a3));
          alignas(64) R lanes[B::size];
          a0.store_aligned(lanes);
          for (std::size_t k = 0; k < B::size; ++k) acc = RedOp::combine(acc, lanes[k]);
        }
      }
      for (; j < end; ++j) acc = RedOp::combine(acc, static_cast<R>(v.row(j)));
    });
    return acc;
  }
};

}  // namespace fluxion::detail
