// The derivatives of recurrence_expr (fx::cumprod, fx::linear_recurrence; expr/recurrence.hpp),
// derived at the top of that file. Its operands are tensors, so its derivative order is 0, as a
// gather's, and every derivative it makes is a new recorded recurrence: an outer tape or accumulator
// differentiates it again.
#pragma once

#include <type_traits>

#include "../expr/recurrence.hpp"
#include "backprop.hpp"
#include "forward.hpp"
#include "leaves.hpp"
#include "order.hpp"

namespace fluxion::autodiff {

template <class T, class D>
struct leaves<recurrence_expr<T, D>> {
  template <class F>
  static void visit(const recurrence_expr<T, D>& e, F&& f) {
    if (!e.a.is_none()) f(e.a);
    if (!e.b.is_none()) f(e.b);
  }
};

/// λ = dL/dh from the incoming gradient (the top of this file), then dL/db = λ and dL/da = λ h[t - 1].
template <class T, class D>
struct backward<recurrence_expr<T, D>> {
  template <class G, class Sink>
  static void run(const recurrence_expr<T, D>& e, const G& g, Sink& sink) {
    if constexpr (std::is_floating_point_v<T>) {
      const bool need_a = !e.a.is_none() && reads_any(e.a, wanted_by(sink));
      const bool need_b = !e.b.is_none() && reads_any(e.b, wanted_by(sink));
      if (!need_a && !need_b) return;
      const tensor<T, D> gt = reduce_to(g, e.shape());
      // The recurrence backwards from the end (h[t] feeds h[t + 1] through a[t + 1]); an exclusive
      // output y[t] = h[t - 1] takes G one step later, which the exclusive form of it gives.
      tensor<T, D> lambda;
      if (e.exclusive) {
        lambda = e.with_offsets(gt, true, !e.reverse);
      } else {
        const tensor<T, D> scaled = e.a.is_none() ? tensor<T, D>(gt * e.coefficient) : tensor<T, D>(e.a * gt);
        lambda = gt + e.with_offsets(scaled, true, !e.reverse);
      }
      if (need_b) sink.leaf(e.b, keep_order<G>(lambda));
      if (need_a) sink.leaf(e.a, keep_order<G>(tensor<T, D>(lambda * e.before())));
    }
  }
};

#if FLUXION_FORWARD_MODE
/// The recurrence again, from 0, with b' = a' h[t - 1] + b' (a constant coefficient has no tangent).
template <class T, class D>
struct tangent<recurrence_expr<T, D>> {
  template <int K>
  static auto of(const recurrence_expr<T, D>& e, const forward_accumulator& acc) {
    tensor<T, D> tb = tensor<T, D>::none();
    if (!e.a.is_none()) tb = tensor<T, D>(tstep<K>(tangent_of<K>(e.a, acc))) * e.before();
    if (!e.b.is_none()) {
      const tensor<T, D> t(tstep<K>(tangent_of<K>(e.b, acc)));
      tb = tb.is_none() ? t : tensor<T, D>(tb + t);
    }
    return e.with_offsets(std::move(tb), e.exclusive, e.reverse);
  }
};

#endif  // FLUXION_FORWARD_MODE

}  // namespace fluxion::autodiff
