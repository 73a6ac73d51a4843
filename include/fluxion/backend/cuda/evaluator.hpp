// The CUDA evaluator: runs a view tree as Thrust algorithms over a counting iterator.
//
//   fx::tensor<float, fx::cuda> r = a * b + fx::sin(c);   // one thrust::for_each_n, one pass
//   auto s = fx::reduce_sum(a * b, 1);                     // one segmented reduction, no temporary
//
// It has the interface of the CPU evaluator (backend/cpu/evaluator.hpp) and reuses its host-side
// preparation (expr/layout.hpp): the view is collapsed or permuted on the host, copied by value
// into a functor, and each element's coordinates are unravelled from its flat index on the device.
// Views are structs of raw pointers, and every function they call is FLUXION_HOST_DEVICE, so the
// same functors run as CUDA kernels under nvcc and as OpenMP loops under a host compiler with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP.
#pragma once

#include <cstdint>
#include <type_traits>

#include <thrust/execution_policy.h>
#include <thrust/fill.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/discard_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>
#include <thrust/reduce.h>
#include <thrust/transform_reduce.h>

#include "../../core/config.hpp"
#include "../../core/device.hpp"
#include "../../core/shape.hpp"
#include "../../expr/forward.hpp"
#include "../../expr/layout.hpp"
#include "../../expr/reduce_ops.hpp"
#include "../../expr/view.hpp"
#include "memory.hpp"

namespace fluxion::detail {

namespace cuda_kernel {

/// A reduction runs one thread per output, each looping over its reduced elements, when there are
/// few reduced elements or outputs enough to fill the device; otherwise a reduce_by_key spreads
/// every output over many threads.
inline constexpr index_t loop_max_reduced = 32;
inline constexpr index_t loop_min_outputs = 16384;

inline bool per_output_loop(index_t n_out, index_t n_red) {
  return n_red <= loop_max_reduced || n_out >= loop_min_outputs;
}

/// An iteration shape, copyable to the device.
struct extents {
  int rank = 0;
  index_t ext[max_rank] = {};

  /// Coordinates of flat (row-major) index i.
  FLUXION_HOST_DEVICE void unravel(index_t i, index_t* coord) const {
    for (int d = rank - 1; d > 0; --d) {
      const index_t q = i / ext[d];
      coord[d] = i - q * ext[d];
      i = q;
    }
    if (rank > 0) coord[0] = i;
  }
};

inline extents make_extents(const shape& s) {
  extents e;
  e.rank = s.rank();
  for (int d = 0; d < s.rank(); ++d) e.ext[d] = s[d];
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

/// Element i of a reduction space (kept axes outer, reduced axes inner), converted to R.
template <class R, class View>
struct reduction_element {
  View view;
  extents iter;

  FLUXION_HOST_DEVICE R operator()(index_t i) const {
    index_t coord[max_rank] = {};
    iter.unravel(i, coord);
    return static_cast<R>(view.at(coord));
  }
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

/// Element i of an arg_reduce space, with its position inside its output's segment.
template <class T, class View>
struct arg_element {
  reduction_element<T, View> element;
  index_t n_red;

  FLUXION_HOST_DEVICE arg_candidate<T> operator()(index_t i) const { return {element(i), i % n_red}; }
};

/// Keeps the first maximum (Max) or minimum; a NaN beats every number, and the first NaN wins.
/// Ties go to the lower index, so the combine is associative and commutative, as parallel
/// reductions require, and agrees with the CPU evaluator's sequential scan.
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

/// Output k = finalize(combine over value(k * n_red + j), j < n_red), sequentially.
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
    const index_t b = k * n_red;
    for (index_t j = 0; j < n_red; ++j) acc = combine(acc, value(b + j));
    out[k] = finalize(acc);
  }
};

struct segment_of {
  index_t n_red;
  FLUXION_HOST_DEVICE index_t operator()(index_t i) const { return i / n_red; }
};

/// out[k] = finalize(combine of value(i) over segment k), for n_out segments of n_red >= 1
/// consecutive flat indices. `init` is the combine's identity.
template <class Out, class Acc, class Value, class Combine, class Finalize>
void segmented_reduce(Out* out, index_t n_out, index_t n_red, Value value, Acc init, Combine combine,
                      Finalize finalize) {
  const thrust::counting_iterator<index_t> first(0);
  if (n_out == 1) {
    const Acc acc = thrust::transform_reduce(thrust::device, first, first + n_red, value, init, combine);
    const Out result = finalize(acc);
    device_memory<cuda>::to_device(out, &result, 1);
  } else if (per_output_loop(n_out, n_red)) {
    thrust::for_each_n(thrust::device, first, n_out,
                       segment_loop<Out, Acc, Value, Combine, Finalize>{out, value, combine, finalize, init, n_red});
  } else {
    const auto keys = thrust::make_transform_iterator(first, segment_of{n_red});
    const auto values = thrust::make_transform_iterator(first, value);
    thrust::reduce_by_key(thrust::device, keys, keys + n_out * n_red, values, thrust::make_discard_iterator(),
                          thrust::make_transform_output_iterator(out, finalize), thrust::equal_to<index_t>(),
                          combine);
  }
}

}  // namespace cuda_kernel

template <>
struct evaluator<cuda> {
  /// out[dest(i)] = view(i) for every i in the iteration shape s.
  template <class T, class View>
  static void assign(T* out, const leaf_layout& dest, const View& view, const shape& s) {
    const index_t n = s.size();
    if (n == 0) return;
    with_destination<View> w{view, dest};
    shape iter = s;
    collapse_view(w, iter);
    thrust::for_each_n(thrust::device, thrust::counting_iterator<index_t>(0), n,
                       cuda_kernel::assign_element<T, View>{out, w.dest, w.view, cuda_kernel::make_extents(iter)});
  }

  /// out[k] = finalize(combine over the reduced axes (bits of mask) of view), kept axes in order.
  template <class RedOp, class R, class View>
  static void reduce(R* out, const View& view, const shape& s, unsigned mask) {
    View v = view;
    const reduction_space sp = prepare_reduction(v, s, mask);
    const index_t n_out = sp.n_out, n_red = sp.n_red;
    if (n_out == 0) return;
    // Identities come from std::numeric_limits, which is host-only: evaluate them here.
    const R identity = RedOp::template identity<R>();
    if (n_red == 0) {
      thrust::fill_n(thrust::device, out, n_out, RedOp::finalize(identity, 0));
      return;
    }
    cuda_kernel::segmented_reduce(out, n_out, n_red,
                                  cuda_kernel::reduction_element<R, View>{v, cuda_kernel::make_extents(sp.iter)},
                                  identity, cuda_kernel::reduction_combine<RedOp, R>{},
                                  cuda_kernel::reduction_finalize<RedOp, R>{n_red});
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
    const cuda_kernel::arg_element<T, View> element{{v, cuda_kernel::make_extents(sp.iter)}, n_red};
    cuda_kernel::segmented_reduce(out, n_out, n_red, element, candidate{T{}, -1}, cuda_kernel::arg_combine<Max, T>{},
                                  cuda_kernel::arg_index<T>{});
  }
};

}  // namespace fluxion::detail
