// The composition matrix (issue 10): every op that reaches autodiff, nested under every kind of op,
// differentiated. Per-op tests differentiate each op alone or under one scalar multiply; that is
// how `reduce_sum(gather(x, i) * 2)` made the compiler recurse without end (forward mode lost the
// derivative order of a gathered tangent). Here each inner op's statement is fed to each outer kind
// (elementwise, reduction, gather, concat, pad, matmul, conv, remap), so every pair of node kinds
// meets in one recorded statement or across a kernel boundary.
//
// A test file defines FLUXION_MAX_DERIVATIVE_ORDER and COMPOSITION_OUTER (an index into outer_ops)
// and includes this header. Built two ways (cmake/tests.cmake):
//   - autodiff.composition_<outer>: compiled four files to a program (batch.autodiff.<n>) under a
//     time limit (cmake/time_limited_compile.cmake) and run; at order 1 checks the tape's gradient
//     and the forward-mode tangent of every composition against central differences
//     (check_gradients), at order 2 also Hessian-vector products both ways (check_second_order);
//   - compile_time.composition_<outers>_order2: the front end alone (-fsyntax-only) at order 2, four
//     files at a time, under a time limit.
// A composition that recursed without end would time out in one of them.
#pragma once

#include <string>
#include <tuple>

#include "gradient_checks.hpp"

#include <fluxion/fluxion.hpp>

namespace composition {

using test::check_op;
using test::random_tensor;

// The input everywhere: NHWC (1, 4, 4, 2), in [0.5, 1.5] so log, sqrt and pow are defined.
inline const fx::shape input_shape{1, 4, 4, 2};

inline fx::tensor<double> channel_constant() { return random_tensor<double>({2}, 11, 0.5, 1.5); }
inline fx::tensor<double> mix() { return random_tensor<double>({2, 2}, 12, -1, 1); }
inline fx::tensor<double> filter(fx::index_t kh, fx::index_t in_c, fx::index_t out_c, unsigned seed) {
  return random_tensor<double>({kh, kh, in_c, out_c}, seed, -1, 1);
}
inline fx::tensor<int> rows() { return fx::from_vector(std::vector<int>{1, 0, 1}, {3}); }

// Inner ops: each takes x of input_shape and returns an expression (or tensor) of rank 4.
#define FLUXION_INNER(name, body) std::pair{name, [](const auto& x) { return body; }}
inline auto inner_ops() {
  return std::tuple{
      FLUXION_INNER("negate", -x), FLUXION_INNER("exp", fx::exp(x)), FLUXION_INNER("log", fx::log(x)),
      FLUXION_INNER("log1p", fx::log1p(x)), FLUXION_INNER("expm1", fx::expm1(x)), FLUXION_INNER("sqrt", fx::sqrt(x)),
      FLUXION_INNER("rsqrt", fx::rsqrt(x)), FLUXION_INNER("square", fx::square(x)), FLUXION_INNER("abs", fx::abs(x)),
      FLUXION_INNER("sin", fx::sin(x)), FLUXION_INNER("cos", fx::cos(x)), FLUXION_INNER("tan", fx::tan(x)),
      FLUXION_INNER("tanh", fx::tanh(x)), FLUXION_INNER("sigmoid", fx::sigmoid(x)),
      FLUXION_INNER("relu", fx::relu(x - 1.0)), FLUXION_INNER("softplus", fx::softplus(x)),
      FLUXION_INNER("erf", fx::erf(x)), FLUXION_INNER("cast", fx::cast<double>(x)),
      FLUXION_INNER("add", x + channel_constant()), FLUXION_INNER("subtract", channel_constant() - x),
      FLUXION_INNER("multiply", x * x), FLUXION_INNER("divide", channel_constant() / x),
      FLUXION_INNER("pow", fx::pow(x, channel_constant())), FLUXION_INNER("maximum", fx::maximum(x, channel_constant())),
      FLUXION_INNER("minimum", fx::minimum(x, channel_constant())),
      FLUXION_INNER("where", fx::where(x > 1.0, x * x, x)),
      FLUXION_INNER("reduce_sum", fx::reduce_sum(x, {3}, true)), FLUXION_INNER("reduce_mean", fx::reduce_mean(x, {2}, true)),
      FLUXION_INNER("reduce_prod", fx::reduce_prod(x, {3}, true)), FLUXION_INNER("reduce_max", fx::reduce_max(x, {2}, true)),
      FLUXION_INNER("reduce_min", fx::reduce_min(x, {3}, true)),
      FLUXION_INNER("reduce_logsumexp", fx::reduce_logsumexp(x, {3}, true)),
      FLUXION_INNER("transpose", fx::transpose(x, {0, 2, 1, 3})),
      FLUXION_INNER("expand_dims+squeeze", fx::squeeze(fx::expand_dims(x, 0), {0})),
      FLUXION_INNER("strided_slice", fx::strided_slice(x, {0, 0, 0, 0}, {1, 4, 4, 2}, {1, 1, 2, 1})),
      FLUXION_INNER("broadcast_to", fx::broadcast_to(x, {2, 4, 4, 2})),
      FLUXION_INNER("reshape", fx::reshape(x, {1, 4, 2, 4})), FLUXION_INNER("matmul", fx::matmul(x, mix())),
      FLUXION_INNER("conv2d", fx::conv2d(x, filter(2, 2, 2, 13), 1, fx::padding::same)),
      FLUXION_INNER("max_pool2d", fx::max_pool2d(x, 2, 1, fx::padding::same)),
      FLUXION_INNER("avg_pool2d", fx::avg_pool2d(x, 2, 1, fx::padding::same)),
      FLUXION_INNER("gather", fx::gather(x, rows(), 1)),
      FLUXION_INNER("concat", fx::concat({fx::tensor<double>(x), fx::tensor<double>(x * 2.0)}, 3)),
      FLUXION_INNER("pad", fx::pad(x, {{0, 0}, {1, 0}, {0, 1}, {0, 0}}, 0.5))};
}
#undef FLUXION_INNER

// Outer kinds: each takes the inner op's result y (rank 4, at least 2 rows on axis 1).
#define FLUXION_OUTER(name, body) std::pair{name, [](const auto& y) { return body; }}
inline auto outer_ops() {
  return std::tuple{
      FLUXION_OUTER("elementwise", y * 2.0 + fx::sin(y)), FLUXION_OUTER("reduction", fx::reduce_sum(y * 2.0)),
      FLUXION_OUTER("gather", fx::gather(y, rows(), 1)),
      FLUXION_OUTER("concat", fx::concat({fx::tensor<double>(y), fx::tensor<double>(y)}, 0)),
      FLUXION_OUTER("pad", fx::pad(y, {{0, 0}, {0, 1}, {1, 0}, {0, 0}}, 0.0)),
      FLUXION_OUTER("matmul", fx::matmul(fx::reshape(y, {-1, y.shape()[3]}),
                                         random_tensor<double>({y.shape()[3], 3}, 14, -1, 1))),
      FLUXION_OUTER("conv", fx::conv2d(y, filter(1, y.shape()[3], 2, 15))),
      FLUXION_OUTER("remap", fx::transpose(y, {3, 1, 2, 0}))};
}
#undef FLUXION_OUTER

/// Checks outer(inner(x)) for every inner op, with the outer kind COMPOSITION_OUTER.
template <std::size_t Outer>
void check_all() {
  // Not a structured binding: clang 14 cannot capture one.
  const auto outer_op = std::get<Outer>(outer_ops());
  const auto& outer_name = std::get<0>(outer_op);
  const auto& outer = std::get<1>(outer_op);
  const fx::tensor<double> x = random_tensor<double>(input_shape, 7, 0.5, 1.5);
  std::apply(
      [&](const auto&... inner) {
        (
            [&] {
              const auto& [inner_name, f] = inner;
              const std::string name = std::string(outer_name) + " of " + inner_name;
              auto composed = [f = f, outer = outer](const auto& t) { return outer(f(t)); };
              check_op(name, composed, x);
#if FLUXION_MAX_DERIVATIVE_ORDER >= 2
              test::check_second(name, composed, x);
#endif
            }(),
            ...);
      },
      inner_ops());
}

}  // namespace composition
