// Sorting along an axis: argsort, sort, top_k (TensorFlow's tf.argsort, tf.sort, tf.math.top_k),
// and take_along_axis, which reads one element of each lane at given positions.
//
//   fx::tensor<std::int32_t> order = fx::argsort(x);                 // along the last axis, ascending
//   fx::tensor<float> s = fx::sort(x, 0, fx::descending);
//   auto [values, indices] = fx::top_k(logits, 5);                  // the 5 largest of each row
//   fx::tensor<float> picked = fx::take_along_axis(x, order, -1);
//
// The order is total and stable: equal values keep their order (the lower index first, in either
// direction), and NaN ranks above every number (last ascending, first descending). Indices are
// int32, as in TensorFlow. sort and top_k's values are take_along_axis of the operand, a gather,
// so their gradient goes to the positions they were read from; argsort and the indices have none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../backend/cpu/detail/simd_ops.hpp"
#include "../core/config.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"
#include "indexing.hpp"
#include "remap.hpp"
#include "scan.hpp"

namespace fluxion {

enum class sort_direction { ascending, descending };
inline constexpr sort_direction ascending = sort_direction::ascending;
inline constexpr sort_direction descending = sort_direction::descending;

namespace detail {

/// Whether value a goes before value b: the order of the top of this file, without the ties.
template <class T>
struct sort_order {
  bool descending;
  FLUXION_HOST_DEVICE bool operator()(T a, T b) const {
    const bool a_nan = a != a, b_nan = b != b;  // integers are never NaN
    if (a_nan || b_nan) return descending ? a_nan && !b_nan : b_nan && !a_nan;
    return descending ? b < a : a < b;
  }
};

/// The positions of the first k values of each lane in sorted order: `outer` x `inner` lanes of
/// length n (lane (o, i) reads x[(o * n + j) * inner + i]), written to out[(o * k + j) * inner + i].
/// The cpu's below; fx::cuda's in backend/cuda/sort.hpp.
template <class Device>
struct sort_kernel {
  static_assert(no_lane_kernel<Device>,
                "fluxion: this device has no sort kernels; include its header (for fluxion::cuda, <fluxion/cuda.hpp>)");
};

// A partial specialization (a template), not an explicit one: g++ would process an explicit
// specialization's members in every program that includes this header.
template <class Device>
  requires std::is_same_v<Device, cpu>
struct sort_kernel<Device> {
  template <class T>
  struct lanes {
    const T* x;
    std::int32_t* out;
    index_t n, inner, k, length;  // length: lane_kernel's size of a lane
    bool descending;
    /// The first k of the lane by nth_element and a sort of those, on (value, position) pairs kept
    /// together for locality, by a total order (ties by position), so that the result is the one
    /// stable order.
    template <class Before>
    void first_k(std::vector<std::pair<T, std::int32_t>>& items, Before before) const {
      auto by_value = [&](const std::pair<T, std::int32_t>& a, const std::pair<T, std::int32_t>& b) {
        return before(a.first, b.first) || (!before(b.first, a.first) && a.second < b.second);
      };
      if (k < n) std::nth_element(items.begin(), items.begin() + k, items.end(), by_value);
      std::sort(items.begin(), items.begin() + k, by_value);
    }
    /// Whether lanes of T that are contiguous (inner == 1) are read in xsimd vectors.
    static constexpr bool vectors = kernels::has_xsimd_arch && (std::is_same_v<T, float> || std::is_same_v<T, double>);
    /// Whether the lane has a NaN: in vectors where it is contiguous.
    bool has_nan(const T* first) const {
      bool nan = false;
      index_t j = 0;
      if constexpr (vectors) {
        using O = kernels::simd_ops<T>;
        if (inner == 1)
          for (; j + O::width <= n; j += O::width) nan |= O::any_nan(O::loadu(first + j));
      }
      for (; j < n; ++j) nan |= first[j * inner] != first[j * inner];
      return nan;
    }
    /// The first k of the lane (k at most an eighth of it) by insertion into the best k so far,
    /// read in place: the k-th best value so far is kept in a register, and a value that does not
    /// beat it is passed over. Positions only grow, so a tie never moves a value ahead: the same
    /// order as first_k's. Where the lane is contiguous, without NaN (`before` a plain comparison),
    /// and k is at most a vector's width, one pass in vectors first takes each vector lane's best,
    /// and the k-th best of those, `floor`: at least k values are as good, so nothing worse can be
    /// among the first k, and the insertion is offered only what reaches it (a vector at a time,
    /// most holding none): for k = 10 of 1000 uniform values, about 15 values instead of about 60
    /// insertions and 40 vectors read one value at a time.
    template <class Before>
    void best_k(const T* first, std::vector<std::pair<T, std::int32_t>>& best, Before before) const {
      best.resize(static_cast<std::size_t>(k));
      index_t filled = 0;
      T kth{};
      auto offer = [&](index_t j, T v) {
        if (filled == k && !before(v, kth)) return;
        index_t at = filled < k ? filled++ : k - 1;
        for (; at > 0 && before(v, best[static_cast<std::size_t>(at - 1)].first); --at)
          best[static_cast<std::size_t>(at)] = best[static_cast<std::size_t>(at - 1)];
        best[static_cast<std::size_t>(at)] = {v, static_cast<std::int32_t>(j)};
        kth = best[static_cast<std::size_t>(filled - 1)].first;
      };
      if constexpr (vectors && !std::is_same_v<Before, sort_order<T>>) {
        using O = kernels::simd_ops<T>;
        constexpr index_t w = O::width;
        if (inner == 1 && n >= w && k <= w) {
          auto edge = O::loadu(first);
          index_t j = w;
          for (; j + w <= n; j += w) edge = descending ? xsimd::max(edge, O::loadu(first + j)) : xsimd::min(edge, O::loadu(first + j));
          T lanes[w];
          O::storeu(lanes, edge);
          // The k-th best of the w lanes' best: the least that fewer than k others beat. Counted
          // without a branch (w <= 16): a sort of them took longer than the rest of the lane.
          T floor = lanes[0];
          bool found = false;
          for (index_t a = 0; a < w; ++a) {
            index_t beaten = 0;
            for (index_t b = 0; b < w; ++b) beaten += before(lanes[b], lanes[a]);
            const bool in = beaten < k && (!found || before(floor, lanes[a]));
            floor = in ? lanes[a] : floor;
            found = found || in;
          }
          const auto floors = O::splat(floor);
          for (j = 0; j + w <= n; j += w) {
            const auto v = O::loadu(first + j);
            if (!xsimd::any(descending ? v >= floors : v <= floors)) continue;
            for (index_t e = j; e < j + w; ++e)
              if (!before(floor, first[e])) offer(e, first[e]);
          }
          for (; j < n; ++j)
            if (!before(floor, first[j])) offer(j, first[j]);
          return;
        }
      }
      for (index_t j = 0; j < n; ++j) offer(j, first[j * inner]);
    }
    void operator()(index_t lane) const {
      thread_local std::vector<std::pair<T, std::int32_t>> items;
      const index_t o = lane / inner, i = lane - o * inner;
      const T* first = x + o * n * inner + i;
      // Lanes without NaN compare values directly.
      auto take = [&](auto before) {
        if (k * 8 <= n) return best_k(first, items, before);
        items.resize(static_cast<std::size_t>(n));
        for (index_t j = 0; j < n; ++j) items[static_cast<std::size_t>(j)] = {first[j * inner], static_cast<std::int32_t>(j)};
        first_k(items, before);
      };
      if (has_nan(first)) take(sort_order<T>{descending});
      else if (descending) take([](T a, T b) { return b < a; });
      else take([](T a, T b) { return a < b; });
      std::int32_t* to = out + o * k * inner + i;
      for (index_t j = 0; j < k; ++j) to[j * inner] = items[static_cast<std::size_t>(j)].second;
    }
  };
  template <class T>
  static void run(const T* x, std::int32_t* out, index_t outer, index_t n, index_t inner, index_t k, bool descending) {
    lane_kernel<cpu>::run(outer * inner, lanes<T>{x, out, n, inner, k, n, descending});
  }
};

/// The positions (int32) of the first k elements of each lane along `axis` in sorted order.
template <class T, class D>
tensor<std::int32_t, D> sorted_positions(const tensor<T, D>& x, int axis, index_t k, bool descending, const char* op) {
  const auto& s = x.shape();
  const index_t n = s[axis];
  if (n > std::numeric_limits<std::int32_t>::max())
    throw invalid_argument(std::string(op) + ": axis " + std::to_string(axis) + " of shape " + to_string(s) +
                           " has more than 2^31 - 1 elements, past int32 indices");
  fluxion::shape out_shape = s;
  out_shape[axis] = k;
  tensor<std::int32_t, D> out(out_shape);
  index_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  if (out.size() > 0) sort_kernel<D>::run(x.data(), out.mutable_data(), outer, n, inner, k, descending);
  return out;
}

}  // namespace detail

/// The positions (int32) that sort `a` along `axis` (negative counts from the end): tf.argsort,
/// always stable.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto argsort(A&& a, int axis = -1, sort_direction direction = ascending) {
  detail::check_not_none(a, "argsort");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  if (x.rank() == 0) throw invalid_argument("argsort: the operand is a scalar; it needs an axis to sort along");
  const int ax = normalize_axis(axis, x.rank(), "argsort");
  return detail::sorted_positions(x, ax, x.shape()[ax], direction == descending, "argsort");
}

namespace detail {
/// take_along_axis; `trusted` skips reading the indices on the host to check them (sort and
/// top_k's positions, which the sort kernels made).
template <class A, class I>
auto take_along_axis(A&& a, const I& indices, int axis, bool trusted) {
  using IT = value_type_t<I>;
  static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                "fluxion::take_along_axis: indices must be int32 or int64.");
  using E = detail::expr_t<A>;
  using D = device_t<E>;
  static_assert(std::is_same_v<device_t<I>, D>, "fluxion::take_along_axis: a and its indices live on different devices.");
  detail::check_not_none(a, "take_along_axis");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const tensor<IT, D> idx = detail::materialize_asserted<IT, D>(indices);
  const auto& s = x.shape();
  if (s.rank() == 0) throw invalid_argument("take_along_axis: the operand is a scalar; it needs an axis");
  const int ax = normalize_axis(axis, s.rank(), "take_along_axis");
  bool fits = idx.shape().rank() == s.rank();
  for (int d = 0; fits && d < s.rank(); ++d) fits = d == ax || idx.shape()[d] == s[d];
  if (!fits)
    throw shape_error("take_along_axis: indices of shape " + to_string(idx.shape()) + " do not fit a of shape " +
                      to_string(s) + " along axis " + std::to_string(ax) + ": every other extent must match");
  const index_t n = s[ax], k = idx.shape()[ax];
  if (!trusted)
    detail::check_index_range(idx, n, [is = idx.shape(), n, ax, s](index_t p, IT v) {
      return "take_along_axis: indices" + detail::position_text(p, is) + " = " + std::to_string(v) + " is not in [0, " +
             std::to_string(n) + ") (axis " + std::to_string(ax) + " of shape " + to_string(s) + ")";
    });
  index_t outer = 1, inner = 1;
  for (int d = 0; d < ax; ++d) outer *= s[d];
  for (int d = ax + 1; d < s.rank(); ++d) inner *= s[d];
  // The flat position of each element read: (o * n + indices) * inner + i, over (outer, k, inner).
  const fluxion::shape lanes{outer, k, inner};
  const tensor<std::int64_t, D> lane_indices(cast<std::int64_t>(reshape(idx, {outer, k, inner})));
  const tensor<std::int64_t, D> flat((iota_expr<std::int64_t, D>{{}, lanes, 0} * n + lane_indices) * inner +
                                     iota_expr<std::int64_t, D>{{}, lanes, 2});
  std::vector<index_t> dims(idx.shape().begin(), idx.shape().end());
  using T = value_type_t<E>;
  const tensor<T, D> elements(reshape(x, {-1}));  // a recorded reshape: the gradient flows back through it
  return reshape(gather_expr<T, std::int64_t, D>(elements, flat, 0, detail::checked_indices), dims);
}
}  // namespace detail

/// Reads, along `axis`, the elements of `a` at `indices` (int32 or int64): out[..., j, ...] =
/// a[..., indices[..., j, ...], ...], NumPy's take_along_axis. indices has a's shape but for the
/// extent of `axis`; each index must be in [0, a.shape[axis]). Differentiable in `a` (a gather).
template <class A, class I>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I>)
auto take_along_axis(A&& a, const I& indices, int axis) {
  return detail::take_along_axis(std::forward<A>(a), indices, axis, /*trusted=*/false);
}

/// `a` sorted along `axis` (negative counts from the end): tf.sort. Its gradient goes back to
/// the positions each value came from.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto sort(A&& a, int axis = -1, sort_direction direction = ascending) {
  detail::check_not_none(a, "sort");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  if (x.rank() == 0) throw invalid_argument("sort: the operand is a scalar; it needs an axis to sort along");
  const int ax = normalize_axis(axis, x.rank(), "sort");
  return detail::take_along_axis(x, detail::sorted_positions(x, ax, x.shape()[ax], direction == descending, "sort"), ax,
                                 /*trusted=*/true);
}

/// top_k's result: the k largest values of each row and their positions (int32), both of shape
/// (..., k), largest first; `auto [values, indices] = fx::top_k(x, k);`.
template <class T, class D>
struct top_k_result {
  tensor<T, D> values;
  tensor<std::int32_t, D> indices;
};

/// The k largest elements along the last axis and their positions, largest first, ties to the
/// lower position (tf.math.top_k, sorted). `values` is differentiable: its gradient goes to the
/// positions in `indices`.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto top_k(A&& a, index_t k = 1) {
  detail::check_not_none(a, "top_k");
  const auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  using X = std::remove_cvref_t<decltype(x)>;
  using T = value_type_t<X>;
  using D = device_t<X>;
  if (x.rank() == 0) throw invalid_argument("top_k: the operand is a scalar; it needs a last axis to choose from");
  const int ax = x.rank() - 1;
  const index_t n = x.shape()[ax];
  if (k < 0 || k > n)
    throw invalid_argument("top_k: k = " + std::to_string(k) + " is not in [0, " + std::to_string(n) +
                           "], the extent of the last axis of shape " + to_string(x.shape()));
  tensor<std::int32_t, D> indices = detail::sorted_positions(x, ax, k, /*descending=*/true, "top_k");
  tensor<T, D> values = detail::take_along_axis(x, indices, ax, /*trusted=*/true);
  return top_k_result<T, D>{std::move(values), std::move(indices)};
}

}  // namespace fluxion
