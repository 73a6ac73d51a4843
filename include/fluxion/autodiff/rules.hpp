// The table of derivative rules: for each primitive op, its vector-Jacobian product (reverse
// mode) and its Jacobian-vector product (forward mode), written as expressions over the operands
// `a`, `b`, the incoming gradient `g` and the operand tangents `ta`, `tb`. Because the rules are
// expressions, a backward or forward pass through a fused statement is itself fused.
//
// The values live with the op tags in expr/ops.hpp; this table sits beside them rather than
// inside the tags because the tags must stay host-device clean for nvcc, while rules build
// expressions.
//
// Conventions at kinks follow TensorFlow: relu'(0) = 0, abs'(0) = 0 (through sign), maximum's
// gradient goes to `a` where a >= b and minimum's where a <= b, sign/floor/ceil/round and all
// comparisons have zero gradient.
#pragma once

#include <numbers>
#include <type_traits>

#include "../expr/elementwise.hpp"
#include "../expr/ops.hpp"

namespace fluxion::autodiff {

template <class Op>
struct rule {
  static constexpr bool differentiable = false;  // comparisons, logic, rounding, mod
};

template <class T>
using scalar_of = value_type_t<T>;

#define FLUXION_UNARY_RULE(Op, vjp_expr, jvp_expr)                   \
  template <>                                                       \
  struct rule<ops::Op> {                                            \
    static constexpr bool differentiable = true;                    \
    template <class A, class G>                                     \
    static auto vjp(const A& a, const G& g) {                       \
      using T [[maybe_unused]] = scalar_of<A>;                      \
      (void)a;                                                      \
      return vjp_expr;                                              \
    }                                                               \
    template <class A, class TA>                                    \
    static auto jvp(const A& a, const TA& ta) {                     \
      using T [[maybe_unused]] = scalar_of<A>;                      \
      (void)a;                                                      \
      return jvp_expr;                                              \
    }                                                               \
  };

FLUXION_UNARY_RULE(negate, -g, -ta)
FLUXION_UNARY_RULE(exp, g * exp(a), ta * exp(a))
FLUXION_UNARY_RULE(log, g / a, ta / a)
FLUXION_UNARY_RULE(log1p, g / (T(1) + a), ta / (T(1) + a))
FLUXION_UNARY_RULE(expm1, g * exp(a), ta * exp(a))
FLUXION_UNARY_RULE(sqrt, g * T(0.5) / sqrt(a), ta * T(0.5) / sqrt(a))
FLUXION_UNARY_RULE(rsqrt, g * T(-0.5) * rsqrt(a) / a, ta * T(-0.5) * rsqrt(a) / a)
FLUXION_UNARY_RULE(square, g * T(2) * a, ta * T(2) * a)
FLUXION_UNARY_RULE(abs, g * sign(a), ta * sign(a))
FLUXION_UNARY_RULE(sin, g * cos(a), ta * cos(a))
FLUXION_UNARY_RULE(cos, -(g * sin(a)), -(ta * sin(a)))
FLUXION_UNARY_RULE(tan, g * (T(1) + square(tan(a))), ta * (T(1) + square(tan(a))))
FLUXION_UNARY_RULE(tanh, g * (T(1) - square(tanh(a))), ta * (T(1) - square(tanh(a))))
FLUXION_UNARY_RULE(sigmoid, g * sigmoid(a) * (T(1) - sigmoid(a)), ta * sigmoid(a) * (T(1) - sigmoid(a)))
FLUXION_UNARY_RULE(relu, where(a > T(0), g, T(0)), where(a > T(0), ta, T(0)))
FLUXION_UNARY_RULE(softplus, g * sigmoid(a), ta * sigmoid(a))
FLUXION_UNARY_RULE(erf, g * T(2 * std::numbers::inv_sqrtpi) * exp(-square(a)),
                   ta * T(2 * std::numbers::inv_sqrtpi) * exp(-square(a)))
#undef FLUXION_UNARY_RULE

template <class To>
struct rule<ops::cast<To>> {
  static constexpr bool differentiable = std::is_floating_point_v<To>;
  template <class A, class G>
  static auto vjp(const A&, const G& g) {
    return cast<value_type_t<A>>(g);
  }
  template <class A, class TA>
  static auto jvp(const A&, const TA& ta) {
    return cast<To>(ta);
  }
};

#define FLUXION_BINARY_RULE(Op, vjp_a_expr, vjp_b_expr, jvp_expr)          \
  template <>                                                             \
  struct rule<ops::Op> {                                                  \
    static constexpr bool differentiable = true;                          \
    template <class A, class B, class G>                                  \
    static auto vjp_a(const A& a, const B& b, const G& g) {               \
      using T [[maybe_unused]] = promote_t<scalar_of<A>, scalar_of<B>>;   \
      (void)a, (void)b;                                                   \
      return vjp_a_expr;                                                  \
    }                                                                     \
    template <class A, class B, class G>                                  \
    static auto vjp_b(const A& a, const B& b, const G& g) {               \
      using T [[maybe_unused]] = promote_t<scalar_of<A>, scalar_of<B>>;   \
      (void)a, (void)b;                                                   \
      return vjp_b_expr;                                                  \
    }                                                                     \
    template <class A, class B, class TA, class TB>                       \
    static auto jvp(const A& a, const B& b, const TA& ta, const TB& tb) { \
      using T [[maybe_unused]] = promote_t<scalar_of<A>, scalar_of<B>>;   \
      (void)a, (void)b;                                                   \
      return jvp_expr;                                                    \
    }                                                                     \
  };

FLUXION_BINARY_RULE(add, g, g, ta + tb)
FLUXION_BINARY_RULE(subtract, g, -g, ta - tb)
FLUXION_BINARY_RULE(multiply, g * b, g * a, ta * b + a * tb)
FLUXION_BINARY_RULE(divide, g / b, -(g * a) / (b * b), ta / b - a * tb / (b * b))
FLUXION_BINARY_RULE(pow, g * b * pow(a, b - T(1)), g * pow(a, b) * where(a > T(0), log(a), T(0)),
                    ta * b * pow(a, b - T(1)) + tb * pow(a, b) * where(a > T(0), log(a), T(0)))
FLUXION_BINARY_RULE(maximum, where(a >= b, g, T(0)), where(a >= b, T(0), g), where(a >= b, ta, tb))
FLUXION_BINARY_RULE(minimum, where(a <= b, g, T(0)), where(a <= b, T(0), g), where(a <= b, ta, tb))
#undef FLUXION_BINARY_RULE

}  // namespace fluxion::autodiff
