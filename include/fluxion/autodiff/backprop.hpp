// Reverse mode from types: backward<E>::run(e, g, sink) pushes the gradient expression `g`
// (the gradient of some scalar with respect to e's value) down e's expression tree using the rule
// table, and hands each leaf tensor its gradient expression through `sink.leaf(t, g)`.
//
// Through elementwise nodes the gradient stays an expression in the broadcast space of the
// statement, so a whole backward statement fuses into one kernel per leaf; it is summed down to a
// leaf's shape only at the leaf (or at a shape-changing node). Kernel boundaries (reductions,
// matmul, gather, concat, pad, reshape) materialize the gradient they receive and emit new
// expressions for their operands.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_BACKPROP_HPP
#define FLUXION_AUTODIFF_BACKPROP_HPP
#pragma once

#include <type_traits>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../expr/scan.hpp"
#include "leaves.hpp"
#include "order.hpp"
#include "rules.hpp"

namespace fluxion {

/// What gradient_tape::gradient and forward_accumulator::jvp return for a source or tensor that does
/// not depend on what is watched: tensor::none() (TensorFlow's None), or zeros of its shape.
enum class unconnected_gradients { none, zero };

}  // namespace fluxion

namespace fluxion::autodiff {

template <class E>
inline constexpr bool differentiable_v = std::is_floating_point_v<value_type_t<E>>;

/// Past first order, gradients are materialized at every node instead of flowing as one fused
/// expression: the statements of a backward pass of a backward pass then have a bounded set of
/// types, which keeps the compile time of higher derivatives in check (autodiff/order.hpp).
template <class E>
inline constexpr bool is_materialized_v = is_tensor_v<E>;
template <int K, class T, class D>
inline constexpr bool is_materialized_v<grad_expr<K, tensor<T, D>>> = true;

/// A tensor computed from gradient `G`, re-wrapped with G's derivative order (autodiff/order.hpp).
template <class G, class T, class D>
auto keep_order(tensor<T, D> t) {
  if constexpr (order_v<G> > 0) return as_order<order_v<G>>(std::move(t));
  else return t;
}

/// How a gradient of shape `s` sums down to `target`: the axes to sum and whether to keep them.
/// The same for every gradient type, so compiled once rather than inside each reduce_to<G>.
struct reduction_to_shape {
  std::vector<int> axes;
  bool keep = false;
};
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_NOINLINE reduction_to_shape plan_reduce_to(const shape& s, const shape& target) {
  if (broadcast_shapes(s, target, "gradient") != s)
    throw shape_error("gradient: a gradient of shape " + to_string(s) + " cannot be reduced to shape " +
                      to_string(target));
  reduction_to_shape plan;
  shape dropped;  // the reduction's shape without keepdims
  const int shift = s.rank() - target.rank();
  for (int d = 0; d < s.rank(); ++d) {
    if (d < shift || (target[d - shift] == 1 && s[d] != 1)) plan.axes.push_back(d);
    else dropped.push_back(s[d]);
  }
  plan.keep = dropped != target;
  return plan;
}
#else
reduction_to_shape plan_reduce_to(const shape& s, const shape& target);
#endif

/// Whether gradient expression G is a kernel boundary (possibly wrapped with its derivative order).
template <class G>
inline constexpr bool is_boundary_gradient_v = detail::is_boundary_v<G>;
template <int K, class G>
inline constexpr bool is_boundary_gradient_v<grad_expr<K, G>> = detail::is_boundary_v<G>;

/// Sums `g` (whose shape `target` broadcasts to) down to `target`.
template <class G>
tensor<value_type_t<G>, device_t<G>> reduce_to(const G& g, const shape& target) {
  using T = value_type_t<G>;
  using D = device_t<G>;
  const shape& s = g.shape();
  if constexpr (!is_materialized_v<G> && is_boundary_gradient_v<G>) {
    // A kernel boundary (a matmul's gradient product) is computed into a tensor either way. Summing
    // that tensor, rather than reducing the boundary expression, shares one statement type (with its
    // kernel, recording and backward function) among all of a program's gradients: a matmul no
    // longer instantiates a reduction per transpose case and operand (issue 10).
    // Elementwise gradients stay one fused reduction: computing them into a tensor first as well
    // cut the MLP program's compile time by a further 14-16%, but made a RevNet training step 10-21%
    // slower (batch norm's broadcast parameters each pay a pass over an activation-sized tensor;
    // bench/RESULTS-compile.md).
    tensor<T, D> full(g);
    if (s == target) return full;
    return reduce_to(keep_order<G>(std::move(full)), target);
  } else {
    if (s == target) {
      // A materialized gradient passes as it is (shared, not copied: its buffer is never written in
      // place while anything else holds it, see gradient_store::add).
      if constexpr (is_tensor_v<G>) return g;
      else if constexpr (is_materialized_v<G>) return g.g;
      else return tensor<T, D>(g);
    }
    // The result must be a tensor that the tapes and accumulators alive saw being computed from g,
    // so that higher derivatives pass through it: the reduction itself when its shape is the
    // target's, else a recorded reshape of it (a reshape sharing r's buffer under a new id that
    // no tape tracks would cut the gradient of a gradient off here).
    const reduction_to_shape plan = plan_reduce_to(s, target);
    tensor<T, D> r = reduce_sum(g, plan.axes, plan.keep);
    if (r.shape() == target) return r;
    return tensor<T, D>(reshape_expr<tensor<T, D>>(std::move(r), target));
  }
}

/// The gradient of a reduction's operand before any scaling: `g` broadcast back over the
/// reduced axes.
template <class G>
auto unreduce(const G& g, unsigned mask, bool keep, const shape& operand) {
  return remap_expr<detail::unreduce_map, G>(g, detail::unreduce_map{mask, keep, operand.rank()}, operand);
}

template <class E>
struct backward {
  // Leaves without gradients: scalars, iotas, argmax/argmin, and anything not floating point.
  template <class G, class Sink>
  static void run(const E&, const G&, Sink&) {}
};

template <class G>
decltype(auto) step(G&& g) {
  using E = std::remove_cvref_t<G>;
  if constexpr (order_v<E> >= 2 && !is_materialized_v<E>)
    return as_order<order_v<E>>(tensor<value_type_t<E>, device_t<E>>(g));
  else
    return std::forward<G>(g);
}

/// reduce_to that keeps the gradient's derivative order.
template <class G>
auto reduce_to_ordered(const G& g, const shape& target) {
  return keep_order<G>(reduce_to(g, target));
}

/// Whether a sink asks for gradients to stay fused through reductions (graph mode's) rather than be
/// materialized there (the tape's, see backward<reduce_expr>).
template <class Sink>
inline constexpr bool fuses_reductions_v = requires { Sink::fuses_reductions; };

/// Calls f(x) with `g` itself when it already has `s`'s shape, else with it summed down to `s`.
template <class G, class F>
void with_shape(const G& g, const shape& s, F&& f) {
  if (g.shape() == s) f(g);
  else f(reduce_to_ordered(g, s));
}

template <int K, class G0>
struct backward<grad_expr<K, G0>> {
  template <class G, class Sink>
  static void run(const grad_expr<K, G0>& e, const G& g, Sink& sink) {
    backward<G0>::run(e.g, step(g), sink);
  }
};

template <class T, class D>
struct backward<tensor<T, D>> {
  template <class G, class Sink>
  static void run(const tensor<T, D>& t, const G& g, Sink& sink) {
    if constexpr (std::is_floating_point_v<T>) sink.leaf(t, g);
  }
};

template <class Op, class A>
struct backward<unary_expr<Op, A>> {
  template <class G, class Sink>
  static void run(const unary_expr<Op, A>& e, const G& g, Sink& sink) {
    if constexpr (rule<Op>::differentiable && differentiable_v<A>)
      backward<A>::run(e.a, step(rule<Op>::vjp(e.a, g)), sink);
  }
};

template <class Op, class A, class B>
struct backward<binary_expr<Op, A, B>> {
  template <class G, class Sink>
  static void run(const binary_expr<Op, A, B>& e, const G& g, Sink& sink) {
    if constexpr (rule<Op>::differentiable) {
      // x + b with x a kernel boundary (conv2d, matmul) that materializes its gradient anyway and b
      // broadcast (a bias): materialize the gradient once, so that b's reduction to its shape reads
      // a tensor instead of recomputing the whole gradient expression through a broadcast (the bias
      // gradient of a conv2d + relu layer: 5.3 ms -> under 1 ms at (64, 28, 28, 32)).
      constexpr bool shared = (std::is_same_v<Op, ops::add> || std::is_same_v<Op, ops::subtract>) &&
                              differentiable_v<A> && differentiable_v<B> && (detail::is_boundary_v<A> || detail::is_boundary_v<B>) &&
                              !is_materialized_v<G> && !fuses_reductions_v<Sink>;
      if constexpr (shared) {
        run_sides(e, keep_order<G>(detail::materialize(g)), sink);
      } else {
        run_sides(e, g, sink);
      }
    }
  }

 private:
  template <class G, class Sink>
  static void run_sides(const binary_expr<Op, A, B>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) backward<A>::run(e.a, step(rule<Op>::vjp_a(e.a, e.b, g)), sink);
    if constexpr (differentiable_v<B>) backward<B>::run(e.b, step(rule<Op>::vjp_b(e.a, e.b, g)), sink);
  }
};

template <class C, class A, class B>
struct backward<ternary_expr<ops::where, C, A, B>> {
  template <class G, class Sink>
  static void run(const ternary_expr<ops::where, C, A, B>& e, const G& g, Sink& sink) {
    using T = value_type_t<G>;
    if constexpr (differentiable_v<A>) backward<A>::run(e.b, step(where(e.a, g, T(0))), sink);
    if constexpr (differentiable_v<B>) backward<B>::run(e.c, step(where(e.a, T(0), g)), sink);
  }
};

template <class Map, class A>
struct backward<remap_expr<Map, A>> {
  template <class G, class Sink>
  static void run(const remap_expr<Map, A>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) with_shape(g, e.shape(), [&](const auto& gg) { pull(e, gg, sink); });
  }

 private:
  template <class G, class Sink>
  static void pull(const remap_expr<Map, A>& e, const G& g, Sink& sink) {
    const shape& as = e.a.shape();
    if constexpr (std::is_same_v<Map, detail::permute_map>) {
      detail::permute_map inv;
      for (int i = 0; i < as.rank(); ++i) inv.perm[e.map.perm[i]] = i;
      backward<A>::run(e.a, step(remap_expr<detail::permute_map, G>(g, inv, as)), sink);
    } else if constexpr (std::is_same_v<Map, detail::expand_dims_map>) {
      backward<A>::run(e.a, step(remap_expr<detail::squeeze_map, G>(g, detail::squeeze_map{1u << e.map.axis}, as)), sink);
    } else if constexpr (std::is_same_v<Map, detail::squeeze_map>) {
      backward<A>::run(e.a, step(unreduce(g, e.map.mask, false, as)), sink);
    } else if constexpr (std::is_same_v<Map, detail::broadcast_map>) {
      backward<A>::run(e.a, step(reduce_to_ordered(g, as)), sink);
    } else if constexpr (std::is_same_v<Map, detail::slice_map>) {
      // Scatter the gradient into zeros at the sliced positions: a strided pad, itself differentiable.
      using T = value_type_t<G>;
      std::vector<std::pair<index_t, index_t>> pads;
      std::vector<index_t> steps;
      for (int d = 0; d < as.rank(); ++d) {
        const index_t n = e.shape()[d], st = e.map.step[d];
        const index_t lo = n > 0 ? std::min(e.map.begin[d], e.map.begin[d] + (n - 1) * st) : 0;
        pads.emplace_back(lo, as[d] - lo - (n > 0 ? (n - 1) * (st < 0 ? -st : st) + 1 : 0));
        steps.push_back(st);
      }
      pad_expr<G> scattered(g, std::move(pads), T(0), as, std::move(steps));
      // A slice of a leaf (a recurrent network's step of a projected sequence, a gate of a fused
      // pre-activation): the tape adds the slice's gradient into that region of the leaf's
      // gradient in place, instead of adding a whole leaf-sized tensor of mostly zeros per slice.
      if constexpr (is_tensor_v<A> && requires { sink.add_scattered(e.a, scattered); })
        if (sink.add_scattered(e.a, scattered)) return;
      backward<A>::run(e.a, step(keep_order<G>(detail::materialize(scattered))), sink);
    } else if constexpr (std::is_same_v<Map, detail::diagonal_map>) {
      // g on a diagonal of zeros, as linalg::set_diag composes it.
      backward<A>::run(e.a, step(detail::on_diagonal<device_t<G>>(g, as, value_type_t<G>(0))), sink);
    } else if constexpr (std::is_same_v<Map, detail::unreduce_map>) {  // appears in gradients of gradients
      std::vector<int> ax;
      for (int d = 0; d < e.map.rank; ++d)
        if (e.map.mask >> d & 1u) ax.push_back(d);
      backward<A>::run(e.a, step(reduce_sum(g, ax, e.map.keep)), sink);
    } else {
      static_assert(sizeof(Map) == 0, "fluxion::autodiff: no gradient rule for this remap.");
    }
  }
};

template <class A>
struct backward<reshape_expr<A>> {
  template <class G, class Sink>
  static void run(const reshape_expr<A>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) {
      const auto gt = reduce_to_ordered(g, e.shape());
      backward<A>::run(e.a, step(reshape_expr<std::remove_const_t<decltype(gt)>>(gt, e.a.shape())), sink);
    }
  }
};

template <class RedOp, class A>
struct backward<reduce_expr<RedOp, A>> {
  template <class G, class Sink>
  static void run(const reduce_expr<RedOp, A>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A> && !std::is_same_v<RedOp, ops::reduce_all> &&
                  !std::is_same_v<RedOp, ops::reduce_any>)
    {
      // A gradient that is already a tensor is passed on as it is. Another (a reduction inside an
      // elementwise statement, as in logsumexp) is materialized, so that pull() is instantiated
      // for one gradient type rather than two (as is, or summed down to the reduction's shape),
      // which roughly halves what the operand's subtree instantiates. Graph mode's sink keeps the
      // gradient fused instead: there, allocating only the result matters more.
      if constexpr (is_materialized_v<G> || fuses_reductions_v<Sink>)
        with_shape(g, e.shape(), [&](const auto& gg) { pull(e, gg, sink); });
      else
        pull(e, reduce_to_ordered(g, e.shape()), sink);
    }
  }

 private:
  template <class G, class Sink>
  static void pull(const reduce_expr<RedOp, A>& e, const G& g, Sink& sink) {
    using T = value_type_t<A>;
    const shape& as = e.a.shape();
    auto up = unreduce(g, e.mask, e.keep, as);
    if constexpr (std::is_same_v<RedOp, ops::reduce_sum>) {
      backward<A>::run(e.a, step(up), sink);
    } else if constexpr (std::is_same_v<RedOp, ops::reduce_mean>) {
      const index_t n = e.shape().size() == 0 ? 0 : as.size() / e.shape().size();
      if (n > 0) backward<A>::run(e.a, step(up / T(static_cast<T>(n))), sink);
    } else if constexpr (std::is_same_v<RedOp, ops::reduce_prod>) {
      // d prod / d x_i = prod / x_i; an operand containing zeros gives non-finite gradients.
      backward<A>::run(e.a, step(up * unreduce(e.eval(), e.mask, e.keep, as) / e.a), sink);
    } else {  // max, min: split the gradient equally among the tied extremes, as TensorFlow does
      const auto ext = unreduce(e.eval(), e.mask, e.keep, as);
      const tensor<T, device_t<A>> count = reduce_sum(cast<T>(e.a == ext), axes_of(e.mask, as.rank()), e.keep);
      backward<A>::run(e.a, step(where(e.a == ext, up / unreduce(count, e.mask, e.keep, as), T(0))), sink);
    }
  }
  static std::vector<int> axes_of(unsigned mask, int rank) {
    std::vector<int> ax;
    for (int d = 0; d < rank; ++d)
      if (mask >> d & 1u) ax.push_back(d);
    return ax;
  }
};

template <class A, class B>
struct backward<matmul_expr<A, B>> {
  template <class G, class Sink>
  static void run(const matmul_expr<A, B>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) {
      const auto gt = reduce_to_ordered(g, e.shape());
      const auto a = detail::materialize(e.a);
      const auto b = detail::materialize(e.b);
      const bool ta = e.opt.transpose_a, tb = e.opt.transpose_b;
      // An operand that reads nothing the sink wants (the data X of X * w) gets no product: it would
      // be a whole extra GEMM, discarded at the leaf.
      auto wanted = [&](const auto& operand) {
        return reads_any(operand, wanted_by(sink));
      };
      const bool need_a = wanted(e.a), need_b = wanted(e.b);
      // TensorFlow's MatMulGrad, for each combination of transposes.
      if (!ta && !tb) {
        if (need_a) backward<A>::run(e.a, step(reduce_to_ordered(matmul(gt, b, transpose_b), e.a.shape())), sink);
        if (need_b) backward<B>::run(e.b, step(reduce_to_ordered(matmul(a, gt, transpose_a), e.b.shape())), sink);
      } else if (!ta && tb) {
        if (need_a) backward<A>::run(e.a, step(reduce_to_ordered(matmul(gt, b), e.a.shape())), sink);
        if (need_b) backward<B>::run(e.b, step(reduce_to_ordered(matmul(gt, a, transpose_a), e.b.shape())), sink);
      } else if (ta && !tb) {
        if (need_a) backward<A>::run(e.a, step(reduce_to_ordered(matmul(b, gt, transpose_b), e.a.shape())), sink);
        if (need_b) backward<B>::run(e.b, step(reduce_to_ordered(matmul(a, gt), e.b.shape())), sink);
      } else {
        if (need_a) backward<A>::run(e.a, step(reduce_to_ordered(matmul(b, gt, transpose_ab), e.a.shape())), sink);
        if (need_b) backward<B>::run(e.b, step(reduce_to_ordered(matmul(gt, a, transpose_ab), e.b.shape())), sink);
      }
    }
  }
};

using ::fluxion::detail::scatter_add;

template <class T, class I, class D>
struct backward<gather_expr<T, I, D>> {
  template <class G, class Sink>
  static void run(const gather_expr<T, I, D>& e, const G& g, Sink& sink) {
    // A recorded node (not scatter_add's kernel alone), so that an outer tape differentiates it.
    if constexpr (std::is_floating_point_v<T>)
      sink.leaf(e.params, keep_order<G>(tensor<T, D>(segment_sum_expr<T, I, D>(
                              tensor<T, D>(reduce_to(g, e.shape())),
                              tensor<I, D>(e.indices, fluxion::shape{e.indices.size()}, fluxion::detail::same_buffer), e.params.shape(), e.axis))));
  }
};

/// The adjoint of a segment sum: each position reads its segment's gradient row (a gather).
template <class T, class I, class D>
struct backward<segment_sum_expr<T, I, D>> {
  template <class G, class Sink>
  static void run(const segment_sum_expr<T, I, D>& e, const G& g, Sink& sink) {
    if constexpr (std::is_floating_point_v<T>) {
      const tensor<T, D> gt = reduce_to(g, e.shape());
      const auto& ds = e.data.shape();
      sink.leaf(e.data, keep_order<G>(tensor<T, D>(reshape(gather(gt, e.ids, e.axis, fluxion::detail::checked_indices),
                                                           std::vector<index_t>(ds.begin(), ds.end())))));
    }
  }
};

template <class T, class D>
struct backward<concat_expr<T, D>> {
  template <class G, class Sink>
  static void run(const concat_expr<T, D>& e, const G& g, Sink& sink) {
    if constexpr (std::is_floating_point_v<T>) {
      const auto gt = reduce_to_ordered(g, e.shape());
      const int r = e.shape().rank();
      index_t start = 0;
      for (const auto& p : e.parts) {
        std::vector<index_t> b(static_cast<std::size_t>(r), 0), en(static_cast<std::size_t>(r), fluxion::end);
        const index_t len = e.stacked ? 1 : p.shape()[e.axis];
        b[static_cast<std::size_t>(e.axis)] = start;
        en[static_cast<std::size_t>(e.axis)] = start + len;
        if (e.stacked) sink.leaf(p, squeeze(strided_slice(gt, b, en), {e.axis}));
        else sink.leaf(p, strided_slice(gt, b, en));
        start += len;
      }
    }
  }
};

template <class A>
struct backward<pad_expr<A>> {
  template <class G, class Sink>
  static void run(const pad_expr<A>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) {
      const auto gt = reduce_to_ordered(g, e.shape());
      using GT = std::remove_const_t<decltype(gt)>;
      detail::slice_map m;
      for (int d = 0; d < e.a.shape().rank(); ++d) {
        m.begin[d] = e.first(d);
        m.step[d] = e.step(d);
      }
      backward<A>::run(e.a, step(remap_expr<detail::slice_map, GT>(gt, m, e.a.shape())), sink);
    }
  }
};

/// The adjoint of a cumulative sum: the cumulative sum of the gradient in the other direction.
template <class A>
struct backward<cumsum_expr<A>> {
  template <class G, class Sink>
  static void run(const cumsum_expr<A>& e, const G& g, Sink& sink) {
    if constexpr (differentiable_v<A>) {
      const auto gt = reduce_to_ordered(g, e.shape());
      using GT = std::remove_const_t<decltype(gt)>;
      const cumsum_options back{.exclusive = e.options.exclusive, .reverse = !e.options.reverse};
      backward<A>::run(e.a, step(cumsum_expr<GT>(gt, e.axis, back)), sink);
    }
  }
};

}  // namespace fluxion::autodiff

#endif  // FLUXION_AUTODIFF_BACKPROP_HPP
