// TensorFlow's unsorted_segment_max and unsorted_segment_min.
//
//   fx::tensor<std::int32_t> ids = {0, 2, 0, 1};
//   auto m = fx::unsorted_segment_max(x, ids, 3);   // x (4, 5): (3, 5), row s the max of the rows named s
//
// A segment nothing names is numeric_limits<T>::lowest() (max) or max() (min), as in TensorFlow;
// a NaN in a segment makes it NaN. The values come from a kernel of each device
// (segment_extreme_kernel: the cpu's loop below, fx::cuda's in backend/cuda/sort.hpp). Under a tape
// or a forward accumulator the result is also written as ops that autodiff differentiates, to any
// order: the gradient of a segment goes to the elements equal to its extreme, split equally among
// ties (TensorFlow's rule).
#pragma once

#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor.hpp"

namespace fluxion {

namespace detail {

/// out (segments, inner) = the max (or min) over the rows k of data (n_ids, inner) whose ids[k] names
/// the segment; `lowest`/`highest` where none does; NaN where any is NaN. Ids outside [0, segments)
/// (a device's check still queued) are skipped.
template <class T, class I, class D>
tensor<T, D> segment_extreme(const tensor<T, D>& data, const tensor<I, D>& ids, const shape& out_shape, bool is_max) {
  const index_t segments = out_shape[0], n_ids = ids.size();
  index_t inner = 1;
  for (int d = 1; d < out_shape.rank(); ++d) inner *= out_shape[d];
  const T init = is_max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  if constexpr (!std::is_same_v<D, cpu> && has_segment_extreme_kernel<D>) {
    tensor<T, D> out(out_shape);
    segment_extreme_kernel<D>::run(data.data(), ids.data(), out.mutable_data(), n_ids, segments, inner, is_max, init);
    return out;
  } else if constexpr (!std::is_same_v<D, cpu>) {
    tensor<T, cpu> host_data(data.shape());
    tensor<I, cpu> host_ids(ids.shape());
    device_memory<D>::to_host(host_data.mutable_data(), data.data(), data.size());
    device_memory<D>::to_host(host_ids.mutable_data(), ids.data(), ids.size());
    const tensor<T, cpu> host_out = segment_extreme(host_data, host_ids, out_shape, is_max);
    tensor<T, D> out(out_shape);
    device_memory<D>::to_device(out.mutable_data(), host_out.data(), host_out.size());
    return out;
  } else {
    tensor<T, cpu> out(out_shape);
    T* o = out.mutable_data();
    for (index_t e = 0; e < out.size(); ++e) o[e] = init;
    const T* x = data.data();
    const I* id = ids.data();
    // A NaN stays: nothing compares above it (simd_ops' max and min). In vectors for float and
    // double (g++'s -O2 left the plain loop scalar: 3.7x its -O3 time), element by element.
    auto rows = [&]<bool IsMax>() {
      for (index_t k = 0; k < n_ids; ++k) {
        const auto s = static_cast<index_t>(id[k]);
        if (s < 0 || s >= segments) continue;
        const T* xr = x + k * inner;
        T* orow = o + s * inner;
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          kernels::for_each_channel_chunk<T>(inner, [&](auto ops, index_t i) {
            using O = decltype(ops);
            const auto v = O::loadu(xr + i), m = O::loadu(orow + i);
            O::storeu(orow + i, IsMax ? O::max(v, m) : O::min(v, m));
          });
        } else {
          for (index_t i = 0; i < inner; ++i) {
            const T v = xr[i];
            T& m = orow[i];
            if constexpr (std::is_floating_point_v<T>) {
              if ((IsMax ? v > m : v < m) || v != v) m = v;
            } else if (IsMax ? v > m : v < m) {
              m = v;
            }
          }
        }
      }
    };
    if (is_max) rows.template operator()<true>();
    else rows.template operator()<false>();
    return out;
  }
}

/// Whether a tape records x or a forward accumulator is alive (then the result must be ops).
template <class T, class D>
bool differentiated(const tensor<T, D>& x) {
  if (autodiff_state::accumulators > 0) return true;  // the same with or without forward mode (expr/evaluate.hpp)
  for (gradient_tape* t : tape_stack::tapes)
    if (t->recording() && t->tracks(x.id())) return true;
  return false;
}

template <class A, class I>
auto unsorted_segment_extreme(const char* op, A&& data, const I& segment_ids, index_t num_segments, bool is_max) {
  using E = expr_t<A>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  using IT = value_type_t<I>;
  check_not_none(data, op);
  const tensor<T, D> x = materialize(as_expr<A>(std::forward<A>(data)));
  const auto [ids, out] = segment_layout(op, x.shape(), materialize_asserted<IT, D>(segment_ids), num_segments);
  const index_t n_ids = ids.size();
  shape rows{n_ids};
  for (int d = 1; d < out.rank(); ++d) rows.push_back(out[d]);
  const tensor<T, D> m = segment_extreme(tensor<T, D>(x, rows, same_buffer), ids, out, is_max);
  if constexpr (!std::is_floating_point_v<T>) {
    return m;
  } else {
    if (!differentiated(x)) return m;
    // The same values as ops autodiff follows: the mean of each segment's elements equal to its
    // extreme (v), moved onto the kernel's value exactly by a constant (v and m are within a factor
    // of 2, so m - v and v + (m - v) are exact); a segment that is empty, NaN or infinite is m as
    // it is, with no gradient.
    std::vector<index_t> row_dims(rows.begin(), rows.end());
    const tensor<T, D> xr = reshape(x, row_dims);  // recorded
    tensor<bool, D> selected;
    tensor<T, D> count;
    {
      materialize_depth constants;
      selected = tensor<bool, D>(xr == gather(m, ids, 0, checked_indices));
      count = tensor<T, D>(maximum(segment_sum_expr<T, IT, D>(tensor<T, D>(cast<T>(selected)), ids, out), T(1)));
    }
    const tensor<T, D> v = segment_sum_expr<T, IT, D>(tensor<T, D>(where(selected, xr, T(0))), ids, out) / count;
    return tensor<T, D>(where(is_finite(m), v + stop_gradient(m - v), m));
  }
}

}  // namespace detail

/// tf.math.unsorted_segment_max: out[s, ...] = the max of data[k..., ...] over the positions k whose
/// segment_ids[k...] is s; numeric_limits<T>::lowest() where none is; NaN where any is NaN.
/// segment_ids (int32 or int64) has a prefix of data's shape, each id in [0, num_segments).
/// Differentiable in data: a segment's gradient goes to its maxima, split equally among ties.
template <class A, class I>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I>)
auto unsorted_segment_max(A&& data, const I& segment_ids, index_t num_segments) {
  static_assert(std::is_same_v<value_type_t<I>, std::int32_t> || std::is_same_v<value_type_t<I>, std::int64_t>,
                "fluxion::unsorted_segment_max: segment_ids must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, device_t<detail::expr_t<A>>>,
                "fluxion::unsorted_segment_max: data and segment_ids live on different devices.");
  return detail::unsorted_segment_extreme("unsorted_segment_max", std::forward<A>(data), segment_ids, num_segments, true);
}

/// tf.math.unsorted_segment_min: as unsorted_segment_max, with the min (numeric_limits<T>::max()
/// where no position names a segment).
template <class A, class I>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I>)
auto unsorted_segment_min(A&& data, const I& segment_ids, index_t num_segments) {
  static_assert(std::is_same_v<value_type_t<I>, std::int32_t> || std::is_same_v<value_type_t<I>, std::int64_t>,
                "fluxion::unsorted_segment_min: segment_ids must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, device_t<detail::expr_t<A>>>,
                "fluxion::unsorted_segment_min: data and segment_ids live on different devices.");
  return detail::unsorted_segment_extreme("unsorted_segment_min", std::forward<A>(data), segment_ids, num_segments, false);
}

}  // namespace fluxion
