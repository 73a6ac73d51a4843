// Forward mode: fx::forward_accumulator and fx::jvp.
//
//   fx::forward_accumulator acc(x, v);   // primal x, tangent v
//   fx::tensor<double> y = fx::sin(x) * x;
//   auto dy = acc.jvp(y);                // (cos(x) * x + sin(x)) * v
//
// While an accumulator is alive, each materialization that reads a tensor with a tangent also
// computes its output's tangent, from the same rule table (the jvp side), as one fused
// statement. Under a gradient tape inside the accumulator's scope, the tape's backward pass gets
// tangents too: forward over reverse gives Hessian-vector products.
//
// Forward mode is opt-in: define FLUXION_FORWARD_MODE to 1 before including fluxion. Without it no
// statement instantiates a tangent function (core/config.hpp), and using forward mode does not
// compile.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_FORWARD_HPP
#define FLUXION_AUTODIFF_FORWARD_HPP
#pragma once

#include <any>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../expr/evaluate.hpp"
#include "backprop.hpp"
#include "leaves.hpp"
#include "order.hpp"
#include "rules.hpp"

#if !FLUXION_FORWARD_MODE

namespace fluxion {

/// Forward mode is compiled out (core/config.hpp): these stand-ins turn its use into one clear error.
template <bool Enabled = false>
class basic_forward_accumulator {
  static_assert(Enabled,
                "fluxion::forward_accumulator: forward mode is compiled out; define FLUXION_FORWARD_MODE to 1 "
                "before including fluxion (target_compile_definitions(app PRIVATE FLUXION_FORWARD_MODE=1)).");

 public:
  template <class... Args>
  explicit basic_forward_accumulator(Args&&...) {}
};
using forward_accumulator = basic_forward_accumulator<>;

template <class F, class T, class D>
auto jvp(F&&, const tensor<T, D>&, const tensor<T, D>&) {
  static_assert(sizeof(F) == 0,
                "fluxion::jvp: forward mode is compiled out; define FLUXION_FORWARD_MODE to 1 before including "
                "fluxion (target_compile_definitions(app PRIVATE FLUXION_FORWARD_MODE=1)).");
  return std::pair<tensor<T, D>, tensor<T, D>>{};  // so that `auto [y, t] = jvp(...)` adds no second error
}

}  // namespace fluxion

#else

namespace fluxion {

class forward_accumulator;

namespace detail {
struct accumulator_stack {
  static inline thread_local std::vector<forward_accumulator*> accumulators;
};
}  // namespace detail

class forward_accumulator {
 public:
  forward_accumulator() {
    detail::accumulator_stack::accumulators.push_back(this);
    ++detail::autodiff_state::observers;
    ++detail::autodiff_state::accumulators;
  }
  template <class T, class D>
  forward_accumulator(const tensor<T, D>& primal, const tensor<T, D>& tangent) : forward_accumulator() {
    watch(primal, tangent);
  }
  forward_accumulator(const forward_accumulator&) = delete;
  forward_accumulator& operator=(const forward_accumulator&) = delete;
  ~forward_accumulator() {
    std::erase(detail::accumulator_stack::accumulators, this);
    --detail::autodiff_state::observers;
    --detail::autodiff_state::accumulators;
  }

  /// Gives `primal` the tangent `tangent` (same shape).
  template <class T, class D>
  void watch(const tensor<T, D>& primal, const tensor<T, D>& tangent) {
    if (primal.shape() != tangent.shape())
      throw shape_error("forward_accumulator: tangent of shape " + to_string(tangent.shape()) +
                        " does not match primal of shape " + to_string(primal.shape()));
    m_tangents.insert_or_assign(primal.id(), std::any(tangent));
  }

  /// The tangent of `t`. When `t` does not depend on a watched primal: tensor::none(), as
  /// TensorFlow's ForwardAccumulator.jvp gives None, or zeros of t's shape with
  /// unconnected_gradients::zero.
  template <class T, class D>
  tensor<T, D> jvp(const tensor<T, D>& t, unconnected_gradients unconnected = unconnected_gradients::none) const {
    if (const auto* v = find<T, D>(t.id())) return *v;
    if (const std::uint64_t n = detail::autodiff_state::unoffered - m_unoffered_before; n > 0)
      throw error("forward_accumulator::jvp: no tangent reaches the tensor of shape " + to_string(t.shape()) +
                  ", and " + std::to_string(n) + (n == 1 ? " statement" : " statements") +
                  " ran while this accumulator was alive that it could not see: code compiled without forward mode "
                  "(FLUXION_FORWARD_MODE 0, or FLUXION_MAX_DERIVATIVE_ORDER 0) materialized " +
                  (n == 1 ? "it" : "them") + ". Compile the code that computes the tensor with FLUXION_FORWARD_MODE 1");
    if (unconnected == unconnected_gradients::none) return tensor<T, D>::none();
    return tensor<T, D>(broadcast_to(scalar_expr<T, D>(T(0)), t.shape()));
  }

  template <class T, class D>
  const tensor<T, D>* find(std::uint64_t id) const {
    auto it = m_tangents.find(id);
    return it == m_tangents.end() ? nullptr : std::any_cast<tensor<T, D>>(&it->second);
  }
  bool has(std::uint64_t id) const { return m_tangents.contains(id); }
  /// Not paused by its own pause, nor by an autodiff_paused scope (nn/batch_norm.hpp) opened after it.
  bool active() const noexcept { return m_paused == 0 && detail::autodiff_state::accumulators_paused == m_pauses_before; }

  template <class T, class D>
  void set(std::uint64_t id, tensor<T, D> t) {
    m_tangents.insert_or_assign(id, std::any(std::move(t)));
  }

  struct pause {
    forward_accumulator& a;
    explicit pause(forward_accumulator& acc) : a(acc) { ++a.m_paused; }
    ~pause() { --a.m_paused; }
  };

 private:
  std::unordered_map<std::uint64_t, std::any> m_tangents;
  int m_paused = 0;
  int m_pauses_before = detail::autodiff_state::accumulators_paused;
  std::uint64_t m_unoffered_before = detail::autodiff_state::unoffered;
};

namespace autodiff {

/// Past first order, tangents are materialized at every node (see autodiff::step).
template <int K, class X>
decltype(auto) tstep(X&& x) {
  using E = std::remove_cvref_t<X>;
  if constexpr (K >= 2 && !is_materialized_v<E>)
    return as_order<K>(tensor<value_type_t<E>, device_t<E>>(x));
  else
    return std::forward<X>(x);
}

/// tangent<E>::template of<K>(e, acc): the tangent of e's value as an expression (jvp rules).
/// Rules call tangent_of<K> for their operands, never tangent<E> directly.
template <class E>
struct tangent;

/// The tangent of `e`, always of derivative order K in its type. Some tangents are new nodes over
/// tangent tensors (gather, concat) or constants (the zeros of floor, sign, a scalar) that would
/// otherwise carry order 0. A statement built from one and materialized inside a tangent (the sum
/// of a gathered tangent, in the tangent of reduce_sum(gather(x, i) * 2)) would then be offered to
/// the accumulator at its parent's order, and its own tangent instantiated at that order again,
/// without end: the compiler never finished. With every tangent of order K, each materialization
/// nested inside a tangent is one order higher, and orders stop at FLUXION_MAX_DERIVATIVE_ORDER.
template <int K, class E>
auto tangent_of(const E& e, const forward_accumulator& acc);

template <class E>
struct tangent {
  template <int K>
  static auto of(const E&, const forward_accumulator&) {
    return scalar_expr<value_type_t<E>, device_t<E>>(value_type_t<E>(0));
  }
};

template <class T, class D>
struct tangent<tensor<T, D>> {
  template <int K>
  static auto of(const tensor<T, D>& t, const forward_accumulator& acc) {
    const tensor<T, D>* v = acc.find<T, D>(t.id());
    tensor<T, D> base = v ? *v : tensor<T, D>(T(0));
    return as_order<K>(remap_expr<detail::broadcast_map, tensor<T, D>>(
        base, detail::broadcast_map{base.shape(), t.shape()}, t.shape()));
  }
};

template <int K0, class G>
struct tangent<grad_expr<K0, G>> {
  template <int K>
  static auto of(const grad_expr<K0, G>& e, const forward_accumulator& acc) { return tstep<K>(tangent_of<K>(e.g, acc)); }
};

/// The tangent of a node without a derivative (floor, sign, comparisons, mod): zeros of the node's
/// shape, so that the tangent of such a statement has its output's shape.
template <class E>
auto zero_tangent(const E& e) {
  using T = value_type_t<E>;
  return broadcast_to(scalar_expr<T, device_t<E>>(T(0)), e.shape());
}

template <class Op, class A>
struct tangent<unary_expr<Op, A>> {
  template <int K>
  static auto of(const unary_expr<Op, A>& e, const forward_accumulator& acc) {
    if constexpr (rule<Op>::differentiable && differentiable_v<A>)
      return rule<Op>::jvp(e.a, tstep<K>(tangent_of<K>(e.a, acc)));
    else
      return zero_tangent(e);
  }
};

template <class Op, class A, class B>
struct tangent<binary_expr<Op, A, B>> {
  template <int K>
  static auto of(const binary_expr<Op, A, B>& e, const forward_accumulator& acc) {
    using R = value_type_t<binary_expr<Op, A, B>>;
    if constexpr (rule<Op>::differentiable && std::is_floating_point_v<R>)
      return rule<Op>::jvp(e.a, e.b, tstep<K>(tangent_of<K>(e.a, acc)), tstep<K>(tangent_of<K>(e.b, acc)));
    else
      return zero_tangent(e);
  }
};

template <class C, class A, class B>
struct tangent<ternary_expr<ops::where, C, A, B>> {
  template <int K>
  static auto of(const ternary_expr<ops::where, C, A, B>& e, const forward_accumulator& acc) {
    return where(e.a, tstep<K>(tangent_of<K>(e.b, acc)), tstep<K>(tangent_of<K>(e.c, acc)));
  }
};

template <class Map, class A>
struct tangent<remap_expr<Map, A>> {
  template <int K>
  static auto of(const remap_expr<Map, A>& e, const forward_accumulator& acc) {
    auto ta = tstep<K>(tangent_of<K>(e.a, acc));
    return remap_expr<Map, decltype(ta)>(ta, e.map, e.shape());
  }
};

template <class A>
struct tangent<reshape_expr<A>> {
  template <int K>
  static auto of(const reshape_expr<A>& e, const forward_accumulator& acc) {
    auto ta = tstep<K>(tangent_of<K>(e.a, acc));
    return reshape_expr<decltype(ta)>(ta, e.shape());
  }
};

template <class RedOp, class A>
struct tangent<reduce_expr<RedOp, A>> {
  template <int K>
  static auto of(const reduce_expr<RedOp, A>& e, const forward_accumulator& acc) {
    using T = value_type_t<reduce_expr<RedOp, A>>;
    using D = device_t<A>;
    auto ta = tstep<K>(tangent_of<K>(e.a, acc));
    const shape& as = e.a.shape();
    if constexpr (std::is_same_v<RedOp, ops::reduce_sum> || std::is_same_v<RedOp, ops::reduce_mean>) {
      return as_order<K>(tensor<T, D>(reduce_expr<RedOp, decltype(ta)>(ta, e.mask, e.keep)));
    } else if constexpr (std::is_same_v<RedOp, ops::reduce_prod>) {
      return as_order<K>(tensor<T, D>(e.eval() * reduce_expr<ops::reduce_sum, decltype(ta / e.a)>(ta / e.a, e.mask, e.keep)));
    } else if constexpr (std::is_same_v<RedOp, ops::reduce_max> || std::is_same_v<RedOp, ops::reduce_min>) {
      const auto ext = unreduce(e.eval(), e.mask, e.keep, as);
      const tensor<T, D> count = reduce_expr<ops::reduce_sum, decltype(cast<T>(e.a == ext))>(cast<T>(e.a == ext), e.mask, e.keep);
      auto picked = where(e.a == ext, ta, T(0));
      return as_order<K>(tensor<T, D>(reduce_expr<ops::reduce_sum, decltype(picked)>(picked, e.mask, e.keep) / count));
    } else {
      return as_order<K>(tensor<T, D>(broadcast_to(scalar_expr<T, D>(T(0)), e.shape())));
    }
  }
};

template <class A, class B>
struct tangent<matmul_expr<A, B>> {
  template <int K>
  static auto of(const matmul_expr<A, B>& e, const forward_accumulator& acc) {
    using T = value_type_t<A>;
    using D = device_t<A>;
    const auto ta = as_order<K>(tensor<T, D>(tstep<K>(tangent_of<K>(e.a, acc))));
    const auto tb = as_order<K>(tensor<T, D>(tstep<K>(tangent_of<K>(e.b, acc))));
    return matmul(ta, e.b, e.opt) + matmul(e.a, tb, e.opt);
  }
};

template <class T, class I, class D>
struct tangent<gather_expr<T, I, D>> {
  template <int K>
  static auto of(const gather_expr<T, I, D>& e, const forward_accumulator& acc) {
    const tensor<T, D> tp = tstep<K>(tangent_of<K>(e.params, acc));
    return gather_expr<T, I, D>(tp, e.indices, e.axis, detail::checked_indices);  // e checked them
  }
};

template <class T, class I, class D>
struct tangent<segment_sum_expr<T, I, D>> {
  template <int K>
  static auto of(const segment_sum_expr<T, I, D>& e, const forward_accumulator& acc) {
    const tensor<T, D> td = tstep<K>(tangent_of<K>(e.data, acc));
    return segment_sum_expr<T, I, D>(td, e.ids, e.shape(), e.axis);
  }
};

template <class T, class D>
struct tangent<concat_expr<T, D>> {
  template <int K>
  static auto of(const concat_expr<T, D>& e, const forward_accumulator& acc) {
    // A new node, not a copy of e: copies share e's cache, which holds e's value.
    concat_expr<T, D> c;
    c.parts.reserve(e.parts.size());
    for (const auto& p : e.parts) c.parts.push_back(tensor<T, D>(tstep<K>(tangent_of<K>(p, acc))));
    c.axis = e.axis;
    c.stacked = e.stacked;
    c.m_shape = e.m_shape;
    return c;
  }
};

template <class A>
struct tangent<pad_expr<A>> {
  template <int K>
  static auto of(const pad_expr<A>& e, const forward_accumulator& acc) {
    auto ta = tstep<K>(tangent_of<K>(e.a, acc));
    return pad_expr<decltype(ta)>(ta, e.paddings, value_type_t<A>(0), e.shape(), e.steps);
  }
};

template <class A>
struct tangent<cumsum_expr<A>> {
  template <int K>
  static auto of(const cumsum_expr<A>& e, const forward_accumulator& acc) {
    auto ta = tstep<K>(tangent_of<K>(e.a, acc));
    return cumsum_expr<decltype(ta)>(ta, e.axis, e.options);
  }
};

template <int K, class E>
auto tangent_of(const E& e, const forward_accumulator& acc) {
  auto t = tangent<E>::template of<K>(e, acc);
  if constexpr (order_v<decltype(t)> < K) return as_order<K>(std::move(t));
  else return t;
}

/// Called for each top-level materialization while accumulators are alive. Config: the unit's
/// autodiff settings (core/config.hpp), the order being Config / 2.
template <int Config, class E, class T, class D>
void offer_to_accumulators(const E& e, const tensor<T, D>& out) {
  for (forward_accumulator* acc : detail::accumulator_stack::accumulators) {
    if (!acc->active() || acc->has(out.id())) continue;
    if (!reads_any(e, member_test<forward_accumulator, &forward_accumulator::has>{*acc})) continue;
    constexpr int order = order_v<E>;
    if constexpr (order < Config / 2) {
      forward_accumulator::pause quiet(*acc);
      acc->set(out.id(), tensor<T, D>(tangent_of<order + 1>(e, *acc)));
    } else {
      throw_order_exceeded("forward_accumulator", Config / 2);
    }
  }
}

}  // namespace autodiff

/// Runs f at `primal` and returns {f(primal), the directional derivative of f along `tangent`}:
/// zeros where f(primal) does not depend on primal (JAX's jvp), a derivative that exists.
template <class F, class T, class D>
auto jvp(F&& f, const tensor<T, D>& primal, const tensor<T, D>& tangent) {
  forward_accumulator acc(primal, tangent);
  auto y = detail::materialize(f(primal));
  auto t = acc.jvp(y, unconnected_gradients::zero);
  return std::pair{y, t};
}

}  // namespace fluxion

#endif  // FLUXION_FORWARD_MODE

#endif  // FLUXION_AUTODIFF_FORWARD_HPP
