// Derivative rules of the window ops (expr/conv.hpp): conv2d, max_pool2d, avg_pool2d and the ops
// their gradients are made of.
//
//   fx::gradient_tape tape;
//   tape.watch(x);
//   fx::tensor<double> y = fx::reduce_sum(fx::square(fx::conv2d(x, w, 1, fx::padding::same)));
//   auto dx = tape.gradient(y, x);      // computed by the window op conv2d_input_gradient
//
// Every vjp is again a window op, so a gradient is itself differentiable. The ops are linear in
// each operand, except max pooling, whose routing depends on where each window's maximum is:
//   conv2d(x, w)                    vjp x: conv2d_input_gradient(g, w)   vjp w: conv2d_filter_gradient(x, g)
//   conv2d_input_gradient(g, w)     vjp g: conv2d(h, w)                  vjp w: conv2d_filter_gradient(h, g)
//   conv2d_filter_gradient(x, g)    vjp x: conv2d_input_gradient(g, h)   vjp g: conv2d(x, h)
//   depthwise_conv2d and its two gradients: the same table, with depthwise_ before each op
//   avg_pool2d(x)                   vjp x: avg_pool2d_gradient(g)
//   avg_pool2d_gradient(g)          vjp g: avg_pool2d(h)
//   max_pool2d(x)                   vjp x: max_pool2d_gradient(x, g)     jvp: max_pool2d_select(x, t)
//   max_pool2d_gradient(x, g)       vjp g: max_pool2d_select(x, h)       (zero in x: the routing is
//   max_pool2d_select(x, h)         vjp h: max_pool2d_gradient(x, g)      piecewise constant)
// The jvp of a linear operand is the op with that operand replaced by its tangent.
#pragma once

#include <algorithm>
#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../expr/conv.hpp"
#include "backprop.hpp"
#include "forward.hpp"
#include "leaves.hpp"
#include "order.hpp"

namespace fluxion::autodiff {

template <class Op, class... A>
struct order_of<window_expr<Op, A...>> : std::integral_constant<int, std::max({0, order_of<A>::value...})> {};

template <class Op, class... A>
struct leaves<window_expr<Op, A...>> {
  template <class F>
  static void visit(const window_expr<Op, A...>& e, F&& f) {
    std::apply([&](const auto&... a) { (leaves<std::remove_cvref_t<decltype(a)>>::visit(a, f), ...); }, e.operands);
  }
};

/// window_rule<Op>::vjp<I>(e, h): the gradient of operand I of e, given the gradient h of e;
/// window_rule<Op>::jvp<I>(e, t): the part of e's tangent due to the tangent t of operand I,
/// where has_jvp<I>.
template <class Op>
struct window_rule;

namespace window_detail {

/// A vjp or jvp term that is identically zero.
struct no_term {};

template <class Op, class... A>
auto make(const typename Op::geometry& s, const A&... a) {
  return window_expr<Op, A...>(s, a...);
}

/// Operand J of e, materialized (the vjps read operands as tensors).
template <std::size_t J, class E>
auto operand(const E& e) {
  return ::fluxion::detail::materialize(std::get<J>(e.operands));
}

/// Operand J of e materialized, or x where J == I.
template <std::size_t I, std::size_t J, class E, class X>
auto operand_or(const E& e, const X& x) {
  if constexpr (I == J) return x;
  else return operand<J>(e);
}

template <class A>
A add_terms(A a) {
  return a;
}
template <class A, class B>
auto add_terms(A a, B b) {
  if constexpr (std::is_same_v<A, no_term>) return b;
  else if constexpr (std::is_same_v<B, no_term>) return a;
  else return a + b;
}

/// The jvp of an op linear in each operand whose bit is set in Mask: the op with that operand
/// replaced by its tangent. Operands outside Mask have a zero derivative. Like the vjps, the
/// jvps read the other operands as tensors, so derivatives of any order are built from a few
/// node types, whatever expressions the operands were.
template <class Op, unsigned Mask>
struct linear_in {
  template <std::size_t I>
  static constexpr bool has_jvp = (Mask >> I & 1u) != 0;
  template <std::size_t I, class E, class X>
  static auto jvp(const E& e, const X& t) {
    return [&]<std::size_t... J>(std::index_sequence<J...>) {
      return make<Op>(e.geometry, operand_or<I, J>(e, t)...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(e.operands)>>{});
  }
};

/// The rules of an op linear in each of its (one or two) operands: the vjp of operand I is the op
/// Adjoint_I applied to the other operand and to the gradient h, h being Adjoint_I's operand At_I.
/// An Adjoint of `void` marks an operand the op does not vary with.
template <class Op, class Adjoint0, int At0, class Adjoint1 = void, int At1 = 0>
struct adjoint_rule : linear_in<Op, (std::is_void_v<Adjoint0> ? 0u : 1u) | (std::is_void_v<Adjoint1> ? 0u : 2u)> {
  template <std::size_t I, class E, class H>
  static auto vjp(const E& e, const H& h) {
    using Adjoint = std::conditional_t<I == 0, Adjoint0, Adjoint1>;
    if constexpr (std::is_void_v<Adjoint>) return no_term{};
    else if constexpr (std::tuple_size_v<decltype(e.operands)> == 1) return make<Adjoint>(e.geometry, h);
    else if constexpr ((I == 0 ? At0 : At1) == 0) return make<Adjoint>(e.geometry, h, operand<1 - I>(e));
    else return make<Adjoint>(e.geometry, operand<1 - I>(e), h);
  }
};

}  // namespace window_detail

// The table of the linear ops (the header comment spells it out): the op, then for each operand
// the op of its vjp and where the gradient goes among that op's operands.
#define FLUXION_WINDOW_RULE(op, ...) \
  template <>                        \
  struct window_rule<window_ops::op> : window_detail::adjoint_rule<window_ops::op, __VA_ARGS__> {};

FLUXION_WINDOW_RULE(conv2d, window_ops::conv2d_input_gradient, 0, window_ops::conv2d_filter_gradient, 1)
FLUXION_WINDOW_RULE(conv2d_input_gradient, window_ops::conv2d, 0, window_ops::conv2d_filter_gradient, 0)
FLUXION_WINDOW_RULE(conv2d_filter_gradient, window_ops::conv2d_input_gradient, 1, window_ops::conv2d, 1)
FLUXION_WINDOW_RULE(depthwise_conv2d, window_ops::depthwise_conv2d_input_gradient, 0,
                    window_ops::depthwise_conv2d_filter_gradient, 1)
FLUXION_WINDOW_RULE(depthwise_conv2d_input_gradient, window_ops::depthwise_conv2d, 0,
                    window_ops::depthwise_conv2d_filter_gradient, 0)
FLUXION_WINDOW_RULE(depthwise_conv2d_filter_gradient, window_ops::depthwise_conv2d_input_gradient, 1,
                    window_ops::depthwise_conv2d, 1)
FLUXION_WINDOW_RULE(max_pool2d_gradient, void, 0, window_ops::max_pool2d_select, 1)
FLUXION_WINDOW_RULE(max_pool2d_select, void, 0, window_ops::max_pool2d_gradient, 1)
FLUXION_WINDOW_RULE(avg_pool2d, window_ops::avg_pool2d_gradient, 0)
FLUXION_WINDOW_RULE(avg_pool2d_gradient, window_ops::avg_pool2d, 0)

#undef FLUXION_WINDOW_RULE

/// Max pooling is not linear: its vjp routes the gradient through the maximum, and its jvp picks
/// the tangent there.
template <>
struct window_rule<window_ops::max_pool2d> {
  template <std::size_t I, class E, class G>
  static auto vjp(const E& e, const G& g) {
    using namespace window_detail;
    return make<window_ops::max_pool2d_gradient>(e.geometry, operand<0>(e), g);
  }
  template <std::size_t I>
  static constexpr bool has_jvp = true;
  template <std::size_t I, class E, class X>
  static auto jvp(const E& e, const X& t) {
    return window_detail::make<window_ops::max_pool2d_select>(e.geometry, window_detail::operand<0>(e), t);
  }
};

template <class Op, class... A>
struct backward<window_expr<Op, A...>> {
  template <class G, class Sink>
  static void run(const window_expr<Op, A...>& e, const G& g, Sink& sink) {
    const auto gt = reduce_to_ordered(g, e.shape());
    [&]<std::size_t... I>(std::index_sequence<I...>) { (pull<I>(e, gt, sink), ...); }(std::index_sequence_for<A...>{});
  }

 private:
  template <std::size_t I, class G, class Sink>
  static void pull(const window_expr<Op, A...>& e, const G& g, Sink& sink) {
    // No kernel for an operand the sink does not want: a first layer's input gradient, say.
    if (!reads_any(std::get<I>(e.operands), wanted_by(sink))) return;
    const auto v = window_rule<Op>::template vjp<I>(e, g);
    if constexpr (!std::is_same_v<std::remove_const_t<decltype(v)>, window_detail::no_term>) {
      using AI = std::tuple_element_t<I, std::tuple<A...>>;
      backward<AI>::run(std::get<I>(e.operands), step(v), sink);
    }
  }
};

#if FLUXION_FORWARD_MODE
template <class Op, class... A>
struct tangent<window_expr<Op, A...>> {
  template <int K>
  static auto of(const window_expr<Op, A...>& e, const forward_accumulator& acc) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return window_detail::add_terms(term<K, I>(e, acc)...);
    }(std::index_sequence_for<A...>{});
  }

 private:
  template <int K, std::size_t I>
  static auto term(const window_expr<Op, A...>& e, const forward_accumulator& acc) {
    if constexpr (window_rule<Op>::template has_jvp<I>) {
      using AI = std::tuple_element_t<I, std::tuple<A...>>;
      using T = value_type_t<AI>;
      using D = device_t<AI>;
      const auto t = as_order<K>(tensor<T, D>(tstep<K>(tangent_of<K>(std::get<I>(e.operands), acc))));
      return window_rule<Op>::template jvp<I>(e, t);
    } else {
      return window_detail::no_term{};
    }
  }
};

#endif  // FLUXION_FORWARD_MODE

}  // namespace fluxion::autodiff
