// Shape operations that only re-map indices: transpose, expand_dims, squeeze, broadcast_to and
// strided slices. They rewrite the layouts of their operand's leaves, so they cost nothing at run
// time and fuse into the statement around them. reshape shares the buffer of a tensor and
// materializes other expressions first.
//
//   auto y = fx::transpose(x) + b;             // one loop, x read through swapped strides
//   auto z = fx::strided_slice(x, {0, 1}, {fx::end, fx::end}, {2, 1});
//   auto r = fx::reshape(t, {-1, 4});

#include "evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_EXPR_REMAP_HPP
#define FLUXION_EXPR_REMAP_HPP
#pragma once

#include <concepts>
#include <limits>
#include <string>
#include <vector>

#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"

namespace fluxion {

/// Slice bounds that mean "up to the end".
inline constexpr index_t end = std::numeric_limits<index_t>::max();

namespace detail {

/// Applies a map to each leaf of a view (see unit_inner_stride in view.hpp for the named type).
template <class Map>
struct apply_map {
  const Map& map;
  void operator()(leaf_layout& l) const { map.apply(l); }
};

struct permute_map {
  static constexpr const char* name = "transpose";
  int perm[max_rank] = {};
  void apply(leaf_layout& l) const {
    index_t st[max_rank];
    for (int i = 0; i < l.rank; ++i) st[i] = l.strides[perm[i]];
    for (int i = 0; i < l.rank; ++i) l.strides[i] = st[i];
  }
};

struct expand_dims_map {
  static constexpr const char* name = "expand_dims";
  int axis = 0;
  void apply(leaf_layout& l) const {
    for (int i = l.rank; i > axis; --i) l.strides[i] = l.strides[i - 1];
    l.strides[axis] = 0;
    ++l.rank;
  }
};

struct squeeze_map {
  static constexpr const char* name = "squeeze";
  unsigned mask = 0;
  void apply(leaf_layout& l) const {
    int n = 0;
    for (int i = 0; i < l.rank; ++i)
      if (!(mask >> i & 1u)) l.strides[n++] = l.strides[i];
    l.rank = n;
  }
};

struct broadcast_map {
  static constexpr const char* name = "broadcast_to";
  shape from, to;
  void apply(leaf_layout& l) const {
    const int shift = to.rank() - from.rank();
    index_t st[max_rank] = {};
    for (int d = 0; d < from.rank(); ++d) st[d + shift] = from[d] == 1 ? 0 : l.strides[d];
    l.rank = to.rank();
    for (int d = 0; d < to.rank(); ++d) l.strides[d] = st[d];
  }
};

struct slice_map {
  static constexpr const char* name = "strided_slice";
  index_t begin[max_rank] = {};
  index_t step[max_rank] = {};
  void apply(leaf_layout& l) const {
    for (int d = 0; d < l.rank; ++d) {
      l.offset += begin[d] * l.strides[d];
      l.strides[d] *= step[d];
    }
  }
};

/// The diagonal of the last two axes, (..., M, N) -> (..., min(M, N)): one axis whose stride is the
/// sum of theirs, as LibTorch's diagonal view (linalg::diag_part of an expression, which is then
/// computed at the diagonal's positions only).
struct diagonal_map {
  static constexpr const char* name = "diag_part";
  void apply(leaf_layout& l) const {
    l.strides[l.rank - 2] += l.strides[l.rank - 1];
    --l.rank;
  }
};

}  // namespace detail

template <class Map, class A>
struct remap_expr : expression_base {
  using value_type = value_type_t<A>;
  using device_type = device_t<A>;
  using map_type = Map;
  A a;
  Map map;
  fluxion::shape m_shape;

  remap_expr(A a_, Map m, fluxion::shape s) : a(std::move(a_)), map(std::move(m)), m_shape(s) {}
  const fluxion::shape& shape() const { return m_shape; }
  auto make_view() const {
    auto v = a.make_view();
    v.for_each_leaf(detail::apply_map<Map>{map});  // one type per map, not per (map, operand)
    return v;
  }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

/// Permutes axes: result axis i is operand axis perm[i]. Without perm, reverses the axes.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto transpose(A&& a, std::vector<int> perm = {}) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const int r = e.shape().rank();
  if (perm.empty())
    for (int i = r - 1; i >= 0; --i) perm.push_back(i);
  if (static_cast<int>(perm.size()) != r)
    throw invalid_argument("transpose: perm has " + std::to_string(perm.size()) + " entries for shape " +
                           to_string(e.shape()));
  detail::permute_map m;
  unsigned seen = 0;
  fluxion::shape out;
  for (int i = 0; i < r; ++i) {
    const int p = normalize_axis(perm[static_cast<std::size_t>(i)], r, "transpose");
    if (seen >> p & 1u) throw invalid_argument("transpose: axis " + std::to_string(p) + " appears twice in perm");
    seen |= 1u << p;
    m.perm[i] = p;
    out.push_back(e.shape()[p]);
  }
  return remap_expr<detail::permute_map, E>(std::move(e), m, out);
}

/// NumPy's and PyTorch's name for transpose with an explicit order: result axis i is axis perm[i].
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto permute(A&& a, std::vector<int> perm) {
  return transpose(std::forward<A>(a), std::move(perm));
}

/// Inserts an axis of extent 1 at `axis` (negative counts from the end of the result).
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto expand_dims(A&& a, int axis) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const int r = e.shape().rank();
  if (r == max_rank) throw invalid_argument("expand_dims: shape " + to_string(e.shape()) + " already has the maximum rank, " +
                                            std::to_string(max_rank));
  const int ax = normalize_axis(axis, r + 1, "expand_dims");
  fluxion::shape out;
  for (int d = 0; d < ax; ++d) out.push_back(e.shape()[d]);
  out.push_back(1);
  for (int d = ax; d < r; ++d) out.push_back(e.shape()[d]);
  return remap_expr<detail::expand_dims_map, E>(std::move(e), detail::expand_dims_map{ax}, out);
}

/// Removes axes of extent 1: the given ones, or all of them.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto squeeze(A&& a, std::vector<int> which = {}) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const auto& s = e.shape();
  unsigned mask = 0;
  if (which.empty()) {
    for (int d = 0; d < s.rank(); ++d)
      if (s[d] == 1) mask |= 1u << d;
  } else {
    for (int w : which) {
      const int d = normalize_axis(w, s.rank(), "squeeze");
      if (s[d] != 1)
        throw invalid_argument("squeeze: axis " + std::to_string(w) + " of shape " + to_string(s) +
                               " has extent " + std::to_string(s[d]) + ", not 1");
      mask |= 1u << d;
    }
  }
  fluxion::shape out;
  for (int d = 0; d < s.rank(); ++d)
    if (!(mask >> d & 1u)) out.push_back(s[d]);
  return remap_expr<detail::squeeze_map, E>(std::move(e), detail::squeeze_map{mask}, out);
}

/// Broadcasts to `target` by NumPy's rules.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto broadcast_to(A&& a, const shape& target) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  if (broadcast_shapes(e.shape(), target, "broadcast_to") != target || e.shape().rank() > target.rank())
    throw shape_error("broadcast_to: shape " + to_string(e.shape()) + " cannot be broadcast to " + to_string(target));
  detail::broadcast_map m{e.shape(), target};
  return remap_expr<detail::broadcast_map, E>(std::move(e), m, target);
}

/// Python-style strided slice per axis: begin, end (fx::end for "to the end") and step (default
/// 1; negative steps walk backwards). Negative positions count from the end; bounds are clamped.
/// Axes beyond the given lists are taken whole.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto strided_slice(A&& a, const std::vector<index_t>& begin, const std::vector<index_t>& stop,
                   const std::vector<index_t>& steps = {}) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const auto& s = e.shape();
  const std::size_t r = static_cast<std::size_t>(s.rank());
  if (begin.size() > r || stop.size() != begin.size() || (!steps.empty() && steps.size() != begin.size()))
    throw invalid_argument("strided_slice: begin, end and strides have " + std::to_string(begin.size()) + ", " +
                           std::to_string(stop.size()) + " and " + std::to_string(steps.size()) +
                           " entries for shape " + to_string(s));
  detail::slice_map m;
  fluxion::shape out;
  for (std::size_t d = 0; d < r; ++d) {
    const index_t n = s[static_cast<int>(d)];
    index_t b = 0, en = n, st = 1;
    if (d < begin.size()) {
      st = steps.empty() ? 1 : steps[d];
      if (st == 0) throw invalid_argument("strided_slice: step on axis " + std::to_string(d) + " is 0");
      auto clampi = [&](index_t v, bool is_end) {
        if (v == fluxion::end) return st > 0 ? n : index_t(-1);
        if (v < 0) v += n;
        if (st > 0) return std::clamp<index_t>(v, 0, n);
        (void)is_end;
        return std::clamp<index_t>(v, -1, n - 1);
      };
      b = begin[d] == fluxion::end ? (st > 0 ? n : n - 1) : clampi(begin[d], false);
      en = clampi(stop[d], true);
    }
    const index_t len = st > 0 ? (en > b ? (en - b + st - 1) / st : 0) : (b > en ? (b - en - st - 1) / (-st) : 0);
    m.begin[d] = len > 0 ? b : 0;
    m.step[d] = st;
    out.push_back(len);
  }
  return remap_expr<detail::slice_map, E>(std::move(e), m, out);
}

/// TensorFlow's tf.slice: `size[d]` elements from `begin[d]`; size -1 takes the rest.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto slice(A&& a, const std::vector<index_t>& begin, const std::vector<index_t>& size) {
  auto&& e = detail::as_expr<A>(a);  // a temporary for expressions: keep it alive while s is used
  const auto& s = e.shape();
  if (begin.size() != static_cast<std::size_t>(s.rank()) || size.size() != begin.size())
    throw invalid_argument("slice: begin and size need " + std::to_string(s.rank()) + " entries for shape " +
                           to_string(s));
  std::vector<index_t> stop(begin.size());
  for (std::size_t d = 0; d < begin.size(); ++d) {
    const index_t n = s[static_cast<int>(d)];
    const index_t sz = size[d] == -1 ? n - begin[d] : size[d];
    if (begin[d] < 0 || sz < 0 || begin[d] + sz > n)
      throw out_of_range("slice: begin " + std::to_string(begin[d]) + " and size " + std::to_string(size[d]) +
                         " do not fit axis " + std::to_string(d) + " of extent " + std::to_string(n));
    stop[d] = begin[d] + sz;
  }
  return strided_slice(std::forward<A>(a), begin, stop);
}

/// Reverses the order of the elements along each of `axes` (negative counts from the end):
/// tf.reverse. A strided slice with step -1, so it costs nothing at run time.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto reverse(A&& a, const std::vector<int>& axes) {
  auto&& e = detail::as_expr<A>(a);  // a temporary for expressions: keep it alive while its shape is used
  const int r = e.shape().rank();
  std::vector<index_t> begin(static_cast<std::size_t>(r), 0), stop(static_cast<std::size_t>(r), fluxion::end),
      steps(static_cast<std::size_t>(r), 1);
  for (int axis : axes) {
    const auto d = static_cast<std::size_t>(normalize_axis(axis, r, "reverse"));
    if (steps[d] == -1) throw invalid_argument("reverse: axis " + std::to_string(axis) + " is repeated");
    begin[d] = fluxion::end;
    steps[d] = -1;
  }
  return strided_slice(std::forward<A>(a), begin, stop, steps);
}

/// Reverses the order of the elements along one axis. (A template, so that braces, even `{}` or
/// `{0}`, always mean the list of axes above.)
template <class A, std::integral Axis>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto reverse(A&& a, Axis axis) {
  return reverse(std::forward<A>(a), std::vector<int>{static_cast<int>(axis)});
}

namespace detail {
/// The first `count` elements of the last axis at multiples of `stride`,
/// a[..., 0 : (count - 1) * stride + 1 : stride]: a diagonal of axes flattened into the last one
/// (einsum's labels repeated in an operand, any number of times). A strided slice, so a view: no
/// index tensor and no gather forward, a strided pad backward.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto take_every_last(A&& a, index_t count, index_t stride) {
  auto&& e = as_expr<A>(a);  // a temporary for expressions: keep it alive while its shape is used
  const auto r = static_cast<std::size_t>(e.shape().rank());
  std::vector<index_t> begin(r, 0), stop(r, fluxion::end), steps(r, 1);
  stop[r - 1] = count > 0 ? (count - 1) * stride + 1 : 0;
  steps[r - 1] = stride;
  return strided_slice(std::forward<A>(a), begin, stop, steps);
}
}  // namespace detail

/// Reshape; one extent may be -1 and is inferred. Shares the buffer when the operand is a tensor.
template <class A>
struct reshape_expr : detail::boundary_expr<reshape_expr<A>, value_type_t<A>, device_t<A>> {
  A a;
  fluxion::shape m_shape;
  reshape_expr(A a_, fluxion::shape s) : a(std::move(a_)), m_shape(s) {}
  const fluxion::shape& shape() const { return m_shape; }
  tensor<value_type_t<A>, device_t<A>> compute() const {
    if constexpr (requires { a.shared_tensor(); })  // a gradient that is a tensor: no copy (autodiff/order.hpp)
      return {a.shared_tensor(), m_shape, detail::same_buffer};
    else
      return {detail::materialize(a), m_shape, detail::same_buffer};
  }
};

template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto reshape(A&& a, const std::vector<index_t>& dims) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const index_t n = e.shape().size();
  index_t known = 1;
  int infer = -1;
  auto fail = [&] {
    std::string want = "(";
    for (std::size_t i = 0; i < dims.size(); ++i) want += (i ? ", " : "") + std::to_string(dims[i]);
    want += dims.size() == 1 ? ",)" : ")";
    throw shape_error("reshape: cannot reshape a tensor of shape " + to_string(e.shape()) + " (" + std::to_string(n) +
                      " elements) into shape " + want);
  };
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      if (infer >= 0) fail();
      infer = static_cast<int>(i);
    } else if (dims[i] < 0) {
      fail();
    } else {
      known *= dims[i];
    }
  }
  std::vector<index_t> out = dims;
  if (infer >= 0) {
    if (known == 0 || n % known != 0) fail();
    out[static_cast<std::size_t>(infer)] = n / known;
  } else if (known != n) {
    fail();
  }
  return reshape_expr<E>(std::move(e), fluxion::shape(out));
}

/// Repeats `a` multiples[d] times along each axis d: tf.tile. Its gradient sums the copies.
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto tile(A&& a, const std::vector<index_t>& multiples) {
  using E = detail::expr_t<A>;
  E e = detail::as_expr<A>(std::forward<A>(a));
  const fluxion::shape s = e.shape();
  if (static_cast<int>(multiples.size()) != s.rank())
    throw invalid_argument("tile: " + std::to_string(multiples.size()) + " multiples given for shape " + to_string(s) +
                           ", which has " + std::to_string(s.rank()) + " axes");
  if (2 * s.rank() > max_rank)
    throw invalid_argument("tile: shape " + to_string(s) + " has more than " + std::to_string(max_rank / 2) +
                           " axes; tile interleaves a copy axis with each");
  // (1, n0, 1, n1, ...) broadcast to (m0, n0, m1, n1, ...), then merged to (m0 n0, m1 n1, ...).
  std::vector<index_t> interleaved, merged;
  fluxion::shape copies;
  for (int d = 0; d < s.rank(); ++d) {
    const index_t m = multiples[static_cast<std::size_t>(d)];
    if (m < 0)
      throw invalid_argument("tile: multiples[" + std::to_string(d) + "] = " + std::to_string(m) + " is negative");
    interleaved.insert(interleaved.end(), {1, s[d]});
    copies.push_back(m);
    copies.push_back(s[d]);
    merged.push_back(m * s[d]);
  }
  return reshape(broadcast_to(reshape(std::move(e), interleaved), copies), merged);
}

}  // namespace fluxion

namespace fluxion::detail {

/// Undoes a reduction's change of shape: reduced axes (bits of `mask` over the operand's rank)
/// become stride-0 axes, so a reduced gradient broadcasts back over the operand. With keepdims
/// the axes already exist and are only zeroed.
struct unreduce_map {
  static constexpr const char* name = "unreduce";
  unsigned mask = 0;
  bool keep = false;
  int rank = 0;  // the operand's rank
  void apply(leaf_layout& l) const {
    if (keep) {
      for (int d = 0; d < l.rank; ++d)
        if (mask >> d & 1u) l.strides[d] = 0;
      return;
    }
    index_t st[max_rank];
    int j = 0;
    for (int d = 0; d < rank; ++d) st[d] = (mask >> d & 1u) ? 0 : l.strides[j++];
    for (int d = 0; d < rank; ++d) l.strides[d] = st[d];
    l.rank = rank;
  }
};

}  // namespace fluxion::detail

#endif  // FLUXION_EXPR_REMAP_HPP
