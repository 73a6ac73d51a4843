// Enumerating the tensors an expression reads, for the tape and the forward accumulator.
#pragma once

#include <cstdint>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
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

template <class E, class Pred>
bool reads_any(const E& e, Pred&& tracked) {
  bool hit = false;
  leaves<E>::visit(e, [&](const auto& t) { hit = hit || tracked(t.id()); });
  return hit;
}

}  // namespace fluxion::autodiff
