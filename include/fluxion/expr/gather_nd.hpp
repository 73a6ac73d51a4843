// TensorFlow's gather_nd, scatter_nd, tensor_scatter_nd_add and tensor_scatter_nd_update: indexing
// by tuples of indices.
//
//   fx::tensor<std::int32_t> at = {{0, 2}, {1, 0}, {0, 2}};
//   auto picked = fx::gather_nd(x, at);                   // x (2, 3, 4): (3, 4), rows x[0, 2], x[1, 0], x[0, 2]
//   auto own = fx::gather_nd(x, per_row, 1);              // batch_dims 1: per_row (2, n, 1) picks x[b, per_row[b, i, 0]]
//   auto grid = fx::scatter_nd(at, rows, {2, 3, 4});      // zeros, plus rows[i] at at[i] (repeats add up)
//   auto y = fx::tensor_scatter_nd_add(x, at, rows);      // x plus the same
//   auto z = fx::tensor_scatter_nd_update(x, at, rows);   // x with rows[i] in place of x[at[i]] (the last repeat wins)
//
// The last axis of `indices` holds K indices into the first K axes of the other operand, so a
// result has shape indices.shape[:-1] + shape[K:]. Each index is checked against its axis (on
// fx::cuda on the device, and reported by the thread's next read: expr/indexing.hpp). All four
// run on gather and its adjoint (unsorted_segment_sum's node), so they are differentiable to any
// order, in params or updates (and tensor), and run on every device gather does.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../tensor.hpp"

namespace fluxion {

namespace detail {
/// The flat row of each tuple of `indices` (..., K) into the first K axes of `s`: sum_d
/// indices[..., d] * stride_d, of shape indices.shape[:-1]; each index checked against its axis.
/// With `batch_dims` b, indices' first b axes are s's first b (gather_nd's batch_dims): the tuples
/// index axes b to b + K - 1, and each row is numbered among the first b + K axes, the batch
/// position's own indices first. `operand` names what `s` is the shape of, for the messages.
template <class IT, class D>
tensor<std::int64_t, D> nd_rows(const char* op, const tensor<IT, D>& idx, const shape& s, const char* operand,
                                int batch_dims = 0) {
  const int r = idx.rank();
  if (r == 0)
    throw shape_error(std::string(op) + ": indices is a scalar; its last axis holds the indices of one element or slice");
  const index_t k = idx.shape()[r - 1];
  if (k < 1)
    throw shape_error(std::string(op) + ": indices of shape " + to_string(idx.shape()) +
                      " have an empty last axis; it holds the indices of one element or slice");
  if (batch_dims + k > s.rank())
    throw shape_error(std::string(op) + ": indices of shape " + to_string(idx.shape()) + " index " + std::to_string(k) +
                      " axes (their last extent)" +
                      (batch_dims > 0 ? " after " + std::to_string(batch_dims) + " batch axes" : std::string()) + ", but " +
                      operand + " of shape " + to_string(s) + " has " + std::to_string(s.rank()));
  const std::vector<index_t> outer(idx.shape().begin(), idx.shape().end() - 1);
  tensor<std::int64_t, D> rows;
  index_t stride = 1;
  for (index_t d = batch_dims + k; d-- > 0;) {
    const index_t n = s[static_cast<int>(d)];
    tensor<std::int64_t, D> component;
    if (d < batch_dims) {  // the batch position's own index along axis d
      component = materialize_unrecorded(iota_expr<std::int64_t, D>{{}, shape(outer), static_cast<int>(d)});
    } else {
      const index_t c = d - batch_dims;
      std::vector<index_t> begin(static_cast<std::size_t>(r), 0), size(static_cast<std::size_t>(r), -1);
      begin.back() = c;
      size.back() = 1;
      const tensor<IT, D> given(reshape(slice(idx, begin, size), outer));
      check_index_range(given, n, [op, operand, is = idx.shape(), s, c, d, k, n](index_t at, IT v) {
        return std::string(op) + ": indices" + position_text(at * k + c, is) + " = " + std::to_string(v) + " is not in [0, " +
               std::to_string(n) + ") (axis " + std::to_string(d) + " of " + operand + " of shape " + to_string(s) + ")";
      });
      component = tensor<std::int64_t, D>(cast<std::int64_t>(given));
    }
    const auto term = component * static_cast<std::int64_t>(stride);
    rows = d == batch_dims + k - 1 ? tensor<std::int64_t, D>(term) : tensor<std::int64_t, D>(rows + term);
    stride *= n;
  }
  return rows;
}

/// The product of the first k extents of s (the rows nd_rows numbers) and the rest of s's extents.
template <class Shape>
std::pair<index_t, std::vector<index_t>> nd_split(const Shape& s, index_t k) {
  index_t lead = 1;
  for (int d = 0; d < k; ++d) lead *= s[d];
  return {lead, std::vector<index_t>(s.begin() + k, s.end())};
}
}  // namespace detail

/// tf.gather_nd: out[i...] = params[indices[i..., 0], ..., indices[i..., K-1], ...], of shape
/// indices.shape[:-1] + params.shape[K:]. indices are int32 or int64, each in [0, params.shape[d]).
/// With `batch_dims` b (TensorFlow's), the first b axes of indices and params are batch axes of
/// equal extents, and each batch position gathers from its own slice of params: out[β, i...] =
/// params[β, indices[β, i..., 0], ...], of shape indices.shape[:-1] + params.shape[b + K:].
/// Differentiable in params (a gather of its first b + K axes as one).
template <class P, class I>
  requires((is_expression_v<P> || is_variable_v<std::remove_cvref_t<P>>) && is_expression_v<I>)
auto gather_nd(P&& params, const I& indices, int batch_dims = 0) {
  using E = detail::expr_t<P>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  using IT = value_type_t<I>;
  static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                "fluxion::gather_nd: indices must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, D>, "fluxion::gather_nd: params and indices live on different devices.");
  detail::check_not_none(params, "gather_nd");
  const auto x = detail::materialize(detail::as_expr<P>(std::forward<P>(params)));
  const tensor<IT, D> idx = detail::materialize_asserted<IT, D>(indices);
  if (batch_dims < 0 || batch_dims >= std::max(idx.rank(), 1))
    throw invalid_argument("gather_nd: batch_dims = " + std::to_string(batch_dims) + " is not in [0, " +
                           std::to_string(std::max(idx.rank(), 1)) + "): indices of shape " + to_string(idx.shape()) +
                           " have that many axes before the last, which holds the tuples");
  for (int d = 0; d < batch_dims; ++d)
    if (d >= x.rank() || idx.shape()[d] != x.shape()[d])
      throw shape_error("gather_nd: with batch_dims = " + std::to_string(batch_dims) + ", indices of shape " +
                        to_string(idx.shape()) + " and params of shape " + to_string(x.shape()) +
                        " must have the same first " + std::to_string(batch_dims) + " extents");
  const tensor<std::int64_t, D> rows = detail::nd_rows("gather_nd", idx, x.shape(), "params", batch_dims);
  auto [lead, rest] = detail::nd_split(x.shape(), batch_dims + idx.shape()[idx.rank() - 1]);
  rest.insert(rest.begin(), lead);
  const tensor<T, D> table(reshape(x, rest));  // recorded: the gradient flows back through it
  return gather(table, rows, 0, detail::checked_indices);
}

/// tf.scatter_nd: a tensor of shape `shape`, zeros but for updates[i...] added at
/// [indices[i..., 0], ..., indices[i..., K-1], ...] (tuples that repeat add up, in order of i).
/// updates has shape indices.shape[:-1] + shape[K:]. Differentiable in updates (its gradient is a
/// gather_nd).
template <class U, class I>
  requires((is_expression_v<U> || is_variable_v<std::remove_cvref_t<U>>) && is_expression_v<I>)
auto scatter_nd(const I& indices, U&& updates, const shape& s) {
  using E = detail::expr_t<U>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  using IT = value_type_t<I>;
  static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                "fluxion::scatter_nd: indices must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, D>, "fluxion::scatter_nd: indices and updates live on different devices.");
  detail::check_not_none(updates, "scatter_nd");
  auto u = detail::materialize(detail::as_expr<U>(std::forward<U>(updates)));
  const tensor<IT, D> idx = detail::materialize_asserted<IT, D>(indices);
  const tensor<std::int64_t, D> rows = detail::nd_rows("scatter_nd", idx, s, "the output");
  auto [lead, rest] = detail::nd_split(s, idx.shape()[idx.rank() - 1]);
  shape want = rows.shape();
  for (index_t e : rest) want.push_back(e);
  if (!(u.shape() == want))
    throw shape_error("scatter_nd: updates of shape " + to_string(u.shape()) + " do not fit indices of shape " +
                      to_string(idx.shape()) + " into shape " + to_string(s) + ": they need shape " + to_string(want));
  shape sums{lead};
  for (index_t e : rest) sums.push_back(e);
  std::vector<index_t> dims(s.begin(), s.end());
  return reshape(segment_sum_expr<T, std::int64_t, D>(
                     std::move(u), tensor<std::int64_t, D>(rows, shape{rows.size()}, detail::same_buffer), sums),
                 dims);
}

/// tf.tensor_scatter_nd_add: `tensor` plus scatter_nd(indices, updates, tensor.shape).
/// Differentiable in both.
template <class A, class I, class U>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I> &&
           (is_expression_v<U> || is_variable_v<std::remove_cvref_t<U>>))
auto tensor_scatter_nd_add(A&& a, const I& indices, U&& updates) {
  static_assert(std::is_same_v<value_type_t<detail::expr_t<A>>, value_type_t<detail::expr_t<U>>>,
                "fluxion::tensor_scatter_nd_add: tensor and updates need the same element type.");
  detail::check_not_none(a, "tensor_scatter_nd_add");
  auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
  const shape s = x.shape();
  return std::move(x) + scatter_nd(indices, std::forward<U>(updates), s);
}

/// tf.tensor_scatter_nd_update: `tensor` with the slice at [indices[i..., 0], ..., indices[i..., K-1]]
/// replaced by updates[i...], for every i; updates has shape indices.shape[:-1] + tensor.shape[K:].
/// Where tuples repeat, the last one in order of i wins, on every device (TensorFlow and PyTorch
/// leave the winner undefined). Differentiable in both: the replaced slices of `tensor` get no
/// gradient, and neither do the updates a later repeat overwrote (TensorFlow's gradient gives each
/// repeat the gradient of the slice). Values at the replaced slices, NaN included, are dropped.
template <class A, class I, class U>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) && is_expression_v<I> &&
           (is_expression_v<U> || is_variable_v<std::remove_cvref_t<U>>))
auto tensor_scatter_nd_update(A&& a, const I& indices, U&& updates) {
  using E = detail::expr_t<A>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  using IT = value_type_t<I>;
  static_assert(std::is_same_v<T, value_type_t<detail::expr_t<U>>>,
                "fluxion::tensor_scatter_nd_update: tensor and updates need the same element type.");
  static_assert(std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>,
                "fluxion::tensor_scatter_nd_update: indices must be int32 or int64.");
  static_assert(std::is_same_v<device_t<I>, D> && std::is_same_v<device_t<detail::expr_t<U>>, D>,
                "fluxion::tensor_scatter_nd_update: tensor, indices and updates live on different devices.");
  if constexpr (!(std::is_same_v<T, value_type_t<detail::expr_t<U>>> &&
                  (std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>) &&
                  std::is_same_v<device_t<I>, D> && std::is_same_v<device_t<detail::expr_t<U>>, D>)) {
    return detail::materialize(detail::as_expr<A>(std::forward<A>(a)));  // the static_assert's error alone
  } else {
    const char* op = "tensor_scatter_nd_update";
    detail::check_not_none(a, op);
    detail::check_not_none(updates, op);
    auto x = detail::materialize(detail::as_expr<A>(std::forward<A>(a)));
    auto u = detail::materialize(detail::as_expr<U>(std::forward<U>(updates)));
    const shape s = x.shape();
    const tensor<IT, D> idx = detail::materialize(indices);
    const tensor<std::int64_t, D> rows = detail::nd_rows(op, idx, s, "tensor");
    const index_t k = idx.shape()[idx.rank() - 1];
    auto [lead, rest] = detail::nd_split(s, k);
    shape want = rows.shape();
    for (index_t e : rest) want.push_back(e);
    if (!(u.shape() == want))
      throw shape_error(std::string(op) + ": updates of shape " + to_string(u.shape()) +
                        " do not fit indices of shape " + to_string(idx.shape()) + " into tensor of shape " +
                        to_string(s) + ": they need shape " + to_string(want));
    const index_t n = rows.size();
    const tensor<std::int64_t, D> flat(rows, shape{n}, detail::same_buffer);
    // The winner of each row is its last update: the largest ordinal among those naming it.
    tensor<bool, D> kept;
    tensor<bool, D> replaced;
    {
      detail::materialize_depth constants;  // index arithmetic, not recorded
      const iota_expr<std::int64_t, D> ordinal{{}, shape{n}, 0};
      const tensor<std::int64_t, D> last = unsorted_segment_max(ordinal, flat, lead);
      kept = tensor<bool, D>(gather(last, flat, 0, detail::checked_indices) == ordinal);
      const tensor<std::int32_t, D> kept_count(cast<std::int32_t>(kept));
      replaced = tensor<bool, D>(segment_sum_expr<std::int32_t, std::int64_t, D>(kept_count, flat, shape{lead}) > 0);
    }
    // kept and replaced broadcast over the slices: (n, 1, ...) and (lead, 1, ...).
    std::vector<index_t> kept_dims{n}, replaced_dims{lead}, rows_dims{n}, sums_dims{lead};
    for (index_t e : rest) {
      kept_dims.push_back(1);
      replaced_dims.push_back(1);
      rows_dims.push_back(e);
      sums_dims.push_back(e);
    }
    const tensor<T, D> winners = where(reshape(kept, kept_dims), reshape(u, rows_dims), T(0));
    const tensor<T, D> scattered =
        segment_sum_expr<T, std::int64_t, D>(winners, flat, shape(sums_dims.begin(), sums_dims.end()));
    const std::vector<index_t> dims(s.begin(), s.end());
    return reshape(where(reshape(replaced, replaced_dims), scattered, reshape(x, sums_dims)), dims);
  }
}

}  // namespace fluxion
