// Linear recurrences along an axis: TensorFlow's tf.math.cumprod, and the first-order recurrence
// h[t] = a[t] * h[t - 1] + b[t] that discounted returns, exponential moving averages and linear
// RNN scans are made of.
//
//   auto p = fx::cumprod(x, 1);                                   // p[i, j] = x[i, 0] * ... * x[i, j]
//   auto q = fx::cumprod(x, 1, {.exclusive = true});              // x[i, 0] * ... * x[i, j - 1] (1 first)
//   auto g = fx::linear_recurrence(0.99f, rewards, 1, {.reverse = true});  // g[t] = r[t] + 0.99 g[t + 1]
//   fx::tensor<float> h = fx::linear_recurrence(a, b, h0, 1);        // from h[-1] = h0: a state carried over
//
// Both are one node, recurrence_expr, a kernel boundary like cumsum (expr/scan.hpp): its operands
// are materialized, then each lane (one position of every other axis) is walked in order along the
// axis, on every device (detail::lane_kernel). Its derivatives are recurrences again, so it is
// differentiable to any order, and without a division: the gradient of cumprod at a zero is exact
// (TensorFlow's divides by x and gives NaN there). With λ = dL/dh:
//   λ[t] = G[t] + a[t + 1] λ[t + 1]  (the same recurrence, the other way, on the incoming gradient G)
//   dL/db[t] = λ[t],   dL/da[t] = λ[t] h[t - 1]
// and the tangent is the recurrence itself with b' = a' h[t - 1] + b'.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "indexing.hpp"
#include "remap.hpp"
#include "scan.hpp"

namespace fluxion {

/// cumprod's flags, as cumsum's: `exclusive` leaves each element out of its own product (the first
/// is 1), `reverse` multiplies from the end of the axis.
using cumprod_options = cumsum_options;
/// linear_recurrence's flags: `exclusive` gives h[t - 1] at t (h[-1] = 0 first) instead of h[t],
/// `reverse` runs from the end of the axis (h[t] = a[t] * h[t + 1] + b[t]).
using linear_recurrence_options = cumsum_options;

namespace detail {

/// One lane of a recurrence: the `length` elements of lane i, `inner` apart; a may be null (every
/// coefficient is `coefficient`), b may be null (0).
template <class T>
struct recurrence_lane {
  const T* a;
  const T* b;
  T* y;
  index_t length, inner;
  bool exclusive, reverse;
  T coefficient, initial;
};

/// recurrence_lane with whether it has a and b fixed in its type, so that the step has no branch:
/// g++ -O2 does not unswitch loops, and discounted returns (a constant coefficient) ran 1.4-1.5x
/// their -O3 time.
template <class T, bool HasA, bool HasB>
struct recurrence_lane_of : recurrence_lane<T> {
  FLUXION_HOST_DEVICE T next(index_t at, T h) const {
    const T c = HasA ? this->a[at] : this->coefficient;
    if constexpr (HasB) {
      return T(c * h + this->b[at]);
    } else {
      return T(c * h);
    }
  }
  FLUXION_HOST_DEVICE void operator()(index_t lane) const { scan_lane(*this, lane); }
};

/// run(recurrence_lane_of<T, a?, b?>) for the lane f: which of a and b it has, as types.
template <class T, class Run>
void with_recurrence_lane(const recurrence_lane<T>& f, const Run& run) {
  if (f.a && f.b) {
    run(recurrence_lane_of<T, true, true>{f});
  } else if (f.a) {
    run(recurrence_lane_of<T, true, false>{f});
  } else if (f.b) {
    run(recurrence_lane_of<T, false, true>{f});
  } else {
    run(recurrence_lane_of<T, false, false>{f});
  }
}

/// The recurrence on the cpu where the lanes are `inner` > 1 elements apart (scan_rows): the same
/// operations as recurrence_lane_of in the same order.
template <class F>
void recurrence_rows(const F& f, index_t outer) {
  scan_rows(outer, f.length, f.inner, f.reverse, [&](index_t at, index_t before, index_t i0, index_t i1) {
    if (before < 0) {
      for (index_t i = i0; i < i1; ++i) f.y[at + i] = f.exclusive ? f.initial : f.next(at + i, f.initial);
    } else if (f.exclusive) {
      for (index_t i = i0; i < i1; ++i) f.y[at + i] = f.next(before + i, f.y[before + i]);
    } else {
      for (index_t i = i0; i < i1; ++i) f.y[at + i] = f.next(at + i, f.y[before + i]);
    }
  });
}

}  // namespace detail

/// h[t] = a[t] * h[t - 1] + b[t] along `axis`, from h[-1] = `initial` (a kernel boundary; see the
/// top of this file). `b` is none for cumprod (h[t] = a[t] * h[t - 1], from 1); `a` is none for a
/// constant coefficient (h[t] = coefficient * h[t - 1] + b[t]), which is then not a tensor at all.
template <class T, class Device>
struct recurrence_expr : detail::boundary_expr<recurrence_expr<T, Device>, T, Device> {
  tensor<T, Device> a;
  tensor<T, Device> b;
  T coefficient = T(0);
  int axis = 0;
  bool exclusive = false;
  bool reverse = false;
  T initial = T(0);

  recurrence_expr(tensor<T, Device> a_, tensor<T, Device> b_, T coefficient_, int axis_, bool exclusive_, bool reverse_,
                  T initial_)
      : a(std::move(a_)), b(std::move(b_)), coefficient(coefficient_), axis(axis_), exclusive(exclusive_),
        reverse(reverse_), initial(initial_) {}
  const fluxion::shape& shape() const { return a.is_none() ? b.shape() : a.shape(); }
  /// The same recurrence over other offsets b, from 0, with the flags given.
  recurrence_expr with_offsets(tensor<T, Device> b_, bool exclusive_, bool reverse_) const {
    return recurrence_expr(a, std::move(b_), coefficient, axis, exclusive_, reverse_, T(0));
  }
  /// The same recurrence's h[t - 1] at t (h[t + 1] when reversed): the state each step starts from.
  recurrence_expr before() const { return recurrence_expr(a, b, coefficient, axis, true, reverse, initial); }
  tensor<T, Device> compute() const {
    const auto& s = shape();
    tensor<T, Device> y(s);
    index_t inner = 1;
    for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
    const index_t length = s[axis];
    if (y.size() == 0) return y;
    const detail::recurrence_lane<T> lane{a.is_none() ? nullptr : a.data(), b.is_none() ? nullptr : b.data(),
                                          y.mutable_data(), length, inner, exclusive, reverse, coefficient, initial};
    detail::with_recurrence_lane(lane, [&](const auto& f) {
      if constexpr (std::is_same_v<Device, cpu>) {
        if (inner > 1) return detail::recurrence_rows(f, y.size() / (length * inner));
      }
      detail::lane_kernel<Device>::run(y.size() / length, f);
    });
    return y;
  }
};

namespace detail {
/// A recurrence's operand `x` (b, or cumprod's x) checked (not none, not a scalar) and materialized,
/// with its axis normalized: {tensor, axis}.
template <class A>
auto recurrence_operand(A&& x, int axis, const char* op) {
  check_not_none(x, op);
  auto t = materialize(as_expr<A>(std::forward<A>(x)));
  if (t.shape().rank() == 0)
    throw invalid_argument(std::string(op) + ": the operand is a scalar; it needs an axis to run along");
  const int ax = normalize_axis(axis, t.shape().rank(), op);
  return std::pair{std::move(t), ax};
}
}  // namespace detail

/// TensorFlow's tf.math.cumprod: the running product along `axis` (negative counts from the end),
/// in the operand's type; with `.exclusive` each element is left out of its own product (the first
/// is 1), with `.reverse` the products run from the end. Its gradient is exact where x has zeros.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto cumprod(A&& x, int axis = 0, cumprod_options options = {}) {
  using E = detail::expr_t<A>;
  using T = value_type_t<E>;
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "fluxion::cumprod: the operand must be a number type (cast a bool tensor first).");
  auto [a, ax] = detail::recurrence_operand(std::forward<A>(x), axis, "cumprod");
  return recurrence_expr<T, device_t<E>>(std::move(a), tensor<T, device_t<E>>::none(), T(0), ax, options.exclusive,
                                         options.reverse, T(1));
}

/// The first-order linear recurrence h[t] = a[t] * h[t - 1] + b[t] along `axis`, from h[-1] = 0
/// (with `.reverse`, h[t] = a[t] * h[t + 1] + b[t] from the end), as one kernel: discounted returns
/// (a = gamma, b = the rewards, reversed), exponential moving averages (a = 1 - alpha, b = alpha x),
/// the scan of a linear RNN. `a` broadcasts to b's shape (a scalar coefficient, one per lane). To
/// start from a state h[-1] = h0 other than 0, give it after b (below). Differentiable in a and b
/// to any order.
template <class A, class B>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) &&
           (is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>))
auto linear_recurrence(A&& a, B&& b, int axis = 0, linear_recurrence_options options = {}) {
  using EA = detail::expr_t<A>;
  using EB = detail::expr_t<B>;
  using T = value_type_t<EB>;
  using D = device_t<EB>;
  static_assert(std::is_same_v<value_type_t<EA>, T>,
                "fluxion::linear_recurrence: a and b have different element types; cast one (fx::cast<T>).");
  static_assert(std::is_same_v<device_t<EA>, D>, "fluxion::linear_recurrence: a and b live on different devices.");
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "fluxion::linear_recurrence: the operands must be a number type (cast a bool tensor first).");
  if constexpr (!(std::is_same_v<value_type_t<EA>, T> && std::is_same_v<device_t<EA>, D> && std::is_arithmetic_v<T> &&
                  !std::is_same_v<T, bool>)) {
    // The static_assert's error alone, no other.
    return recurrence_expr<T, D>(tensor<T, D>(), tensor<T, D>(), T(0), 0, false, false, T(0));
  } else {
    detail::check_not_none(a, "linear_recurrence");
    auto [bt, ax] = detail::recurrence_operand(std::forward<B>(b), axis, "linear_recurrence");
    EA ea = detail::as_expr<A>(std::forward<A>(a));
    if (ea.shape() != bt.shape()) {
      const auto common = try_broadcast_shapes(ea.shape(), bt.shape());
      if (!common || *common != bt.shape())
        throw shape_error("linear_recurrence: the coefficients a of shape " + to_string(ea.shape()) +
                          " do not broadcast to the shape of b, " + to_string(bt.shape()));
      auto at = detail::materialize(broadcast_to(std::move(ea), bt.shape()));
      return recurrence_expr<T, D>(std::move(at), std::move(bt), T(0), ax, options.exclusive, options.reverse, T(0));
    } else {
      auto at = detail::materialize(std::move(ea));
      return recurrence_expr<T, D>(std::move(at), std::move(bt), T(0), ax, options.exclusive, options.reverse, T(0));
    }
  }
}

/// linear_recurrence with one coefficient for every step, kept as a number (no tensor of it):
/// linear_recurrence(0.99f, rewards, 1, {.reverse = true}).
template <class B>
  requires(is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>)
auto linear_recurrence(value_type_t<detail::expr_t<B>> a, B&& b, int axis = 0, linear_recurrence_options options = {}) {
  using EB = detail::expr_t<B>;
  using T = value_type_t<EB>;
  using D = device_t<EB>;
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>,
                "fluxion::linear_recurrence: the operands must be a number type (cast a bool tensor first).");
  auto [bt, ax] = detail::recurrence_operand(std::forward<B>(b), axis, "linear_recurrence");
  return recurrence_expr<T, D>(tensor<T, D>::none(), std::move(bt), a, ax, options.exclusive, options.reverse, T(0));
}

namespace detail {
/// linear_recurrence from a state h0 (h[-1], or h[n] reversed): `plain` is the recurrence from 0
/// (its operands checked, a broadcast to b's shape or none for a scalar coefficient). h0, of b's
/// shape without the axis or broadcasting to it, enters as a * h0 added to b's first step (a mask
/// along the axis picks it), and with `.exclusive` is added to the result's first step, where the
/// exclusive recurrence has 0. Two elementwise statements around the one kernel: no slices, pads or
/// concatenations, whose kernels and gradients would cost a program's build seconds more.
template <class T, class D>
tensor<T, D> recurrence_from_state(const recurrence_expr<T, D>& plain, linear_recurrence_options options,
                                   const tensor<T, D>& h0) {
  const tensor<T, D>& b = plain.b;
  const int axis = plain.axis;
  const shape& s = b.shape();
  shape lanes, slab = s, along(std::vector<index_t>(static_cast<std::size_t>(s.rank()), 1));
  for (int d = 0; d < s.rank(); ++d)
    if (d != axis) lanes.push_back(s[d]);
  slab[axis] = 1;
  along[axis] = s[axis];
  const auto common = try_broadcast_shapes(h0.shape(), lanes);
  if (!common || *common != lanes)
    throw shape_error("linear_recurrence: the initial state of shape " + to_string(h0.shape()) +
                      " does not broadcast to " + to_string(lanes) + ", the shape of b " + to_string(s) +
                      " without axis " + std::to_string(axis));
  // h0 with the axis of extent 1; a mask of 1 at the axis's first step (its last reversed), 0 elsewhere.
  const auto first = static_cast<std::int64_t>(options.reverse ? s[axis] - 1 : 0);
  const tensor<T, D> mask = materialize_unrecorded(cast<T>(iota_expr<std::int64_t, D>{{}, along, axis} == first));
  const tensor<T, D> full = h0.shape() == lanes ? h0 : tensor<T, D>(broadcast_to(h0, lanes));  // no copy when it fits
  const tensor<T, D> lane_state(reshape(full, std::vector<index_t>(slab.begin(), slab.end())));
  const tensor<T, D> started = plain.a.is_none() ? tensor<T, D>(b + mask * (lane_state * plain.coefficient))
                                                 : tensor<T, D>(b + mask * (plain.a * lane_state));
  const tensor<T, D> h(plain.with_offsets(started, options.exclusive, options.reverse));
  if (!options.exclusive) return h;
  return tensor<T, D>(h + mask * lane_state);
}
}  // namespace detail

/// linear_recurrence from the state h[-1] = initial (with `.reverse`, h[n] = initial after the
/// axis's last step) instead of 0: the state carried from the previous chunk of a long sequence, or
/// a linear RNN's initial state. `a` is a tensor or one coefficient for every step (a number);
/// `initial` has b's shape without `axis` (or broadcasts to it); with `.exclusive` it is the
/// result's first step. A tensor (a few statements, not one node), and differentiable in a, b and
/// initial to any order.
///   fx::tensor<float> h1 = fx::linear_recurrence(a1, b1, h0, 1);                   // (batch, time, units)
///   fx::tensor<float> h2 = fx::linear_recurrence(0.9f, b2, fx::squeeze(fx::slice(h1, {0, t - 1, 0}, {-1, 1, -1}), {1}), 1);
template <class A, class B, class H>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>> || std::is_arithmetic_v<std::remove_cvref_t<A>>) &&
           (is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>) &&
           (is_expression_v<H> || is_variable_v<std::remove_cvref_t<H>>))
auto linear_recurrence(A&& a, B&& b, H&& initial, int axis = 0, linear_recurrence_options options = {}) {
  using T = value_type_t<detail::expr_t<B>>;
  using D = device_t<detail::expr_t<B>>;
  constexpr bool fits = std::is_same_v<value_type_t<detail::expr_t<H>>, T> && std::is_same_v<device_t<detail::expr_t<H>>, D>;
  static_assert(fits, "fluxion::linear_recurrence: the initial state's element type or device is not b's; cast or move it.");
  if constexpr (!fits) {
    return tensor<T, D>();  // the static_assert's error alone
  } else {
    detail::check_not_none(initial, "linear_recurrence");
    const tensor<T, D> h0(detail::materialize(detail::as_expr<H>(std::forward<H>(initial))));
    // The recurrence from 0: a's and b's checks, a broadcast to b's shape.
    const linear_recurrence_options inclusive{.reverse = options.reverse};
    if constexpr (std::is_arithmetic_v<std::remove_cvref_t<A>>)
      return detail::recurrence_from_state(linear_recurrence(static_cast<T>(a), std::forward<B>(b), axis, inclusive), options, h0);
    else
      return detail::recurrence_from_state(linear_recurrence(std::forward<A>(a), std::forward<B>(b), axis, inclusive), options, h0);
  }
}

}  // namespace fluxion
