// Device-side views: what evaluators walk. Expression nodes (host objects holding tensors) build
// a view tree of raw pointers and affine layouts; the same view runs in an xsimd loop on the CPU
// and inside a Thrust kernel on the GPU.
//
// Every leaf maps iteration coordinates to a position by an affine layout (offset + strides).
// Broadcasting, transposes, strided slices, expand_dims and squeeze only rewrite leaf layouts, so
// they fuse into the surrounding loop for free.
#pragma once

#include <type_traits>

#include "../core/config.hpp"
#include "../core/function_ref.hpp"

namespace fluxion::detail {

struct leaf_layout {
  index_t offset = 0;
  int rank = 0;
  index_t strides[max_rank];  // only [0, rank) is meaningful
  // Row cursor, set by seek(): the position of the current row and the innermost stride.
  index_t base = 0;
  index_t inner = 0;

  // In device code the loops run to max_rank, unrolled, and test the rank inside: arrays indexed
  // by constants stay in registers, where a loop bounded by the run-time rank puts the kernel's
  // coordinates in local memory (measured 20x slower on an H100 for a five-input statement).
  FLUXION_HOST_DEVICE void seek(const index_t* coord, int n_outer) {
    index_t b = offset;
#if defined(__CUDA_ARCH__)
    index_t in = 0;
#pragma unroll
    for (int d = 0; d < max_rank; ++d) {
      if (d < n_outer) b += coord[d] * strides[d];
      if (d == n_outer && d < rank) in = strides[d];
    }
    inner = in;
#else
    for (int d = 0; d < n_outer; ++d) b += coord[d] * strides[d];
    inner = n_outer < rank ? strides[n_outer] : 0;
#endif
    base = b;
  }
  FLUXION_HOST_DEVICE index_t position(const index_t* coord) const {
    index_t p = offset;
#if defined(__CUDA_ARCH__)
    // `break` rather than `if (d < rank)`: the rank is the same in every thread, so the branch
    // skips the axes past it, where a predicated multiply-add per axis is issued for all eight.
#pragma unroll
    for (int d = 0; d < max_rank; ++d) {
      if (d >= rank) break;
      p += coord[d] * strides[d];
    }
#else
    for (int d = 0; d < rank; ++d) p += coord[d] * strides[d];
#endif
    return p;
  }
};

/// What for_each_leaf calls on every leaf layout of a view. One type for every caller, so each
/// view type's for_each_leaf is one function; with the callers' lambdas as template arguments (each
/// a new type per kernel instantiation) every (view, caller) pair made one (1700 of binary_view's
/// alone in tests/losses.test.cpp). The calls are per statement, outside the element loops.
using leaf_function = function_ref<void(leaf_layout&)>;

// What the callers of for_each_leaf do to each leaf, as named types. A lambda inside a function
// template is a new type, and so a new leaf_function constructor and call, for every view type it
// is instantiated with (1183 such lambdas in the elementwise composition matrix's test); these
// are compiled once.

/// Clears `contiguous` unless every leaf's row cursor steps by one element.
struct unit_inner_stride {
  bool& contiguous;
  void operator()(const leaf_layout& l) const { contiguous = contiguous && l.inner == 1; }
};

/// Reads memory.
template <class T>
struct leaf_view : leaf_layout {
  using value_type = T;
  const T* data = nullptr;

  FLUXION_HOST_DEVICE T row(index_t j) const { return data[base + j * inner]; }
  FLUXION_HOST_DEVICE T at(const index_t* coord) const { return data[position(coord)]; }
  void for_each_leaf(leaf_function f) {
    f(static_cast<leaf_layout&>(*this));
  }
};

/// Yields its own position as the value: coordinates along an axis, for one_hot and friends.
template <class T>
struct iota_view : leaf_layout {
  using value_type = T;

  FLUXION_HOST_DEVICE T row(index_t j) const { return static_cast<T>(base + j * inner); }
  FLUXION_HOST_DEVICE T at(const index_t* coord) const { return static_cast<T>(position(coord)); }
  void for_each_leaf(leaf_function f) {
    f(static_cast<leaf_layout&>(*this));
  }
};

/// A constant.
template <class T>
struct scalar_view {
  using value_type = T;
  T value;

  FLUXION_HOST_DEVICE void seek(const index_t*, int) {}
  FLUXION_HOST_DEVICE T row(index_t) const { return value; }
  FLUXION_HOST_DEVICE T at(const index_t*) const { return value; }
  void for_each_leaf(leaf_function) {}
};

template <class Op, class A>
struct unary_view {
  using value_type = decltype(Op::apply(typename A::value_type{}));
  A a;

  FLUXION_HOST_DEVICE void seek(const index_t* c, int n) { a.seek(c, n); }
  FLUXION_HOST_DEVICE value_type row(index_t j) const { return Op::apply(a.row(j)); }
  FLUXION_HOST_DEVICE value_type at(const index_t* c) const { return Op::apply(a.at(c)); }
  void for_each_leaf(leaf_function f) {
    a.for_each_leaf(f);
  }
};

template <class Op, class A, class B>
struct binary_view {
  using value_type = decltype(Op::apply(typename A::value_type{}, typename B::value_type{}));
  A a;
  B b;

  FLUXION_HOST_DEVICE void seek(const index_t* c, int n) {
    a.seek(c, n);
    b.seek(c, n);
  }
  FLUXION_HOST_DEVICE value_type row(index_t j) const { return Op::apply(a.row(j), b.row(j)); }
  FLUXION_HOST_DEVICE value_type at(const index_t* c) const { return Op::apply(a.at(c), b.at(c)); }
  void for_each_leaf(leaf_function f) {
    a.for_each_leaf(f);
    b.for_each_leaf(f);
  }
};

template <class Op, class A, class B, class C>
struct ternary_view {
  using value_type =
      decltype(Op::apply(typename A::value_type{}, typename B::value_type{}, typename C::value_type{}));
  A a;
  B b;
  C c;

  FLUXION_HOST_DEVICE void seek(const index_t* co, int n) {
    a.seek(co, n);
    b.seek(co, n);
    c.seek(co, n);
  }
  FLUXION_HOST_DEVICE value_type row(index_t j) const { return Op::apply(a.row(j), b.row(j), c.row(j)); }
  FLUXION_HOST_DEVICE value_type at(const index_t* co) const { return Op::apply(a.at(co), b.at(co), c.at(co)); }
  void for_each_leaf(leaf_function f) {
    a.for_each_leaf(f);
    b.for_each_leaf(f);
    c.for_each_leaf(f);
  }
};

}  // namespace fluxion::detail

namespace fluxion::detail {

/// gather: reads data at an address whose `axis` part comes from an index view. The index
/// operand was range-checked when the node was built, on the cpu; on a device the check may still
/// be queued (backend/cuda/checks.hpp), so an index is clamped to [0, extent) and a bad one never
/// reads outside data.
template <class T, class I>
struct gather_view : leaf_layout {
  using value_type = T;
  const T* data = nullptr;
  index_t axis_stride = 0;
  index_t extent = 0;  // of the gathered axis
  leaf_view<I> index;

  FLUXION_HOST_DEVICE void seek(const index_t* c, int n) {
    leaf_layout::seek(c, n);
    index.seek(c, n);
  }
  FLUXION_HOST_DEVICE T row(index_t j) const { return data[base + j * inner + clamped(index.row(j)) * axis_stride]; }
  FLUXION_HOST_DEVICE T at(const index_t* c) const { return data[position(c) + clamped(index.at(c)) * axis_stride]; }
  FLUXION_HOST_DEVICE index_t clamped(I i) const {
    const index_t k = static_cast<index_t>(i);
    return k < 0 ? 0 : k >= extent ? extent - 1 : k;
  }
  void for_each_leaf(leaf_function f) {
    f(static_cast<leaf_layout&>(*this));
    index.for_each_leaf(f);
  }
};

}  // namespace fluxion::detail
