// Reductions: reduce_sum, reduce_mean, reduce_prod, reduce_max, reduce_min, all, any, argmax,
// argmin and reduce_logsumexp, over any set of axes, with keepdims.
//
//   auto s = fx::reduce_sum(a * b);                 // a dot product, no temporary for a * b
//   auto m = fx::reduce_max(x, {0, 2}, fx::keepdims);
//
// A reduction consumes its operand's view directly: the elementwise tree under it runs inside
// the reduction loop.

#include "evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_EXPR_REDUCE_HPP
#define FLUXION_EXPR_REDUCE_HPP
#pragma once

#include <bit>
#include <limits>
#include <initializer_list>
#include <string>
#include <vector>

#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"
#include "reduce_ops.hpp"

namespace fluxion {

/// A set of axes; default-constructed means all of them. Negative axes count from the end.
class axes {
 public:
  axes() = default;
  axes(int axis) : m_all(false), m_list{axis} {}
  axes(std::initializer_list<int> list) : m_all(false), m_list(list) {}
  axes(std::vector<int> list) : m_all(false), m_list(std::move(list)) {}

  /// Whether the set was left to its default, every axis.
  bool all() const noexcept { return m_all; }

  /// Bit d is set when axis d of a rank-`rank` operand is in the set.
  unsigned mask(int rank, const char* op) const {
    if (m_all) return rank == 0 ? 0u : (rank >= 32 ? ~0u : (1u << rank) - 1u);
    unsigned m = 0;
    for (int a : m_list) {
      const int d = normalize_axis(a, rank, op);
      if (m >> d & 1u) throw invalid_argument(std::string(op) + ": axis " + std::to_string(a) + " is repeated");
      m |= 1u << d;
    }
    return m;
  }

 private:
  bool m_all = true;
  std::vector<int> m_list;
};

/// Pass as the keepdims argument for readability: reduce_sum(x, 1, fx::keepdims).
inline constexpr bool keepdims = true;

namespace detail {

inline shape reduced_shape(const shape& s, unsigned mask, bool keep) {
  shape out;
  for (int d = 0; d < s.rank(); ++d) {
    if (!(mask >> d & 1u)) out.push_back(s[d]);
    else if (keep) out.push_back(1);
  }
  return out;
}

}  // namespace detail

template <class RedOp, class A>
struct reduce_expr : detail::boundary_expr<reduce_expr<RedOp, A>, typename RedOp::template result<value_type_t<A>>,
                                           device_t<A>> {
  using value_type = typename RedOp::template result<value_type_t<A>>;
  using device_type = device_t<A>;
  using op_type = RedOp;
  A a;
  unsigned mask;
  bool keep;
  fluxion::shape m_shape;

  reduce_expr(A a_, unsigned mask_, bool keep_)
      : a(std::move(a_)), mask(mask_), keep(keep_), m_shape(detail::reduced_shape(a.shape(), mask_, keep_)) {}
  const fluxion::shape& shape() const { return m_shape; }

  tensor<value_type, device_type> compute() const {
    tensor<value_type, device_type> out(m_shape);
    detail::evaluator<device_type>::template reduce<RedOp>(out.mutable_data(), a.make_view(), a.shape(), mask);
    return out;
  }
};

template <bool Max, class A>
struct arg_reduce_expr : detail::boundary_expr<arg_reduce_expr<Max, A>, std::int64_t, device_t<A>> {
  A a;
  int axis;
  fluxion::shape m_shape;

  arg_reduce_expr(A a_, int axis_, bool keep)
      : a(std::move(a_)), axis(axis_), m_shape(detail::reduced_shape(a.shape(), 1u << axis_, keep)) {
    if (a.shape()[axis] == 0)
      throw invalid_argument(std::string(Max ? "argmax" : "argmin") + ": axis " + std::to_string(axis) +
                             " of shape " + to_string(a.shape()) + " is empty");
  }
  const fluxion::shape& shape() const { return m_shape; }
  tensor<std::int64_t, device_t<A>> compute() const {
    tensor<std::int64_t, device_t<A>> out(m_shape);
    detail::evaluator<device_t<A>>::template arg_reduce<Max>(out.mutable_data(), a.make_view(), a.shape(), axis);
    return out;
  }
};

#define FLUXION_REDUCTION(fname, Op)                                                            \
  template <class A>                                                                          \
    requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)                     \
  auto fname(A&& a, const axes& ax = {}, bool keep = false) {                                 \
    using E = detail::expr_t<A>;                                                              \
    detail::check_not_none(a, #fname);                                                        \
    E e = detail::as_expr<A>(std::forward<A>(a));                                             \
    const unsigned m = ax.mask(e.shape().rank(), #fname);                                     \
    return reduce_expr<ops::Op, E>(std::move(e), m, keep);                                    \
  }
FLUXION_REDUCTION(reduce_sum, reduce_sum)
FLUXION_REDUCTION(reduce_mean, reduce_mean)
FLUXION_REDUCTION(reduce_prod, reduce_prod)
FLUXION_REDUCTION(reduce_max, reduce_max)
FLUXION_REDUCTION(reduce_min, reduce_min)
FLUXION_REDUCTION(all, reduce_all)
FLUXION_REDUCTION(any, reduce_any)
#undef FLUXION_REDUCTION

/// Index (int64) of the largest element along `axis`; ties give the first. With `keep`, the
/// reduced axis stays with extent 1.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto argmax(A&& a, int axis = 0, bool keep = false) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const int ax = normalize_axis(axis, e.shape().rank(), "argmax");
  return arg_reduce_expr<true, E>(std::move(e), ax, keep);
}
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto argmin(A&& a, int axis = 0, bool keep = false) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const int ax = normalize_axis(axis, e.shape().rank(), "argmin");
  return arg_reduce_expr<false, E>(std::move(e), ax, keep);
}

}  // namespace fluxion

#include "remap.hpp"

namespace fluxion {

namespace detail {

/// The statements of reduce_logsumexp, on a tensor: one instance per element type and device in a
/// program, whatever expression the operand came from, and shared by every call (prebuilt for float
/// with FLUXION_PREBUILT_KERNELS, nn/prebuilt.hpp). Config names the autodiff settings, so that
/// code compiled with other settings never links this instance in place of its own.
template <class T, class D, int Config = autodiff_config>
tensor<T, D> logsumexp_of(const tensor<T, D>& x, unsigned mask, bool keep) {
  // The shift is a constant to autodiff, as TensorFlow's stop_gradient makes it: its exact
  // gradient is zero, and recording it would only add a max, a tie count and a scatter to every
  // backward pass (1.7x LibTorch's time at 1M before; see bench/autodiff.bench.cpp).
  const tensor<T, D> shift = [&] {
    materialize_depth hidden_from_autodiff;
    const tensor<T, D> m = reduce_expr<ops::reduce_max, tensor<T, D>>(x, mask, true);
    return tensor<T, D>(where(is_finite(m), m, T(0)));
  }();
  auto sum = reduce_expr<ops::reduce_sum, decltype(exp(x - shift))>(exp(x - shift), mask, keep);
  const fluxion::shape out = sum.shape();
  return materialize(log(std::move(sum)) + reshape_expr<tensor<T, D>>(shift, out));
}

}  // namespace detail

/// log(sum(exp(x))) over `ax`, computed stably: the maximum is subtracted first, and a
/// non-finite maximum is replaced by 0 so that all -inf rows give -inf rather than NaN. The
/// operand is materialized first (as TensorFlow's op reads a tensor), so that the statements
/// behind the result and its gradient are the same types for every operand (detail::logsumexp_of).
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto reduce_logsumexp(A&& a, const axes& ax = {}, bool keep = false) {
  using E = detail::expr_t<A>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  static_assert(std::is_floating_point_v<T>, "fluxion::reduce_logsumexp: the operand must be float or double.");
  if constexpr (std::is_floating_point_v<T>) {  // no second error after the assertion's
    E e = detail::as_expr<A>(std::forward<A>(a));
    const unsigned mask = ax.mask(e.shape().rank(), "reduce_logsumexp");
    return detail::logsumexp_of<T, D>(detail::materialize(e), mask, keep);
  } else {
    return tensor<T, D>();
  }
}

namespace detail {

/// The statements of norm, on a tensor: one instance per element type and device (as logsumexp_of).
/// Each root and power is guarded by a double `where`, so that a zero vector's gradient is 0, not
/// NaN (PyTorch's choice; TensorFlow's tf.norm gives NaN there).
template <class T, class D, int Config = autodiff_config>
tensor<T, D> norm_of(const tensor<T, D>& x, double ord, unsigned mask, bool keep) {
  if (ord == 1) return materialize(reduce_expr<ops::reduce_sum, decltype(abs(x))>(abs(x), mask, keep));
  if (ord == std::numeric_limits<double>::infinity()) {
    // maximum with 0: the norm of no elements is 0, not reduce_max's -inf.
    const tensor<T, D> m = reduce_expr<ops::reduce_max, decltype(abs(x))>(abs(x), mask, keep);
    return materialize(maximum(m, T(0)));
  }
  if (ord == 2) {
    const tensor<T, D> s = reduce_expr<ops::reduce_sum, decltype(square(x))>(square(x), mask, keep);
    return materialize(where(s > T(0), sqrt(where(s > T(0), s, T(1))), T(0)));
  }
  const T p = static_cast<T>(ord);
  auto powered = where(abs(x) > T(0), pow(where(abs(x) > T(0), abs(x), T(1)), p), T(0));
  const tensor<T, D> s = reduce_expr<ops::reduce_sum, decltype(powered)>(powered, mask, keep);
  return materialize(where(s > T(0), pow(where(s > T(0), s, T(1)), T(1) / p), T(0)));
}

}  // namespace detail

/// The vector p-norm of `a` over `ax` (default: every element), tf.norm: ord 2 (the Euclidean
/// norm, the default), 1, any other p > 0, or infinity (the largest magnitude). Over two given
/// axes only ord 2 (the Frobenius norm) is accepted: TensorFlow reads ord 1 and infinity there as
/// matrix norms. A zero vector's gradient is 0.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto norm(A&& a, double ord = 2, const axes& ax = {}, bool keep = false) {
  using E = detail::expr_t<A>;
  using T = value_type_t<E>;
  using D = device_t<E>;
  static_assert(std::is_floating_point_v<T>, "fluxion::norm: the operand must be float or double.");
  if constexpr (std::is_floating_point_v<T>) {  // no second error after the assertion's
    detail::check_not_none(a, "norm");
    E e = detail::as_expr<A>(std::forward<A>(a));
    if (!(ord > 0)) throw invalid_argument("norm: ord = " + std::to_string(ord) + " must be positive (or infinity)");
    const unsigned mask = ax.mask(e.shape().rank(), "norm");
    if (!ax.all() && std::popcount(mask) == 2 && ord != 2)
      throw invalid_argument("norm: ord = " + std::to_string(ord) + " over two axes is a matrix norm in TensorFlow, which "
                             "fluxion does not compute; over two axes only ord 2 (the Frobenius norm) is accepted");
    return detail::norm_of<T, D>(detail::materialize(e), ord, mask, keep);
  } else {
    return tensor<T, D>();  // so that `auto n = norm(a)` adds no second error
  }
}

}  // namespace fluxion

#endif  // FLUXION_EXPR_REDUCE_HPP
