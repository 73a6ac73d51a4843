// Enumerating the tensors an expression reads, for the tape and the forward accumulator.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_LEAVES_HPP
#define FLUXION_AUTODIFF_LEAVES_HPP
#pragma once

#include <cstdint>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../core/function_ref.hpp"
#include "order.hpp"

namespace fluxion::autodiff {

/// Calls f(tensor) for each tensor leaf an expression reads (through boundary nodes too).
template <class E>
struct leaves {
  template <class F>
  static void visit(const E&, F&&) {}
};
template <int K, class G>
struct leaves<grad_expr<K, G>> {
  template <class F>
  static void visit(const grad_expr<K, G>& e, F&& f) {
    leaves<G>::visit(e.g, f);
  }
};
template <class T, class D>
struct leaves<tensor<T, D>> {
  template <class F>
  static void visit(const tensor<T, D>& t, F&& f) {
    f(t);
  }
};
template <class Op, class A>
struct leaves<unary_expr<Op, A>> {
  template <class F>
  static void visit(const unary_expr<Op, A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};
template <class Op, class A, class B>
struct leaves<binary_expr<Op, A, B>> {
  template <class F>
  static void visit(const binary_expr<Op, A, B>& e, F&& f) {
    leaves<A>::visit(e.a, f);
    leaves<B>::visit(e.b, f);
  }
};
template <class Op, class A, class B, class C>
struct leaves<ternary_expr<Op, A, B, C>> {
  template <class F>
  static void visit(const ternary_expr<Op, A, B, C>& e, F&& f) {
    leaves<B>::visit(e.b, f);
    leaves<C>::visit(e.c, f);
  }
};
template <class Map, class A>
struct leaves<remap_expr<Map, A>> {
  template <class F>
  static void visit(const remap_expr<Map, A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};
template <class A>
struct leaves<reshape_expr<A>> {
  template <class F>
  static void visit(const reshape_expr<A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};
template <class Op, class A>
struct leaves<reduce_expr<Op, A>> {
  template <class F>
  static void visit(const reduce_expr<Op, A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};
template <class A, class B>
struct leaves<matmul_expr<A, B>> {
  template <class F>
  static void visit(const matmul_expr<A, B>& e, F&& f) {
    leaves<A>::visit(e.a, f);
    leaves<B>::visit(e.b, f);
  }
};
template <class T, class I, class D>
struct leaves<gather_expr<T, I, D>> {
  template <class F>
  static void visit(const gather_expr<T, I, D>& e, F&& f) {
    f(e.params);
  }
};
template <class T, class I, class D>
struct leaves<segment_sum_expr<T, I, D>> {
  template <class F>
  static void visit(const segment_sum_expr<T, I, D>& e, F&& f) {
    f(e.data);
  }
};
template <class T, class D>
struct leaves<concat_expr<T, D>> {
  template <class F>
  static void visit(const concat_expr<T, D>& e, F&& f) {
    for (const auto& p : e.parts) f(p);
  }
};
template <class A>
struct leaves<pad_expr<A>> {
  template <class F>
  static void visit(const pad_expr<A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};
template <class A>
struct leaves<cumsum_expr<A>> {
  template <class F>
  static void visit(const cumsum_expr<A>& e, F&& f) {
    leaves<A>::visit(e.a, f);
  }
};

/// reads_any's visitor: one type for every expression and predicate. A lambda here would be a new
/// type for each (expression, predicate) pair, and each would instantiate leaves<N>::visit anew for
/// every node N below the root (6800 such functions in tests/losses.test.cpp); with one visitor
/// type, each node type's visit is instantiated once and shared by every root that contains it.
struct any_leaf_visitor {
  detail::function_ref<bool(std::uint64_t)> tracked;
  bool hit = false;
  template <class T, class D>
  void operator()(const tensor<T, D>& t) {
    hit = hit || tracked(t.id());
  }
};

/// A predicate on ids that calls a member of an object: `(owner.*Test)(id)`. Named types keep the
/// predicate's call function to one per kind of owner; a lambda at the call site is a new type for
/// every expression type the calling template is instantiated with.
template <class Owner, auto Test>
struct member_test {
  const Owner& owner;
  bool operator()(std::uint64_t id) const { return (owner.*Test)(id); }
};
/// Whether the sink wants a gradient for the tensor `id` (a predicate for reads_any).
template <class Sink>
member_test<Sink, &Sink::wants> wanted_by(const Sink& sink) {
  return {sink};
}

/// Whether any tensor e reads has an id for which tracked(id) is true.
template <class E>
bool reads_any(const E& e, detail::function_ref<bool(std::uint64_t)> tracked) {
  any_leaf_visitor visitor{tracked};
  leaves<E>::visit(e, visitor);
  return visitor.hit;
}

}  // namespace fluxion::autodiff

#endif  // FLUXION_AUTODIFF_LEAVES_HPP
