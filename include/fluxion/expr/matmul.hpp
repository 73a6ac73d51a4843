// matmul: batched matrix products with NumPy broadcasting of the batch dimensions and
// transpose flags, as tf.linalg.matmul.
//
//   auto y = fx::matmul(x, w);                       // (32, 784) x (784, 10) -> (32, 10)
//   auto g = fx::matmul(x, dy, fx::transpose_a);     // x^T dy
//
// matmul is a kernel boundary: its operands are materialized, and its result is fused into the
// statement that reads it.

#include "evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_EXPR_MATMUL_HPP
#define FLUXION_EXPR_MATMUL_HPP
#pragma once

#include <string>
#include <vector>

#include "../core/shape.hpp"
#include "elementwise.hpp"
#include "evaluate.hpp"

namespace fluxion {

struct matmul_options {
  bool transpose_a = false;
  bool transpose_b = false;
};
inline constexpr matmul_options transpose_a{true, false};
inline constexpr matmul_options transpose_b{false, true};
inline constexpr matmul_options transpose_ab{true, true};

namespace detail {

inline std::string matmul_operand(const shape& s, bool t) {
  return to_string(s) + (t ? "^T" : "");
}

/// A product's sizes from its operands' shapes, checked. Not a template: compiled once per program,
/// not once per pair of operand types (issue 10).
struct matmul_plan {
  shape out, batch;
  index_t m = 0, n = 0, k = 0;
};
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_NOINLINE matmul_plan plan_matmul(const shape& sa, const shape& sb, matmul_options o) {
  if (sa.rank() < 2 || sb.rank() < 2)
    throw shape_error("matmul: operands need rank >= 2 (as tf.linalg.matmul), got shapes " + to_string(sa) + " and " +
                      to_string(sb) +
                      "; make a vector a row or a column first (fx::reshape(v, {1, n}) or {n, 1}), or contract it "
                      "with fx::einsum(\"i,ij->j\", v, m)");
  matmul_plan p;
  const int ra = sa.rank(), rb = sb.rank();
  p.m = o.transpose_a ? sa[ra - 1] : sa[ra - 2];
  p.k = o.transpose_a ? sa[ra - 2] : sa[ra - 1];
  const index_t kb = o.transpose_b ? sb[rb - 1] : sb[rb - 2];
  p.n = o.transpose_b ? sb[rb - 2] : sb[rb - 1];
  if (p.k != kb)
    throw shape_error("matmul: inner dimensions differ: " + matmul_operand(sa, o.transpose_a) + " x " +
                      matmul_operand(sb, o.transpose_b));
  const shape ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  try {
    p.batch = broadcast_shapes(ba, bb, "matmul");
  } catch (const shape_error&) {
    throw shape_error("matmul: batch dimensions of shapes " + to_string(sa) + " and " + to_string(sb) +
                      " cannot be broadcast");
  }
  p.out = p.batch;
  p.out.push_back(p.m);
  p.out.push_back(p.n);
  return p;
}
#else
matmul_plan plan_matmul(const shape& sa, const shape& sb, matmul_options o);
#endif

/// Offset of each output batch entry's matrix inside an operand of shape `s`, whose batch shape
/// broadcasts to `batch`.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_NOINLINE void matmul_batch_offsets(const shape& batch, const shape& s, index_t matrix, std::vector<index_t>& off) {
  const int rb = batch.rank(), ro = s.rank() - 2;
  for (index_t i = 0; i < static_cast<index_t>(off.size()); ++i) {
    index_t rem = i, o = 0, stride = matrix;
    for (int d = rb - 1; d >= 0; --d) {
      const index_t c = rem % batch[d];
      rem /= batch[d];
      const int od = d - (rb - ro);
      if (od >= 0) {
        if (s[od] != 1) o += c * stride;
        stride *= s[od];
      }
    }
    off[static_cast<std::size_t>(i)] = o;
  }
}
#else
void matmul_batch_offsets(const shape& batch, const shape& s, index_t matrix, std::vector<index_t>& off);
#endif

}  // namespace detail

template <class A, class B>
struct matmul_expr : detail::boundary_expr<matmul_expr<A, B>, value_type_t<A>, device_t<A>> {
  using T = value_type_t<A>;
  using D = device_t<A>;
  A a;
  B b;
  matmul_options opt;
  fluxion::shape m_shape, m_batch;
  index_t m = 0, n = 0, k = 0;

  matmul_expr(A a_, B b_, matmul_options o) : a(std::move(a_)), b(std::move(b_)), opt(o) {
    detail::matmul_plan p = detail::plan_matmul(a.shape(), b.shape(), o);
    m_shape = std::move(p.out);
    m_batch = std::move(p.batch);
    m = p.m;
    n = p.n;
    k = p.k;
  }
  const fluxion::shape& shape() const { return m_shape; }

  tensor<T, D> compute() const {
    const tensor<T, D> ta = detail::materialize(a);
    const tensor<T, D> tb = detail::materialize(b);
    tensor<T, D> out(m_shape);
    const index_t batch = m_batch.size();
    std::vector<index_t> a_off(static_cast<std::size_t>(batch)), b_off(static_cast<std::size_t>(batch));
    detail::matmul_batch_offsets(m_batch, ta.shape(), m * k, a_off);
    detail::matmul_batch_offsets(m_batch, tb.shape(), k * n, b_off);
    if (k == 0) {
      detail::assign_into(out, 0, contiguous_strides(m_shape).data(),
                          broadcast_to(scalar_expr<T, D>(T(0)), m_shape));
      return out;
    }
    detail::evaluator<D>::matmul(opt.transpose_a, opt.transpose_b, batch, m, n, k, ta.data(), a_off.data(),
                                 tb.data(), b_off.data(), out.mutable_data());
    return out;
  }
};

template <class A, class B>
  requires((is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) &&
           (is_expression_v<B> || is_variable_v<std::remove_cvref_t<B>>))
auto matmul(A&& a, B&& b, matmul_options opt = {}) {
  using EA = detail::expr_t<A>;
  using EB = detail::expr_t<B>;
  static_assert(std::is_same_v<value_type_t<EA>, value_type_t<EB>>,
                "fluxion::matmul: the operands have different element types; convert one with fluxion::cast<T>.");
  static_assert(std::is_same_v<device_t<EA>, device_t<EB>>,
                "fluxion::matmul: the operands live on different devices; move one with fluxion::to<Device>.");
  detail::check_not_none(a, "matmul");
  detail::check_not_none(b, "matmul");
  return matmul_expr<EA, EB>(detail::as_expr<A>(std::forward<A>(a)), detail::as_expr<B>(std::forward<B>(b)), opt);
}

}  // namespace fluxion

#endif  // FLUXION_EXPR_MATMUL_HPP
