// The diagonal and band ops of TensorFlow's tf.linalg, over the last two axes of a batch of
// matrices (..., M, N):
//
//   auto lower = fx::linalg::band_part(x, -1, 0);      // x's lower triangle, zeros above: a causal mask
//   auto d = fx::linalg::diag_part(x);                 // (..., min(M, N)): x[..., i, i]
//   auto t = fx::linalg::trace(x);                     // (...): the sum of the diagonal
//   auto m = fx::linalg::diag(v);                      // (..., K, K) from v (..., K): v on the diagonal
//   auto y = fx::linalg::set_diag(x, d);               // x with its diagonal replaced by d
//   auto u = fx::linalg::l2_normalize(x);              // each row (the last axis) of length 1
//
// band_part, diag and set_diag are lazy elementwise statements (a where over the row and column
// coordinates), so they fuse with what reads and feeds them; diag_part is a view of the diagonal
// (of a tensor, a strided slice of the flattened matrices; of an expression, a remap whose one
// axis steps by N + 1, so that only the diagonal's elements are computed), and trace its sum. All
// are differentiable in either mode and to any order, and run on the GPU: band_part's and
// set_diag's gradients mask the incoming gradient, diag_part's puts it on a diagonal of zeros (a
// strided pad, or set_diag's where), diag's reads the diagonal back. Each throws a shape_error
// naming the op and the shape for an operand of rank below 2 (diag: below 1), and set_diag for a
// diagonal of the wrong shape.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "elementwise.hpp"
#include "indexing.hpp"
#include "reduce.hpp"
#include "remap.hpp"

namespace fluxion::linalg {

namespace detail {
/// `op`'s operand shape, checked to be a batch of matrices (rank 2 or more).
inline void check_matrices(const char* op, const shape& s) {
  if (s.rank() < 2)
    throw shape_error(std::string("linalg::") + op + ": expects a batch of matrices (..., M, N) of rank 2 or more, got shape " +
                      to_string(s));
}
}  // namespace detail

/// tf.linalg.band_part: x[..., i, j] where (num_lower < 0 or i - j <= num_lower) and (num_upper < 0
/// or j - i <= num_upper), zero elsewhere. band_part(x, 0, 0) is the diagonal, (-1, 0) the lower
/// triangle, (0, -1) the upper.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto band_part(A&& x, index_t num_lower, index_t num_upper) {
  using E = fluxion::detail::expr_t<A>;
  using T = value_type_t<E>;
  E e = fluxion::detail::as_expr<A>(std::forward<A>(x));
  const shape s = e.shape();
  detail::check_matrices("band_part", s);
  const int r = s.rank();
  // A negative bound keeps the whole side: M - 1 below and N - 1 above are every element's.
  const auto lower = static_cast<std::int64_t>(num_lower < 0 ? s[r - 2] : num_lower);
  const auto upper = static_cast<std::int64_t>(num_upper < 0 ? s[r - 1] : num_upper);
  auto [i, j] = fluxion::detail::rows_and_columns<device_t<E>>(s);
  return where((i - j <= lower) && (j - i <= upper), std::move(e), T(0));
}

/// tf.linalg.diag_part: (..., M, N) -> (..., min(M, N)), the elements x[..., k, k].
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto diag_part(A&& x) {
  using E = fluxion::detail::expr_t<A>;
  E e = fluxion::detail::as_expr<A>(std::forward<A>(x));
  const shape s = e.shape();
  detail::check_matrices("diag_part", s);
  const int r = s.rank();
  const index_t m = s[r - 2], n = s[r - 1], k = std::min(m, n);
  if constexpr (is_tensor_v<E> || requires(const E& t) { t.shared_tensor(); }) {
    // A tensor: a strided slice of its flattened matrices, whose gradient is a strided pad (a
    // fill and k writes a matrix; the where below took 4x as long for the gradient of a trace).
    std::vector<index_t> flat(s.begin(), s.end() - 2);
    flat.push_back(m * n);
    return fluxion::detail::take_every_last(reshape(std::move(e), flat), k, n + 1);
  } else {
    // An expression: a view of it that computes the diagonal's elements only, where a reshape
    // would compute all M x N first.
    shape out(s.begin(), s.end() - 2);
    out.push_back(k);
    return remap_expr<fluxion::detail::diagonal_map, E>(std::move(e), {}, out);
  }
}

/// tf.linalg.trace: (..., M, N) -> (...), the sum of the diagonal.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto trace(A&& x) {
  using E = fluxion::detail::expr_t<A>;
  E e = fluxion::detail::as_expr<A>(std::forward<A>(x));
  detail::check_matrices("trace", e.shape());
  return reduce_sum(diag_part(std::move(e)), -1);
}

/// tf.linalg.diag: (..., K) -> (..., K, K), v on the diagonal and zeros elsewhere.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto diag(A&& v) {
  using E = fluxion::detail::expr_t<A>;
  using T = value_type_t<E>;
  E e = fluxion::detail::as_expr<A>(std::forward<A>(v));
  const shape s = e.shape();
  if (s.rank() < 1)
    throw shape_error("linalg::diag: expects a batch of diagonals (..., K) of rank 1 or more, got shape " + to_string(s));
  shape out = s;
  out.push_back(s[s.rank() - 1]);
  return fluxion::detail::on_diagonal<device_t<E>>(std::move(e), out, T(0));
}

/// tf.linalg.set_diag: x (..., M, N) with x[..., k, k] replaced by d[..., k], where d is
/// (..., min(M, N)) with x's batch axes.
template <class A, class B>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) &&
           (is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>))
auto set_diag(A&& x, B&& d) {
  using E = fluxion::detail::expr_t<A>;
  using F = fluxion::detail::expr_t<B>;
  static_assert(std::is_same_v<value_type_t<E>, value_type_t<F>>,
                "fluxion::linalg::set_diag: the matrices and the diagonal must have the same element type.");
  static_assert(std::is_same_v<device_t<E>, device_t<F>>,
                "fluxion::linalg::set_diag: the matrices and the diagonal live on different devices.");
  E e = fluxion::detail::as_expr<A>(std::forward<A>(x));
  F f = fluxion::detail::as_expr<B>(std::forward<B>(d));
  const shape s = e.shape();
  detail::check_matrices("set_diag", s);
  const int r = s.rank();
  const index_t m = s[r - 2], n = s[r - 1];
  shape want(s.begin(), s.end() - 2);
  want.push_back(std::min(m, n));
  if (f.shape() != want)
    throw shape_error("linalg::set_diag: the diagonal of matrices " + to_string(s) + " must have shape " +
                      to_string(want) + ", got " + to_string(f.shape()));
  return fluxion::detail::on_diagonal<device_t<E>>(std::move(f), s, std::move(e));
}

/// tf.linalg.l2_normalize (tf.math.l2_normalize): x / sqrt(max(sum(x^2), epsilon)) along `axis`
/// (the last by default), so each vector along it has length 1; a zero vector stays zero, with a
/// finite gradient (1 / sqrt(epsilon) times the incoming one). Floating-point x only; TensorFlow's
/// list of axes is not built.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto l2_normalize(A&& x, int axis = -1, double epsilon = 1e-12) {
  using E = fluxion::detail::expr_t<A>;
  using T = value_type_t<E>;
  static_assert(std::is_floating_point_v<T>, "fluxion::linalg::l2_normalize: x must be float or double.");
  E e = fluxion::detail::as_expr<A>(std::forward<A>(x));
  const int ax = normalize_axis(axis, e.shape().rank(), "linalg::l2_normalize");
  if (!(epsilon > 0) || !std::isfinite(epsilon))
    throw invalid_argument("linalg::l2_normalize: epsilon = " + std::to_string(epsilon) + " must be positive and finite");
  auto norms = reduce_sum(square(e), ax, keepdims);
  return std::move(e) * rsqrt(maximum(std::move(norms), static_cast<T>(epsilon)));
}

}  // namespace fluxion::linalg
