// Cumulative sums along an axis (TensorFlow's tf.math.cumsum), and the lane loop that runs them.
//
//   auto c = fx::cumsum(x, 1);                                   // c[i, j] = x[i, 0] + ... + x[i, j]
//   auto e = fx::cumsum(x, 1, {.exclusive = true});              // x[i, 0] + ... + x[i, j - 1]
//   auto r = fx::cumsum(x, 1, {.reverse = true});                // x[i, j] + ... + x[i, n - 1]
//
// A cumulative sum is a kernel boundary: its operand is materialized, then each lane (one position
// of every other axis) is summed in order along the axis, in the operand's type, as TensorFlow
// does. Its gradient is the cumulative sum of the incoming gradient in the other direction, and its
// tangent the cumulative sum of the operand's tangent, so it is differentiable to any order.

#include "evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_EXPR_SCAN_HPP
#define FLUXION_EXPR_SCAN_HPP
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>

#include "../backend/cpu/detail/simd_ops.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/config.hpp"
#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"

namespace fluxion {

/// cumsum's flags: `exclusive` leaves each element out of its own sum (the first is 0), `reverse`
/// sums from the end of the axis.
struct cumsum_options {
  bool exclusive = false;
  bool reverse = false;
};

namespace detail {

template <class>
inline constexpr bool no_lane_kernel = false;
/// f(i) for every i in [0, n) on Device, in any order: the cpu's thread pool below, one device
/// thread each for fx::cuda (backend/cuda/evaluator.hpp).
template <class Device>
struct lane_kernel {
  static_assert(no_lane_kernel<Device>,
                "fluxion: this device has no lane kernels (cumsum, cumprod, sort); include its header (for fluxion::cuda, "
                "<fluxion/cuda.hpp>)");
};

template <class Device>
  requires std::is_same_v<Device, cpu>
struct lane_kernel<Device> {  // a template: see sort_kernel<cpu> in sort.hpp
  template <class F>
  static void run(index_t n, const F& f) {
    // About 64 Ki elements a task (a lane is `f.length` elements).
    const index_t per_task = std::max<index_t>(1, (index_t(1) << 16) / std::max<index_t>(1, f.length));
    const index_t tasks = (n + per_task - 1) / per_task;
    parallel_for(tasks, [&](index_t t) {
      const index_t end = std::min(n, (t + 1) * per_task);
      for (index_t i = t * per_task; i < end; ++i) f(i);
    });
  }
};

/// Lane i of a scan f (cumsum_lane, recurrence_lane): its `length` elements, `inner` apart, in
/// order along the axis; from f.initial, each element's state is f.next(at, the state before it),
/// and f.y gets the state after each element, or before it where f.exclusive. (Eight lanes of
/// (256, 4096) interleaved, to hide each step's latency, ran 1.7-4 times slower: their rows are
/// 16 KiB apart, so every stream lands in the same cache sets.)
/// The walk has f.exclusive fixed, so that its loop has no branch: g++ -O2 does not unswitch loops.
template <bool Exclusive, class F>
FLUXION_HOST_DEVICE void scan_lane_walk(const F& f, index_t lane) {
  const index_t outer = lane / f.inner, first = outer * f.length * f.inner + (lane - outer * f.inner);
  const index_t step = f.reverse ? -f.inner : f.inner;
  index_t at = f.reverse ? first + (f.length - 1) * f.inner : first;
  auto h = f.initial;
  for (index_t k = 0; k < f.length; ++k, at += step) {
    if constexpr (Exclusive) f.y[at] = h;
    h = f.next(at, h);
    if constexpr (!Exclusive) f.y[at] = h;
  }
}
template <class F>
FLUXION_HOST_DEVICE void scan_lane(const F& f, index_t lane) {
  if (f.exclusive) {
    scan_lane_walk<true>(f, lane);
  } else {
    scan_lane_walk<false>(f, lane);
  }
}

/// The lanes of a cumulative sum: the `length` elements of lane i, `inner` apart, from x into y.
template <class T>
struct cumsum_lane {
  const T* x;
  T* y;
  index_t length, inner;
  bool exclusive, reverse;
  static constexpr T initial = T(0);
  FLUXION_HOST_DEVICE T next(index_t at, T sum) const { return sum + x[at]; }
  FLUXION_HOST_DEVICE void operator()(index_t lane) const { scan_lane(*this, lane); }
};

/// The walk of a scan on the cpu where the lanes are `inner` > 1 elements apart: each task takes a
/// block of up to 512 adjacent lanes and walks the axis a row at a time (contiguous, vectorizable),
/// instead of one lane's elements a stride apart. row_step(at, before, i0, i1) fills lanes [i0, i1)
/// of the row that starts at `at` from the row at `before` (-1 for the first row of the walk).
template <class RowStep>
void scan_rows(index_t outer, index_t length, index_t inner, bool reverse, const RowStep& row_step) {
  constexpr index_t block = 512;
  const index_t blocks = (inner + block - 1) / block;
  parallel_for(outer * blocks, [&](index_t task) {
    const index_t o = task / blocks, i0 = (task - o * blocks) * block, i1 = std::min(inner, i0 + block);
    const index_t base = o * length * inner;
    auto row = [&](index_t step) { return base + (reverse ? length - 1 - step : step) * inner; };
    for (index_t step = 0; step < length; ++step) row_step(row(step), step == 0 ? index_t(-1) : row(step - 1), i0, i1);
  });
}

/// cumsum on the cpu where the lanes are `inner` > 1 elements apart (scan_rows): the same additions
/// in the same order as cumsum_lane.
template <class T>
void cumsum_rows(const T* x, T* y, index_t outer, index_t length, index_t inner, bool exclusive, bool reverse) {
  scan_rows(outer, length, inner, reverse, [&](index_t at, index_t before, index_t i0, index_t i1) {
    if (before < 0) {
      for (index_t i = i0; i < i1; ++i) y[at + i] = exclusive ? T(0) : x[at + i];
    } else if (exclusive) {
      kernels::add_arrays(y + at + i0, y + before + i0, x + before + i0, i1 - i0);
    } else {
      kernels::add_arrays(y + at + i0, y + before + i0, x + at + i0, i1 - i0);
    }
  });
}

}  // namespace detail

/// A cumulative sum of A along `axis` (a kernel boundary; see the top of this file).
template <class A>
struct cumsum_expr : detail::boundary_expr<cumsum_expr<A>, value_type_t<A>, device_t<A>> {
  A a;
  int axis;
  cumsum_options options;

  cumsum_expr(A a_, int axis_, cumsum_options o) : a(std::move(a_)), axis(axis_), options(o) {}
  const fluxion::shape& shape() const { return a.shape(); }
  tensor<value_type_t<A>, device_t<A>> compute() const {
    using T = value_type_t<A>;
    const tensor<T, device_t<A>> x = detail::materialize(a);
    tensor<T, device_t<A>> y(x.shape());
    const auto& s = x.shape();
    index_t inner = 1;
    for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
    const index_t length = s[axis];
    if (x.size() == 0) return y;
    const detail::cumsum_lane<T> lane{x.data(), y.mutable_data(), length, inner, options.exclusive, options.reverse};
    if constexpr (std::is_same_v<device_t<A>, cpu>) {
      if (inner > 1) {
        detail::cumsum_rows(x.data(), y.mutable_data(), x.size() / (length * inner), length, inner, options.exclusive,
                            options.reverse);
        return y;
      }
    }
    detail::lane_kernel<device_t<A>>::run(x.size() / length, lane);
    return y;
  }
};

/// TensorFlow's tf.math.cumsum: the running sum along `axis` (negative counts from the end), in
/// the operand's type; with `.exclusive` each element is left out of its own sum, with `.reverse`
/// the sums run from the end. bool operands sum as int32, as in `+`.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto cumsum(A&& a, int axis = 0, cumsum_options options = {}) {
  using E = detail::expr_t<A>;
  detail::check_not_none(a, "cumsum");
  E e = detail::as_expr<A>(std::forward<A>(a));
  if (e.shape().rank() == 0) throw invalid_argument("cumsum: the operand is a scalar; it needs an axis to sum along");
  const int ax = normalize_axis(axis, e.shape().rank(), "cumsum");
  if constexpr (std::is_same_v<value_type_t<E>, bool>) {
    auto c = cast<std::int32_t>(std::move(e));
    return cumsum_expr<decltype(c)>(std::move(c), ax, options);
  } else {
    return cumsum_expr<E>(std::move(e), ax, options);
  }
}

}  // namespace fluxion

#endif  // FLUXION_EXPR_SCAN_HPP
