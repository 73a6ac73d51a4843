// Indexing and assembly: gather, one_hot, concat, stack, split and pad.
//
//   auto rows = fx::gather(embeddings, ids);        // fused into whatever reads it
//   auto oh = fx::one_hot(labels, 10);              // float one-hot, built from an iota, no loop
//   fx::tensor<float> ab = fx::concat({a, b}, 0);
//   auto parts = fx::split(x, 3, 1);                // std::vector of tensors
//
// gather checks its indices when it is built, so a bad index throws at once on the cpu:
// "gather: indices = 7 is not in [0, 3)". On fx::cuda the check is a kernel, and the thread's next
// read from the device throws the same message (check_index_range, backend/cuda/checks.hpp).

#include "evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_EXPR_INDEXING_HPP
#define FLUXION_EXPR_INDEXING_HPP
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "../backend/cpu/detail/simd_ops.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"
#include "remap.hpp"

namespace fluxion {

namespace detail {
/// Tells gather_expr that its indices are known to be in range (built from checked ones), so that
/// it does not read them on the host to check them again (on a device, a wait for its queue).
struct checked_indices_t {};
inline constexpr checked_indices_t checked_indices{};

/// The flat position of the first of the n indices at p that is not in [0, hi), or n.
template <class I>
index_t first_out_of_range(const I* p, index_t n, index_t hi) {
  index_t k = 0;
  while (k < n && p[k] >= 0 && static_cast<index_t>(p[k]) < hi) ++k;
  return k;
}

/// Checks that every index of `idx` is in [0, hi): the first that is not, at flat position k,
/// throws out_of_range(describe(k, idx[k])). On a device that queues index checks
/// (queues_index_checks: fx::cuda, backend/cuda/checks.hpp) the check is a kernel, queued without
/// waiting, and the error is thrown by this thread's next read from the device, its message followed
/// by where it was found; until then the op reads clamped indices. Elsewhere the indices are read
/// and checked here.
template <class I, class D, class Describe>
void check_index_range(const tensor<I, D>& idx, index_t hi, Describe describe) {
  if constexpr (std::is_same_v<D, cpu>) {
    const index_t k = first_out_of_range(idx.data(), idx.size(), hi);
    if (k < idx.size()) throw out_of_range(describe(k, idx.data()[k]));
  } else {
    auto on_host = [idx, hi, describe](const char* found) {
      const std::vector<I> host = idx.to_vector();
      const index_t k = first_out_of_range(host.data(), idx.size(), hi);
      if (k < idx.size()) throw out_of_range(describe(k, host[k]) + found);
    };
    if constexpr (queues_index_checks<D>)
      device_memory<D>::queue_index_check(idx.data(), idx.size(), hi, [on_host] {
        on_host(" (found by a check queued on the device, and reported at this thread's next read from it)");
      });
    else
      on_host("");
  }
}
}  // namespace detail

template <class T, class I, class Device>
struct gather_expr : expression_base {
  using value_type = T;
  using device_type = Device;
  tensor<T, Device> params;
  tensor<I, Device> indices;
  int axis;
  fluxion::shape m_shape;

  gather_expr(tensor<T, Device> p, tensor<I, Device> idx, int ax, detail::checked_indices_t)
      : params(std::move(p)), indices(std::move(idx)), axis(ax) {
    const auto& ps = params.shape();
    for (int d = 0; d < axis; ++d) m_shape.push_back(ps[d]);
    for (int d = 0; d < indices.rank(); ++d) m_shape.push_back(indices.shape()[d]);
    for (int d = axis + 1; d < ps.rank(); ++d) m_shape.push_back(ps[d]);
  }
  gather_expr(tensor<T, Device> p, tensor<I, Device> idx, int ax)
      : gather_expr(std::move(p), std::move(idx), ax, detail::checked_indices) {
    const index_t n = params.shape()[axis];
    detail::check_index_range(indices, n, [n](index_t, I v) {
      return "gather: indices = " + std::to_string(v) + " is not in [0, " + std::to_string(n) + ")";
    });
  }
  const fluxion::shape& shape() const { return m_shape; }

  /// The gather assigned as it is (materialize): on the cpu, where each slice has at least 8
  /// elements, a copy per slice in tasks, as an embedding lookup or PyTorch's index_select; the
  /// fused row loop (make_view) seeks every row and reads it element by element.
  std::optional<tensor<T, Device>> direct() const {
    if constexpr (!std::is_same_v<Device, cpu>) {
      return std::nullopt;
    } else {
      const auto& ps = params.shape();
      index_t outer = 1, inner = 1;
      for (int d = 0; d < axis; ++d) outer *= ps[d];
      for (int d = axis + 1; d < ps.rank(); ++d) inner *= ps[d];
      if (inner < 8) return std::nullopt;
      tensor<T, cpu> out(m_shape);
      const index_t n_idx = indices.size(), extent = ps[axis], rows = outer * n_idx;
      const index_t per_task = std::max<index_t>(1, 32768 / inner);
      const T* src = params.data();
      const I* idx = indices.data();
      T* dst = out.mutable_data();
      detail::parallel_for((rows + per_task - 1) / per_task, [&](index_t t) {
        const index_t end = std::min(rows, (t + 1) * per_task);
        for (index_t r = t * per_task; r < end; ++r) {
          const index_t o = r / n_idx, k = static_cast<index_t>(idx[r - o * n_idx]);
          const index_t j = k < 0 ? 0 : k >= extent ? extent - 1 : k;  // checked already; never outside
          std::memcpy(dst + r * inner, src + (o * extent + j) * inner, static_cast<std::size_t>(inner) * sizeof(T));
        }
      });
      return out;
    }
  }

  detail::gather_view<T, I> make_view() const {
    detail::gather_view<T, I> v;
    v.data = params.data();
    const auto& ps = params.shape();
    const auto pst = contiguous_strides(ps);
    const int ri = indices.rank();
    v.rank = m_shape.rank();
    v.axis_stride = pst[static_cast<std::size_t>(axis)];
    v.extent = ps[axis];
    for (int d = 0; d < v.rank; ++d) v.strides[d] = 0;
    for (int d = 0; d < axis; ++d) v.strides[d] = ps[d] == 1 ? 0 : pst[static_cast<std::size_t>(d)];
    for (int d = axis + 1; d < ps.rank(); ++d)
      v.strides[d - 1 + ri] = ps[d] == 1 ? 0 : pst[static_cast<std::size_t>(d)];
    v.index = indices.make_view();
    // The index tensor spans output axes [axis, axis + ri).
    v.index.for_each_leaf([&](detail::leaf_layout& l) {
      index_t st[max_rank] = {};
      for (int d = 0; d < ri; ++d) st[axis + d] = l.strides[d];
      l.rank = v.rank;
      for (int d = 0; d < v.rank; ++d) l.strides[d] = st[d];
    });
    return v;
  }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

namespace detail {
/// Whether Device has a kernel for gather's adjoint (scatter_kernel<Device>::run below); without
/// one, autodiff's scatter_add goes through the host. fx::cuda's is in backend/cuda/sort.hpp.
template <class Device>
inline constexpr bool has_scatter_kernel = false;
/// run(g, indices, out, outer, n_indices, extent, inner): out (outer, extent, inner) = the sum, for
/// each row j of the axis, of g's rows (outer, k, inner) whose indices[k] is j, added in order of k.
template <class Device>
struct scatter_kernel;
/// Whether Device has a kernel for unsorted_segment_max/min (expr/segment_reduce.hpp); without one,
/// they go through the host. run(data, ids, out, n_ids, segments, inner, is_max, init): out
/// (segments, inner) = the max (or min) of data's rows (n_ids, inner) whose id names the segment,
/// `init` where none does, NaN where any is NaN. fx::cuda's is in backend/cuda/sort.hpp.
template <class Device>
inline constexpr bool has_segment_extreme_kernel = false;
template <class Device>
struct segment_extreme_kernel;

/// The adjoint of gather: adds each gradient row into the row of `params` it was read from, in
/// order of the index positions. A device with a scatter kernel (fx::cuda) runs it there; any
/// other goes through the host.
template <class T, class I, class D>
tensor<T, D> scatter_add(const tensor<T, D>& g, const tensor<I, D>& indices, int axis, const shape& params) {
  index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= params[d];
  for (int d = axis + 1; d < params.rank(); ++d) inner *= params[d];
  if constexpr (!std::is_same_v<D, cpu> && has_scatter_kernel<D>) {
    tensor<T, D> out(params);
    scatter_kernel<D>::run(g.data(), indices.data(), out.mutable_data(), outer, indices.size(),
                                              params[axis], inner);
    return out;
  } else if constexpr (!std::is_same_v<D, cpu>) {
    tensor<T, cpu> host_g(g.shape());
    tensor<I, cpu> host_indices(indices.shape());
    device_memory<D>::to_host(host_g.mutable_data(), g.data(), g.size());
    device_memory<D>::to_host(host_indices.mutable_data(), indices.data(), indices.size());
    const tensor<T, cpu> host_out = scatter_add(host_g, host_indices, axis, params);
    tensor<T, D> out(params);
    device_memory<D>::to_device(out.mutable_data(), host_out.data(), host_out.size());
    return out;
  } else {
    tensor<T, cpu> out = broadcast_to(scalar_expr<T, cpu>(T(0)), params);
    const index_t n_idx = indices.size(), extent = params[axis];
    const T* gp = g.data();
    const I* ip = indices.data();
    T* op = out.mutable_data();
    for (index_t o = 0; o < outer; ++o)
      for (index_t k = 0; k < n_idx; ++k) {
        T* dst = op + (o * extent + static_cast<index_t>(ip[k])) * inner;
        const T* src = gp + (o * n_idx + k) * inner;
        kernels::add_arrays(dst, dst, src, inner);  // a plain loop took 3x its -O3 time at -O2
      }
    return out;
  }
}
}  // namespace detail

/// Gathers slices of `params` along `axis` at integer `indices` (a tensor or a scalar).
/// The result has shape params.shape[:axis] + indices.shape + params.shape[axis+1:].
template <class P, class I>
  requires((is_expression_v<P> || is_variable_v<std::remove_cvref_t<P>>) &&
           (is_expression_v<I> || std::is_integral_v<std::remove_cvref_t<I>>))
auto gather(P&& params, I&& indices, int axis = 0) {
  using EP = detail::expr_t<P>;
  using T = value_type_t<EP>;
  using D = device_t<EP>;
  auto p = detail::materialize(detail::as_expr<P>(std::forward<P>(params)));
  const int ax = normalize_axis(axis, p.rank(), "gather");
  if constexpr (is_expression_v<I>) {
    using IT = value_type_t<I>;
    static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                  "fluxion::gather: indices must be int32 or int64.");
    static_assert(std::is_same_v<device_t<I>, D>, "fluxion::gather: params and indices live on different devices.");
    return gather_expr<T, IT, D>(std::move(p), detail::materialize_asserted<IT, D>(indices), ax);
  } else {
    using IT = std::conditional_t<(sizeof(std::remove_cvref_t<I>) > 4), std::int64_t, std::int32_t>;
    return gather_expr<T, IT, D>(std::move(p), tensor<IT, D>(static_cast<IT>(indices)), ax);
  }
}

/// gather of indices already checked (nn::embedding's): not checked again.
template <class P, class IT, class D>
  requires(is_expression_v<P> || is_variable_v<std::remove_cvref_t<P>>)
auto gather(P&& params, const tensor<IT, D>& indices, int axis, detail::checked_indices_t) {
  using EP = detail::expr_t<P>;
  auto p = detail::materialize(detail::as_expr<P>(std::forward<P>(params)));
  const int ax = normalize_axis(axis, p.rank(), "gather");
  return gather_expr<value_type_t<EP>, IT, device_t<EP>>(std::move(p), indices, ax, detail::checked_indices);
}

/// unsorted_segment_sum's node, and gather's adjoint: the slices of `data` along `axis` added into
/// the slices of the result that `ids` names (detail::scatter_add). ids is flat; data is the
/// result's shape but for `axis`, which has one slice per id (the axes ids covers, as one). Its own
/// adjoint is a gather, so gradients through a gather are differentiable again (second order).
template <class T, class I, class Device>
struct segment_sum_expr : detail::boundary_expr<segment_sum_expr<T, I, Device>, T, Device> {
  tensor<T, Device> data;
  tensor<I, Device> ids;
  fluxion::shape m_shape;
  int axis = 0;
  segment_sum_expr(tensor<T, Device> d, tensor<I, Device> i, fluxion::shape s, int ax = 0)
      : data(std::move(d)), ids(std::move(i)), m_shape(std::move(s)), axis(ax) {}
  const fluxion::shape& shape() const { return m_shape; }
  tensor<T, Device> compute() const { return detail::scatter_add(data, ids, axis, m_shape); }
};

namespace detail {
/// The segment ops' checks: segment_ids' shape is a prefix of data's shape `s`, num_segments is not
/// negative, and every id is in [0, num_segments) (check_index_range). Returns the ids, flat, and the
/// result's shape (num_segments,) + the rest of s.
template <class IT, class D>
std::pair<tensor<IT, D>, shape> segment_layout(const char* op, const shape& s, const tensor<IT, D>& ids, index_t num_segments) {
  bool prefix = ids.rank() <= s.rank();
  for (int d = 0; prefix && d < ids.rank(); ++d) prefix = ids.shape()[d] == s[d];
  if (!prefix)
    throw shape_error(std::string(op) + ": segment_ids of shape " + to_string(ids.shape()) + " is not a prefix of data's shape " +
                      to_string(s));
  if (num_segments < 0)
    throw invalid_argument(std::string(op) + ": num_segments = " + std::to_string(num_segments) + " is negative");
  check_index_range(ids, num_segments, [op, is = ids.shape(), num_segments](index_t k, IT v) {
    return std::string(op) + ": segment_ids" + position_text(k, is) + " = " + std::to_string(v) + " is not in [0, " +
           std::to_string(num_segments) + ")";
  });
  shape out{num_segments};
  for (int d = ids.rank(); d < s.rank(); ++d) out.push_back(s[d]);
  return {tensor<IT, D>(ids, shape{ids.size()}, same_buffer), out};
}
}  // namespace detail

/// TensorFlow's tf.math.unsorted_segment_sum: out[s, ...] = the sum of data[k..., ...] over the
/// positions k whose segment_ids[k...] is s, in order of k. segment_ids (int32 or int64) has a
/// prefix of data's shape; the result is (num_segments,) + the rest of data's shape, 0 for a
/// segment nothing names. Every id must be in [0, num_segments): TensorFlow drops negative ids,
/// fluxion refuses them, naming the position. Differentiable in data (its gradient is a gather).
template <class A, class I>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I>)
auto unsorted_segment_sum(A&& data, const I& segment_ids, index_t num_segments) {
  using E = detail::expr_t<A>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  using IT = value_type_t<I>;
  static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                "fluxion::unsorted_segment_sum: segment_ids must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, D>, "fluxion::unsorted_segment_sum: data and segment_ids live on different devices.");
  detail::check_not_none(data, "unsorted_segment_sum");
  auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(data)));
  auto [ids, out] = detail::segment_layout("unsorted_segment_sum", x.shape(),
                                           detail::materialize_asserted<IT, D>(segment_ids), num_segments);
  return segment_sum_expr<T, IT, D>(std::move(x), std::move(ids), out);
}

/// TensorFlow's tf.math.unsorted_segment_mean: unsorted_segment_sum divided by each segment's
/// count of positions (a segment nothing names is 0).
template <class A, class I>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I>)
auto unsorted_segment_mean(A&& data, const I& segment_ids, index_t num_segments) {
  auto sum = unsorted_segment_sum(std::forward<A>(data), segment_ids, num_segments);
  using T = value_type_t<decltype(sum)>;
  using D = device_t<decltype(sum)>;
  const auto ids = detail::materialize(segment_ids);
  tensor<T, D> count;
  {
    detail::materialize_depth constant_to_autodiff;
    fluxion::shape unit{num_segments};
    for (int d = 1; d < sum.shape().rank(); ++d) unit.push_back(1);
    const tensor<T, D> ones = broadcast_to(scalar_expr<T, D>(T(1)), fluxion::shape{ids.size()});
    const tensor<T, D> counted = segment_sum_expr<T, value_type_t<decltype(ids)>, D>(
        ones, tensor<value_type_t<decltype(ids)>, D>(ids, fluxion::shape{ids.size()}, detail::same_buffer), fluxion::shape{num_segments});
    count = tensor<T, D>(reshape(maximum(counted, T(1)), std::vector<index_t>(unit.begin(), unit.end())));
  }
  return std::move(sum) / count;
}

/// Repeats each element of `a` along `axis` `repeats` times: tf.repeat with a scalar. Its gradient
/// sums the copies.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto repeat(A&& a, index_t repeats, int axis) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const fluxion::shape s = e.shape();
  const int ax = normalize_axis(axis, s.rank(), "repeat");
  if (repeats < 0) throw invalid_argument("repeat: repeats = " + std::to_string(repeats) + " is negative");
  fluxion::shape copies;
  std::vector<index_t> merged;
  for (int d = 0; d < s.rank(); ++d) {
    copies.push_back(s[d]);
    if (d == ax) copies.push_back(repeats);
    merged.push_back(d == ax ? s[d] * repeats : s[d]);
  }
  return reshape(broadcast_to(expand_dims(std::move(e), ax + 1), copies), merged);
}

/// Repeats element j of `a` along `axis` repeats[j] times (one count for every element of the
/// axis, or one for all): tf.repeat with a list. A gather, so its gradient sums the copies.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto repeat(A&& a, const std::vector<index_t>& repeats, int axis) {
  using E = detail::expr_t<A>;
  using D = device_t<E>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const int ax = normalize_axis(axis, e.shape().rank(), "repeat");
  const index_t n = e.shape()[ax];
  if (repeats.size() != 1 && static_cast<index_t>(repeats.size()) != n)
    throw invalid_argument("repeat: " + std::to_string(repeats.size()) + " repeats given for axis " + std::to_string(ax) +
                           " of shape " + to_string(e.shape()) + ", which needs 1 or " + std::to_string(n));
  std::vector<std::int64_t> picks;
  for (index_t j = 0; j < n; ++j) {
    const index_t r = repeats[repeats.size() == 1 ? 0 : static_cast<std::size_t>(j)];
    if (r < 0)
      throw invalid_argument("repeat: repeats[" + std::to_string(repeats.size() == 1 ? 0 : j) + "] = " + std::to_string(r) +
                             " is negative");
    picks.insert(picks.end(), static_cast<std::size_t>(r), static_cast<std::int64_t>(j));
  }
  const auto count = static_cast<index_t>(picks.size());
  tensor<std::int64_t, D> indices(fluxion::shape{count});
  if (count > 0) detail::device_memory<D>::to_device(indices.mutable_data(), picks.data(), count);
  return gather(std::move(e), indices, ax);
}

/// Values of one axis's coordinate: the building block of one_hot.
template <class T, class Device>
struct iota_expr : expression_base {
  using value_type = T;
  using device_type = Device;
  fluxion::shape m_shape;
  int axis;
  const fluxion::shape& shape() const { return m_shape; }
  detail::iota_view<T> make_view() const {
    detail::iota_view<T> v;
    v.rank = m_shape.rank();
    for (int d = 0; d < v.rank; ++d) v.strides[d] = d == axis ? 1 : 0;
    return v;
  }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

namespace detail {
/// The row (axis rank - 2) and column (axis rank - 1) coordinates over shape s, lazily
/// (linalg::band_part, on_diagonal).
template <class Device>
auto rows_and_columns(const fluxion::shape& s) {
  const int r = s.rank();
  return std::pair{iota_expr<std::int64_t, Device>{{}, s, r - 2}, iota_expr<std::int64_t, Device>{{}, s, r - 1}};
}
/// d (..., min(M, N)) on the diagonal of matrices of shape s (..., M, N) and `other` elsewhere, lazily:
/// d[..., k] meets row k (M <= N: one value a row) or column k (M > N). linalg::diag and set_diag,
/// and the gradient of linalg::diag_part's remap (autodiff/backprop.hpp).
template <class Device, class Diagonal, class Other>
auto on_diagonal(Diagonal&& d, const fluxion::shape& s, Other&& other) {
  const int r = s.rank();
  auto [i, j] = rows_and_columns<Device>(s);
  return where(i == j, expand_dims(std::forward<Diagonal>(d), s[r - 2] <= s[r - 1] ? -1 : -2),
               std::forward<Other>(other));
}
}  // namespace detail

/// one_hot(indices, depth): `on` where the new axis's coordinate equals the index, `off`
/// elsewhere (so an index outside [0, depth) gives a row of `off`, as in TensorFlow).
template <class T = float, class I>
  requires is_expression_v<I>
auto one_hot(const I& indices, index_t depth, T on = T(1), T off = T(0), int axis = -1) {
  static_assert(std::is_integral_v<value_type_t<I>>, "fluxion::one_hot: indices must be integers.");
  if (depth < 0) throw invalid_argument("one_hot: depth = " + std::to_string(depth) + " is negative");
  using IT = value_type_t<I>;
  using D = device_t<I>;
  const int r = indices.shape().rank();
  const int ax = normalize_axis(axis, r + 1, "one_hot");
  fluxion::shape out;
  for (int d = 0; d < ax; ++d) out.push_back(indices.shape()[d]);
  out.push_back(depth);
  for (int d = ax; d < r; ++d) out.push_back(indices.shape()[d]);
  return where(expand_dims(indices, ax) == iota_expr<IT, D>{{}, out, ax}, on, off);
}

template <class T, class Device>
struct concat_expr : detail::boundary_expr<concat_expr<T, Device>, T, Device> {
  std::vector<tensor<T, Device>> parts;
  int axis;
  bool stacked;  // stack: each part gets a new axis of extent 1 at `axis`
  fluxion::shape m_shape;

  const fluxion::shape& shape() const { return m_shape; }
  tensor<T, Device> compute() const {
    tensor<T, Device> out(m_shape);
    const auto st = contiguous_strides(m_shape);
    index_t offset = 0;
    for (const auto& p : parts) {
      if (stacked) {
        index_t strides[max_rank];
        int n = 0;
        for (int d = 0; d < m_shape.rank(); ++d)
          if (d != axis) strides[n++] = st[static_cast<std::size_t>(d)];
        detail::assign_into(out, offset, strides, p);
        offset += st[static_cast<std::size_t>(axis)];
      } else {
        detail::assign_into(out, offset, st.data(), p);
        offset += p.shape()[axis] * st[static_cast<std::size_t>(axis)];
      }
    }
    return out;
  }
};

/// Joins tensors along an existing axis; all other extents must agree.
template <class T, class Device>
concat_expr<T, Device> concat(std::vector<tensor<T, Device>> parts, int axis) {
  if (parts.empty()) throw invalid_argument("concat: no tensors to concatenate");
  const auto& s0 = parts[0].shape();
  const int ax = normalize_axis(axis, s0.rank(), "concat");
  fluxion::shape out = s0;
  out[ax] = 0;
  for (const auto& p : parts) {
    const auto& s = p.shape();
    bool ok = s.rank() == s0.rank();
    for (int d = 0; ok && d < s.rank(); ++d) ok = d == ax || s[d] == s0[d];
    if (!ok)
      throw shape_error("concat: shapes " + to_string(s0) + " and " + to_string(s) +
                        " differ outside axis " + std::to_string(ax));
    out[ax] += s[ax];
  }
  concat_expr<T, Device> e;
  e.parts = std::move(parts);
  e.axis = ax;
  e.stacked = false;
  e.m_shape = out;
  return e;
}

/// Stacks equally shaped tensors along a new axis.
template <class T, class Device>
concat_expr<T, Device> stack(std::vector<tensor<T, Device>> parts, int axis = 0) {
  if (parts.empty()) throw invalid_argument("stack: no tensors to stack");
  const auto& s0 = parts[0].shape();
  const int ax = normalize_axis(axis, s0.rank() + 1, "stack");
  for (const auto& p : parts)
    if (p.shape() != s0) throw shape_error("stack: shapes " + to_string(s0) + " and " + to_string(p.shape()) + " differ");
  fluxion::shape out;
  for (int d = 0; d < ax; ++d) out.push_back(s0[d]);
  out.push_back(static_cast<index_t>(parts.size()));
  for (int d = ax; d < s0.rank(); ++d) out.push_back(s0[d]);
  concat_expr<T, Device> e;
  e.parts = std::move(parts);
  e.axis = ax;
  e.stacked = true;
  e.m_shape = out;
  return e;
}

template <class T, class Device>
concat_expr<T, Device> concat(std::initializer_list<tensor<T, Device>> parts, int axis) {
  return concat(std::vector<tensor<T, Device>>(parts), axis);
}
template <class T, class Device>
concat_expr<T, Device> stack(std::initializer_list<tensor<T, Device>> parts, int axis = 0) {
  return stack(std::vector<tensor<T, Device>>(parts), axis);
}

/// Splits along `axis` into pieces of the given sizes (one may be -1: the rest).
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto split(A&& a, std::vector<index_t> sizes, int axis = 0) {
  auto t = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const int ax = normalize_axis(axis, t.rank(), "split");
  const index_t n = t.shape()[ax];
  index_t known = 0;
  int infer = -1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1 && infer < 0) infer = static_cast<int>(i);
    else if (sizes[i] == -1) throw invalid_argument("split: sizes " + std::to_string(infer) + " and " + std::to_string(i) + " are both -1; at most one size may be inferred");
    else if (sizes[i] < 0) throw invalid_argument("split: size " + std::to_string(sizes[i]) + " is negative");
    else known += sizes[i];
  }
  if (infer >= 0 && known <= n) sizes[static_cast<std::size_t>(infer)] = n - known, known = n;
  if (known != n)
    throw shape_error("split: sizes add up to " + std::to_string(known) + " but axis " + std::to_string(ax) +
                      " of shape " + to_string(t.shape()) + " has extent " + std::to_string(n));
  std::vector<decltype(t)> out;
  std::vector<index_t> b(static_cast<std::size_t>(t.rank()), 0), e(static_cast<std::size_t>(t.rank()), fluxion::end);
  index_t start = 0;
  for (index_t sz : sizes) {
    b[static_cast<std::size_t>(ax)] = start;
    e[static_cast<std::size_t>(ax)] = start + sz;
    out.emplace_back(strided_slice(t, b, e));
    start += sz;
  }
  return out;
}

/// Splits along `axis` into `num` equal pieces.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto split(A&& a, int num, int axis = 0) {
  auto t = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const int ax = normalize_axis(axis, t.rank(), "split");
  const index_t n = t.shape()[ax];
  if (num <= 0 || n % num != 0)
    throw invalid_argument("split: axis " + std::to_string(ax) + " of shape " + to_string(t.shape()) +
                           " cannot be split into " + std::to_string(num) + " equal pieces");
  return split(t, std::vector<index_t>(static_cast<std::size_t>(num), n / num), ax);
}

/// Pads `a` with a constant. Along axis d, the elements of `a` land steps[d] apart (steps empty: all
/// 1), from position paddings[d].first; a negative step stores them in reverse order. Steps other
/// than 1 serve as the gradient of a strided slice, which so stays differentiable to any order.
template <class A>
struct pad_expr : detail::boundary_expr<pad_expr<A>, value_type_t<A>, device_t<A>> {
  A a;
  std::vector<std::pair<index_t, index_t>> paddings;
  value_type_t<A> value;
  fluxion::shape m_shape;
  std::vector<index_t> steps;

  pad_expr(A a_, std::vector<std::pair<index_t, index_t>> p, value_type_t<A> v, fluxion::shape s,
           std::vector<index_t> steps_ = {})
      : a(std::move(a_)), paddings(std::move(p)), value(v), m_shape(s), steps(std::move(steps_)) {}
  const fluxion::shape& shape() const { return m_shape; }
  index_t step(int d) const { return steps.empty() ? 1 : steps[static_cast<std::size_t>(d)]; }
  /// Where element 0 of `a` lands along axis d.
  index_t first(int d) const {
    const index_t st = step(d), n = a.shape()[d];
    return paddings[static_cast<std::size_t>(d)].first + (st < 0 && n > 0 ? (n - 1) * -st : 0);
  }
  tensor<value_type_t<A>, device_t<A>> compute() const {
    tensor<value_type_t<A>, device_t<A>> out(m_shape);
    const auto st = contiguous_strides(m_shape);
    detail::assign_into(out, 0, st.data(), broadcast_to(scalar_expr<value_type_t<A>, device_t<A>>(value), m_shape));
    index_t offset = 0, strides[max_rank];
    for (int d = 0; d < m_shape.rank(); ++d) {
      offset += first(d) * st[static_cast<std::size_t>(d)];
      strides[d] = step(d) * st[static_cast<std::size_t>(d)];
    }
    detail::assign_into(out, offset, strides, a);
    return out;
  }
};

/// Pads with a constant: paddings[d] = {before, after} for each axis.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto pad(A&& a, std::vector<std::pair<index_t, index_t>> paddings, value_type_t<detail::expr_t<A>> value = {}) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const auto& s = e.shape();
  if (static_cast<int>(paddings.size()) != s.rank())
    throw invalid_argument("pad: " + std::to_string(paddings.size()) + " paddings given for shape " + to_string(s));
  fluxion::shape out;
  for (int d = 0; d < s.rank(); ++d) {
    const auto [lo, hi] = paddings[static_cast<std::size_t>(d)];
    if (lo < 0 || hi < 0)
      throw invalid_argument("pad: paddings (" + std::to_string(lo) + ", " + std::to_string(hi) + ") on axis " +
                             std::to_string(d) + " are negative");
    out.push_back(s[d] + lo + hi);
  }
  return pad_expr<E>(std::move(e), std::move(paddings), value, out);
}

}  // namespace fluxion

#endif  // FLUXION_EXPR_INDEXING_HPP
