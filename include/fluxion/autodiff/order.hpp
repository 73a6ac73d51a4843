// Derivative order in the type system.
//
// A recorded statement's backward function is instantiated from the statement's type, and the
// gradient expressions it builds are materialized, recorded and differentiated in turn (that is
// how higher derivatives work). Left alone, that would instantiate backward functions for ever
// new expression types at compile time. So every gradient or tangent a backward or forward pass
// builds is wrapped in grad_expr<K, G>, a transparent node whose type carries the derivative
// order K; statements of order FLUXION_MAX_DERIVATIVE_ORDER are still evaluated but record no
// backward function of their own. Asking for a higher derivative then throws at run time.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_ORDER_HPP
#define FLUXION_AUTODIFF_ORDER_HPP
#pragma once

#include <algorithm>
#include <string>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../expr/scan.hpp"

namespace fluxion {

/// A gradient or tangent of order K: evaluates exactly as G.
template <int K, class G>
struct grad_expr : expression_base {
  using value_type = value_type_t<G>;
  using device_type = device_t<G>;
  G g;
  explicit grad_expr(G g_) : g(std::move(g_)) {}
  decltype(auto) shape() const { return g.shape(); }
  /// The tensor a gradient of a tensor is, for a boundary that would otherwise copy it to read it
  /// (reshape_expr: a reshape's backward pass, and every flatten's, shares the gradient's buffer).
  const G& shared_tensor() const
    requires is_tensor_v<G>
  {
    return g;
  }
  auto make_view() const { return g.make_view(); }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

namespace autodiff {

template <class E>
struct order_of : std::integral_constant<int, 0> {};
template <int K, class G>
struct order_of<grad_expr<K, G>> : std::integral_constant<int, std::max(K, order_of<G>::value)> {};
template <class Op, class A>
struct order_of<unary_expr<Op, A>> : order_of<A> {};
template <class Op, class A, class B>
struct order_of<binary_expr<Op, A, B>> : std::integral_constant<int, std::max(order_of<A>::value, order_of<B>::value)> {};
template <class Op, class A, class B, class C>
struct order_of<ternary_expr<Op, A, B, C>>
    : std::integral_constant<int, std::max({order_of<A>::value, order_of<B>::value, order_of<C>::value})> {};
template <class Map, class A>
struct order_of<remap_expr<Map, A>> : order_of<A> {};
template <class A>
struct order_of<reshape_expr<A>> : order_of<A> {};
template <class Op, class A>
struct order_of<reduce_expr<Op, A>> : order_of<A> {};
template <class A, class B>
struct order_of<matmul_expr<A, B>> : std::integral_constant<int, std::max(order_of<A>::value, order_of<B>::value)> {};
template <class A>
struct order_of<pad_expr<A>> : order_of<A> {};
template <class A>
struct order_of<cumsum_expr<A>> : order_of<A> {};

template <class E>
inline constexpr int order_v = order_of<std::remove_cvref_t<E>>::value;

/// Throws the error for a derivative above the program's FLUXION_MAX_DERIVATIVE_ORDER (max_order,
/// passed in: translation units may differ in it), saying how to raise it. One function, so that
/// the message is not compiled into every statement's backward function.
#if FLUXION_CORE_DEFINITIONS
[[noreturn]] FLUXION_CORE_INLINE void throw_order_exceeded(const char* who, int max_order) {
  const std::string next = std::to_string(max_order + 1);
  throw error(std::string(who) + ": a derivative of order above " + std::to_string(max_order) +
              " was requested; define FLUXION_MAX_DERIVATIVE_ORDER to " + next +
              " or more in the translation units that write the statements being differentiated (`#define` it "
              "before including fluxion, or "
              "target_compile_definitions(app PRIVATE FLUXION_MAX_DERIVATIVE_ORDER=" + next + ") in CMake)");
}
#else
[[noreturn]] void throw_order_exceeded(const char* who, int max_order);
#endif

/// Wraps g as a derivative of order K.
template <int K, class G>
grad_expr<K, std::remove_cvref_t<G>> as_order(G&& g) {
  return grad_expr<K, std::remove_cvref_t<G>>(std::forward<G>(g));
}

}  // namespace autodiff
}  // namespace fluxion

#endif  // FLUXION_AUTODIFF_ORDER_HPP
