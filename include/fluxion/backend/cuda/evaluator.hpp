// The CUDA evaluator: runs a view tree as Thrust algorithms over a counting iterator.
//
//   fx::tensor<float, fx::cuda> r = a * b + fx::sin(c);   // one thrust::for_each_n, one pass
//   auto s = fx::reduce_sum(a * b, 1);                     // a chunked reduction; a * b is never stored
//
// It has the interface of the CPU evaluator (backend/cpu/evaluator.hpp) and reuses its host-side
// preparation (expr/layout.hpp): the view is collapsed or permuted on the host, copied by value
// into a functor, and each element's coordinates are unravelled from its flat index on the device.
// Every kernel is a thrust::for_each over a counting iterator: reductions run in fixed parts
// (see cuda_kernel::reduce_chunk) rather than through CUB's reduce_by_key, which keeps results
// reproducible, takes temporary memory from the device cache, and keeps nvcc's compile time low.
// Views are structs of raw pointers, and every function they call is FLUXION_HOST_DEVICE, so the
// same functors run as CUDA kernels under nvcc and as OpenMP loops under a host compiler with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP.
#pragma once

#include <cstdint>
#include <type_traits>

#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/config.hpp"
#include "../../core/device.hpp"
#include "../../core/shape.hpp"
#include "../../expr/forward.hpp"
#include "../../expr/layout.hpp"
#include "../../expr/reduce_ops.hpp"
#include "../../expr/view.hpp"
#include "blas.hpp"
#include "memory.hpp"

namespace fluxion::detail {

namespace cuda_kernel {

/// Reductions give each thread at most this many elements of one output, and combine the partial
/// results the same way until one remains per output. How elements are split depends only on the
/// shape, so results are reproducible on any device and thread count, and partial results live
/// in the device cache rather than in fresh cudaMalloc calls. Short parts keep every level
/// parallel: with 256 a sum of 16M floats took 393 us on an H100, most of it in the later levels,
/// where 256 and then 1 thread each read 256 values one after another; with 32 it has five
/// levels, each of many threads with a short loop.
inline constexpr index_t reduce_chunk = 32;

using u32 = std::uint32_t;

/// Division of n < 2^31 by a fixed d in [1, 2^31] as a multiply-high, an add and a shift
/// (Granlund and Montgomery's method, in the form of PyTorch's IntDivider). On a GPU a 64-bit
/// division is a subroutine of about a hundred instructions and a 32-bit one a few dozen.
struct divider {
  u32 d = 1, magic = 1, shift = 0;
  divider() = default;
  explicit divider(index_t divisor) : d(static_cast<u32>(divisor < 1 ? 1 : divisor)) {
    while (shift < 31 && (std::uint64_t(1) << shift) < d) ++shift;
    magic = static_cast<u32>(((std::uint64_t(1) << 32) * ((std::uint64_t(1) << shift) - d)) / d + 1);
  }
  FLUXION_HOST_DEVICE u32 div(u32 n) const {
#if defined(__CUDA_ARCH__)
    const u32 t = __umulhi(n, magic);
#else
    const u32 t = static_cast<u32>((std::uint64_t(n) * magic) >> 32);
#endif
    return (t + n) >> shift;
  }
};

/// Coordinates, or extents, of up to max_rank axes, passed by value.
struct axes {
  index_t at[max_rank];
};

/// Coordinates of flat (row-major) index i in an iteration of `ext` with 64-bit divisions: the
/// path of iterations of 2^31 elements or more. One out-of-line function on the device rather
/// than unrolled divisions inlined into every statement's kernel: nvcc compiled fashion_mnist_cnn
/// 16% slower with those (ptxas and cicc, stop 44), and the path is rare.
#if defined(__CUDA_ARCH__)
__noinline__
#endif
FLUXION_HOST_DEVICE axes unravel_wide(axes ext, int rank, index_t i) {
  axes coord{};
  for (int d = max_rank - 1; d > 0; --d) {
    if (d < rank) {
      const index_t q = i / ext.at[d];
      coord.at[d] = i - q * ext.at[d];
      i = q;
    }
  }
  if (rank > 0) coord.at[0] = i;
  return coord;
}

/// An iteration shape, copyable to the device. Iterations of fewer than 2^31 elements (`narrow`:
/// nearly all) find coordinates with dividers over 32-bit indices. With a 64-bit division per
/// axis, an H100 ran the CNN's bias + relu statement (batch 256, a division by the channels per
/// element) at 2.5-4 times its bandwidth floor (stop 43; the dividers are not yet timed there).
struct extents {
  int rank = 0;
  bool narrow = false;
  axes ext = {};
  divider div[max_rank] = {};

  /// Coordinates of flat (row-major) index i. The device and the OpenMP backend's tests run the
  /// same arithmetic; on the device the loops are unrolled, so that constant indices keep coord
  /// in registers (see leaf_layout::seek).
  FLUXION_HOST_DEVICE void unravel(index_t i, index_t* coord) const {
    if (narrow) {
      u32 j = static_cast<u32>(i);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int d = max_rank - 1; d > 0; --d) {
        if (d < rank) {
          const u32 q = div[d].div(j);
          coord[d] = index_t(j - q * div[d].d);
          j = q;
        }
      }
      if (rank > 0) coord[0] = index_t(j);
      return;
    }
    const axes wide = unravel_wide(ext, rank, i);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int d = 0; d < max_rank; ++d) coord[d] = wide.at[d];
  }
};

/// The most elements an iteration may have for 32-bit coordinates (the dividers' range).
/// Process-wide; the tests lower it to run the 64-bit path.
inline index_t& narrow_limit() noexcept {
  static index_t limit = index_t(0x7FFFFFFF);
  return limit;
}

inline extents make_extents(const shape& s) {
  extents e;
  e.rank = s.rank();
  e.narrow = true;
  index_t size = 1;
  for (int d = 0; d < s.rank(); ++d) {
    e.ext.at[d] = s[d];
    e.div[d] = divider(s[d]);
    if (s[d] > 0 && size > narrow_limit() / s[d]) e.narrow = false;
    else size *= s[d];
  }
  return e;
}

/// out[dest(i)] = view(i).
template <class T, class View>
struct assign_element {
  T* out;
  leaf_layout dest;
  View view;
  extents iter;

  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    index_t coord[max_rank] = {};
    iter.unravel(i, coord);
    out[dest.position(coord)] = static_cast<T>(view.at(coord));
  }
};

/// out[i * out_stride] = view.row(i): a statement whose iteration collapsed to one dimension
/// (most of them: contiguous operands, scalars, broadcast rows). The views were positioned on the
/// host (seek), so each thread only multiplies its index by the strides.
template <class T, class View>
struct assign_row {
  T* out;
  index_t out_stride;
  View view;

  FLUXION_HOST_DEVICE void operator()(index_t i) const { out[i * out_stride] = static_cast<T>(view.row(i)); }
};

/// Element j of output k's segment of a reduction space (kept axes outer, reduced axes inner),
/// converted to R. Value functors of the reduction kernels take (output, position in segment), so
/// the common spaces need no division: one reduced axis (a full reduction of a contiguous
/// operand), or one kept and one reduced axis (rows, columns, bias gradients).
template <class R, class View>
struct reduction_element {
  View view;
  extents iter;
  index_t n_red;
  int split;  // kept axes: [0, split) of iter

  FLUXION_HOST_DEVICE R operator()(index_t k, index_t j) const {
    index_t coord[max_rank] = {};
    if (iter.rank == 1) {
      coord[0] = split == 1 ? k : j;  // a kept axis alone: every segment has one element
    } else if (iter.rank == 2 && split == 1) {
      coord[0] = k;
      coord[1] = j;
    } else {
      iter.unravel(k * n_red + j, coord);
    }
    return static_cast<R>(view.at(coord));
  }
};

/// Element j of a full reduction over one axis, read by row from a view positioned on the host.
template <class R, class View>
struct reduction_row {
  View view;
  FLUXION_HOST_DEVICE R operator()(index_t, index_t j) const { return static_cast<R>(view.row(j)); }
};

template <class RedOp, class R>
struct reduction_combine {
  FLUXION_HOST_DEVICE R operator()(R a, R b) const { return RedOp::combine(a, b); }
};

template <class RedOp, class R>
struct reduction_finalize {
  index_t n;
  FLUXION_HOST_DEVICE R operator()(R a) const { return RedOp::finalize(a, n); }
};

/// A candidate of arg_reduce: a value and its index along the reduced axis (-1: none yet).
template <class T>
struct arg_candidate {
  T value;
  index_t index;
};

/// Element j of output k's segment of an arg_reduce space, with j, its index along the axis.
template <class T, class View>
struct arg_element {
  reduction_element<T, View> element;

  FLUXION_HOST_DEVICE arg_candidate<T> operator()(index_t k, index_t j) const { return {element(k, j), j}; }
};

/// Keeps the first maximum (Max) or minimum; a NaN beats every number, and the first NaN wins.
/// Ties go to the lower index, so the combine is associative and commutative and agrees with
/// the CPU evaluator's sequential scan whatever order partial results meet in.
template <bool Max, class T>
struct arg_combine {
  FLUXION_HOST_DEVICE arg_candidate<T> operator()(const arg_candidate<T>& a, const arg_candidate<T>& b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const arg_candidate<T>& first = a.index < b.index ? a : b;
    if constexpr (std::is_floating_point_v<T>) {
      const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
      if (a_nan && b_nan) return first;
      if (a_nan) return a;
      if (b_nan) return b;
    }
    if (Max ? a.value > b.value : a.value < b.value) return a;
    if (Max ? b.value > a.value : b.value < a.value) return b;
    return first;
  }
};

template <class T>
struct arg_index {
  FLUXION_HOST_DEVICE std::int64_t operator()(const arg_candidate<T>& a) const { return a.index; }
};

/// Output k = finalize(combine over value(k, j), j < n_red), one thread per output.
template <class Out, class Acc, class Value, class Combine, class Finalize>
struct segment_loop {
  Out* out;
  Value value;
  Combine combine;
  Finalize finalize;
  Acc init;
  index_t n_red;

  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    Acc acc = init;
#if defined(__CUDA_ARCH__)
#pragma unroll 8  // see chunk_partial
#endif
    for (index_t j = 0; j < n_red; ++j) acc = combine(acc, value(k, j));
    out[k] = finalize(acc);
  }
};

/// partial[k * n_chunks + c] = combine over part c of segment k, one thread per part. Part c
/// takes the segment's elements c, c + n_chunks, c + 2 n_chunks ... (at most reduce_chunk of
/// them). The reduction ops are commutative, so this order changes nothing but rounding, and that
/// the same way on every run. Which thread runs which part is chosen so that neighbouring threads
/// read neighbouring memory: by segment (thread p: segment p / n_chunks, part p % n_chunks) where
/// a segment's elements are contiguous (rows: softmax, a sum over the last axes), and by part
/// (thread p: part p / n_out, segment p % n_out) for `columns`, where neighbouring segments are
/// (bias gradients: a sum over every axis but the last). Either way each part is the same sum in
/// the same order, so the results are bitwise the same.
template <class Acc, class Value, class Combine>
struct chunk_partial {
  Acc* partial;
  Value value;
  Combine combine;
  Acc init;
  index_t n_red, n_chunks;
  bool columns = false;
  bool narrow = false;  // n_out * n_chunks < 2^31: the thread's part found by a divider
  divider by;           // n_out for columns, else n_chunks

  FLUXION_HOST_DEVICE void operator()(index_t p) const {
    const index_t q = narrow ? index_t(by.div(u32(p))) : p / index_t(by.d);
    const index_t r = p - q * index_t(by.d);
    const index_t k = columns ? r : q, c = columns ? q : r;
    Acc acc = init;
    // Unrolled, the loads of a part are issued together and their latencies overlap; rolled, each
    // waited for the one before (Nsight Compute on an H100: 27 us for 16 threads reading 32 values
    // each, and 86 us, 780 GB/s, for the first level of a 16M sum). The sum's order is unchanged.
#if defined(__CUDA_ARCH__)
#pragma unroll 8
#endif
    for (index_t j = c; j < n_red; j += n_chunks) acc = combine(acc, value(k, j));
    partial[k * n_chunks + c] = acc;
  }
};

template <class Acc>
struct read_partial {
  const Acc* partial;
  index_t n;  // partial results per output
  FLUXION_HOST_DEVICE Acc operator()(index_t k, index_t j) const { return partial[k * n + j]; }
};

/// Whether chunk_partial reads neighbouring segments with neighbouring threads (columns) where it
/// can. Process-wide; the tests turn it off to compare the two orders bit for bit.
inline bool& column_partials() noexcept {
  static bool on = true;
  return on;
}

/// out[k] = finalize(combine of value(k, j) over j < n_red), for n_out segments of n_red >= 1
/// elements; `init` is the combine's identity. Long segments are split into parts whose partial
/// results are reduced again, the same way. `columns`: neighbouring segments lie next to each other
/// in memory (see chunk_partial).
template <class Out, class Acc, class Value, class Combine, class Finalize>
void segmented_reduce(Out* out, index_t n_out, index_t n_red, const Value& value, const Acc& init,
                      const Combine& combine, const Finalize& finalize, bool columns = false) {
  const thrust::counting_iterator<index_t> first(0);
  if (n_red <= reduce_chunk) {
    thrust::for_each_n(kernel_policy(), first, n_out,
                       segment_loop<Out, Acc, Value, Combine, Finalize>{out, value, combine, finalize, init, n_red});
    return;
  }
  const index_t n_chunks = (n_red + reduce_chunk - 1) / reduce_chunk;
  device_scratch<Acc> partial(n_out * n_chunks);
  const bool by_part = columns && column_partials();
  thrust::for_each_n(kernel_policy(), first, n_out * n_chunks,
                     chunk_partial<Acc, Value, Combine>{partial.data(), value, combine, init, n_red, n_chunks, by_part,
                                                        n_out * n_chunks <= narrow_limit(),
                                                        divider(by_part ? n_out : n_chunks)});
  segmented_reduce(out, n_out, n_chunks, read_partial<Acc>{partial.data(), n_chunks}, init, combine, finalize);
}

/// One element of C = op(A) op(B), for a batch of matrix pairs; offsets index A and B per
/// batch entry (a single pair keeps its offsets here, a batch reads them from device memory).
template <class T>
struct matmul_element {
  const T* a;
  const T* b;
  T* c;
  const index_t* offsets;  // a_off[0, batch) then b_off[0, batch); null for a single pair
  index_t a_off0, b_off0, batch, m, n, k;
  bool trans_a, trans_b;

  FLUXION_HOST_DEVICE void operator()(index_t idx) const {
    const index_t mn = m * n, bi = idx / mn, r = idx - bi * mn, i = r / n, j = r - i * n;
    const T* ab = a + (offsets ? offsets[bi] : a_off0);
    const T* bb = b + (offsets ? offsets[batch + bi] : b_off0);
    const index_t a_row = trans_a ? 1 : k, a_col = trans_a ? m : 1;  // op(A)[i, p] = ab[i * a_row + p * a_col]
    const index_t b_row = trans_b ? 1 : n, b_col = trans_b ? k : 1;  // op(B)[p, j] = bb[p * b_row + j * b_col]
    T acc = T(0);
    for (index_t p = 0; p < k; ++p) acc = static_cast<T>(acc + ab[i * a_row + p * a_col] * bb[p * b_row + j * b_col]);
    c[idx] = acc;
  }
};

}  // namespace cuda_kernel

template <>
struct evaluator<cuda> {
  /// Whether every kept axis (of extent > 1) comes after every reduced one: then, for a
  /// row-major operand, neighbouring outputs are neighbours in memory (a column reduction).
  static bool kept_after_reduced(const shape& s, unsigned mask) {
    int last_reduced = -1, first_kept = max_rank;
    for (int d = 0; d < s.rank(); ++d) {
      if (s[d] == 1) continue;
      if (mask >> d & 1u) last_reduced = d;
      else if (first_kept == max_rank) first_kept = d;
    }
    return first_kept != max_rank && last_reduced >= 0 && last_reduced < first_kept;
  }

  /// out[dest(i)] = view(i) for every i in the iteration shape s.
  template <class T, class View>
  static void assign(T* out, const leaf_layout& dest, const View& view, const shape& s) {
    const index_t n = s.size();
    if (n == 0) return;
    with_destination<View> w{view, dest};
    shape iter = s;
    collapse_view(w, iter);
    const auto first = thrust::counting_iterator<index_t>(0);
    if (iter.rank() <= 1) {
      const index_t origin[max_rank] = {};
      w.seek(origin, 0);
      thrust::for_each_n(kernel_policy(), first, n,
                         cuda_kernel::assign_row<T, View>{out + w.dest.base, w.dest.inner, w.view});
      return;
    }
    thrust::for_each_n(kernel_policy(), first, n,
                       cuda_kernel::assign_element<T, View>{out, w.dest, w.view, cuda_kernel::make_extents(iter)});
  }

  /// out[k] = finalize(combine over the reduced axes (bits of mask) of view), kept axes in order.
  template <class RedOp, class R, class View>
  static void reduce(R* out, const View& view, const shape& s, unsigned mask) {
    View v = view;
    const reduction_space sp = prepare_reduction(v, s, mask);
    const index_t n_out = sp.n_out, n_red = sp.n_red;
    if (n_out == 0) return;
    // Computed once, on the host; it also fills the outputs of empty reductions.
    const R identity = RedOp::template identity<R>();
    if (n_red == 0) {
      thrust::fill_n(kernel_policy(), out, n_out, RedOp::finalize(identity, 0));
      return;
    }
    if (sp.iter.rank() == 1 && sp.split == 0) {
      // One reduced axis and nothing kept (a full reduction): the view is positioned on the host
      // and read by rows, with no branch in the loop, so a thread's loads can all be in flight.
      const index_t origin[max_rank] = {};
      v.seek(origin, 0);
      cuda_kernel::segmented_reduce(out, n_out, n_red, cuda_kernel::reduction_row<R, View>{v}, identity,
                                    cuda_kernel::reduction_combine<RedOp, R>{},
                                    cuda_kernel::reduction_finalize<RedOp, R>{n_red});
      return;
    }
    cuda_kernel::segmented_reduce(out, n_out, n_red,
                                  cuda_kernel::reduction_element<R, View>{v, cuda_kernel::make_extents(sp.iter), n_red, sp.split},
                                  identity, cuda_kernel::reduction_combine<RedOp, R>{},
                                  cuda_kernel::reduction_finalize<RedOp, R>{n_red}, kept_after_reduced(s, mask));
  }

  /// Index of the first maximum (Max) or minimum along one axis; NaN counts as the extreme.
  template <bool Max, class View>
  static void arg_reduce(std::int64_t* out, const View& view, const shape& s, int axis) {
    View v = view;
    const reduction_space sp = prepare_reduction(v, s, 1u << axis);
    const index_t n_out = sp.n_out, n_red = sp.n_red;
    if (n_out == 0 || n_red == 0) return;  // an empty axis is rejected when the node is built
    using T = typename View::value_type;
    using candidate = cuda_kernel::arg_candidate<T>;
    const cuda_kernel::arg_element<T, View> element{{v, cuda_kernel::make_extents(sp.iter), n_red, sp.split}};
    cuda_kernel::segmented_reduce(out, n_out, n_red, element, candidate{T{}, -1}, cuda_kernel::arg_combine<Max, T>{},
                                  cuda_kernel::arg_index<T>{}, kept_after_reduced(s, 1u << axis));
  }

  /// Batched matrix products, C_b = op(A_{a_off[b]}) op(B_{b_off[b]}), one thread per element
  /// of C; the offset arrays are on the host, as fx::matmul builds them. Under nvcc, float and
  /// double go to cuBLAS (backend/cuda/blas.hpp); other types, and every type on Thrust's OpenMP
  /// system, run the plain kernel below.
  template <class T>
  static void matmul(bool ta, bool tb, index_t batch, index_t m, index_t n, index_t k, const T* a,
                     const index_t* a_off, const T* b, const index_t* b_off, T* c) {
    if (batch == 0 || m == 0 || n == 0) return;
#if FLUXION_HAVE_CUBLAS
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      constexpr index_t int_max = 2147483647;
      if (k > 0 && m <= int_max && n <= int_max && k <= int_max && batch <= int_max) {
        cublas::gemm(ta, tb, batch, m, n, k, a, a_off, b, b_off, c);
        return;
      }
    }
#endif
    cuda_kernel::matmul_element<T> f{a, b, c, nullptr, a_off[0], b_off[0], batch, m, n, k, ta, tb};
    const auto first = thrust::counting_iterator<index_t>(0);
    if (batch == 1) {
      thrust::for_each_n(kernel_policy(), first, m * n, f);
      return;
    }
    device_scratch<index_t> offsets(2 * batch);
    device_memory<cuda>::to_device(offsets.data(), a_off, batch);
    device_memory<cuda>::to_device(offsets.data() + batch, b_off, batch);
    f.offsets = offsets.data();
    thrust::for_each_n(kernel_policy(), first, batch * m * n, f);
  }
};

}  // namespace fluxion::detail
