// Op tags: empty types, one per primitive, each carrying its value rule as a host-device
// function. The autodiff rule table adds each op's vector-Jacobian and Jacobian-vector products
// next to these (autodiff/rules.hpp); backends add SIMD versions by specializing on the tag
// (backend/cpu/simd_ops.hpp), so a new backend touches no op.
//
// Conventions, as in TensorFlow: relu(0) = 0, sign(0) = 0, round() rounds half to even,
// maximum/minimum propagate NaN, integer / and % follow C++ (truncation) and an integer division
// by zero gives 0 instead of trapping.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/dtype.hpp"
#include "../core/math.hpp"

namespace fluxion::ops {

namespace detail {
template <class T>
using float_of = std::conditional_t<std::is_floating_point_v<T>, T, double>;

// Integer division never traps: x / 0 gives 0, and the one overflowing quotient, min / -1, wraps
// to min (as two's complement arithmetic does), with remainder 0.
template <class R>
FLUXION_HOST_DEVICE R int_divide(R a, R b) {
  if constexpr (std::is_integral_v<R>) {
    if (b == R(0)) return R(0);
    if constexpr (std::is_signed_v<R>)
      if (b == R(-1)) return static_cast<R>(std::make_unsigned_t<R>(0) - static_cast<std::make_unsigned_t<R>>(a));
    return static_cast<R>(a / b);
  } else {
    return static_cast<R>(a / b);
  }
}
template <class R>
FLUXION_HOST_DEVICE R int_mod(R a, R b) {
  if (b == R(0)) return R(0);
  if constexpr (std::is_signed_v<R>)
    if (b == R(-1)) return R(0);
  return static_cast<R>(a % b);
}
}

// ---- unary ---------------------------------------------------------------------------------

#define FLUXION_UNARY_OP(tag, opname, ...)                           \
  struct tag {                                                     \
    static constexpr const char* name = opname;                    \
    template <class T>                                             \
    FLUXION_HOST_DEVICE static auto apply(T x) {                   \
      __VA_ARGS__                                                  \
    }                                                              \
  };

#define FLUXION_FLOAT_UNARY_OP(tag, opname, fn)                      \
  FLUXION_UNARY_OP(tag, opname, using F = detail::float_of<T>; return ::fluxion::math::fn(static_cast<F>(x));)

FLUXION_UNARY_OP(negate, "negate", if constexpr (std::is_same_v<T, bool>) return static_cast<std::int32_t>(-static_cast<int>(x)); else return static_cast<T>(-x);)
FLUXION_FLOAT_UNARY_OP(exp, "exp", exp)
FLUXION_FLOAT_UNARY_OP(log, "log", log)
FLUXION_FLOAT_UNARY_OP(log1p, "log1p", log1p)
FLUXION_FLOAT_UNARY_OP(expm1, "expm1", expm1)
FLUXION_FLOAT_UNARY_OP(sqrt, "sqrt", sqrt)
FLUXION_FLOAT_UNARY_OP(sin, "sin", sin)
FLUXION_FLOAT_UNARY_OP(cos, "cos", cos)
FLUXION_FLOAT_UNARY_OP(tan, "tan", tan)
FLUXION_FLOAT_UNARY_OP(tanh, "tanh", tanh)
FLUXION_FLOAT_UNARY_OP(erf, "erf", erf)
FLUXION_UNARY_OP(rsqrt, "rsqrt", using F = detail::float_of<T>; return F(1) / ::fluxion::math::sqrt(static_cast<F>(x));)
FLUXION_UNARY_OP(square, "square", using R = promote_t<T, T>; return static_cast<R>(static_cast<R>(x) * static_cast<R>(x));)
FLUXION_UNARY_OP(abs, "abs", if constexpr (std::is_same_v<T, bool>) return x; else return x < T(0) ? static_cast<T>(-x) : x;)
FLUXION_UNARY_OP(sign, "sign", if constexpr (std::is_same_v<T, bool>) return x; else return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);)
FLUXION_UNARY_OP(relu, "relu", return x < T(0) ? T(0) : x;)
FLUXION_UNARY_OP(sigmoid, "sigmoid", using F = detail::float_of<T>; const F v = static_cast<F>(x);
                 if (v >= F(0)) return F(1) / (F(1) + ::fluxion::math::exp(-v));
                 const F e = ::fluxion::math::exp(v); return e / (F(1) + e);)
FLUXION_UNARY_OP(softplus, "softplus", using F = detail::float_of<T>; const F v = static_cast<F>(x);
                 const F a = v < F(0) ? -v : v;
                 return (v > F(0) ? v : F(0)) + ::fluxion::math::log1p(::fluxion::math::exp(-a));)
FLUXION_UNARY_OP(floor, "floor", if constexpr (std::is_floating_point_v<T>) return ::fluxion::math::floor(x); else return x;)
FLUXION_UNARY_OP(ceil, "ceil", if constexpr (std::is_floating_point_v<T>) return ::fluxion::math::ceil(x); else return x;)
FLUXION_UNARY_OP(round, "round", if constexpr (std::is_floating_point_v<T>) return ::fluxion::math::nearbyint(x); else return x;)
FLUXION_UNARY_OP(logical_not, "logical_not", return !static_cast<bool>(x);)
FLUXION_UNARY_OP(is_nan, "is_nan", if constexpr (std::is_floating_point_v<T>) return ::fluxion::math::isnan(x); else return false;)
FLUXION_UNARY_OP(is_finite, "is_finite", if constexpr (std::is_floating_point_v<T>) return !::fluxion::math::isnan(x - x); else return true;)

#undef FLUXION_FLOAT_UNARY_OP
#undef FLUXION_UNARY_OP

template <class To>
struct cast {
  static constexpr const char* name = "cast";
  template <class T>
  FLUXION_HOST_DEVICE static To apply(T x) {
    return static_cast<To>(x);
  }
};

// ---- binary --------------------------------------------------------------------------------

#define FLUXION_ARITH_OP(tag, opname, expr)                                        \
  struct tag {                                                                   \
    static constexpr const char* name = opname;                                  \
    template <class A, class B>                                                  \
    FLUXION_HOST_DEVICE static promote_t<A, B> apply(A a_, B b_) {               \
      using R = promote_t<A, B>;                                                 \
      const R a = static_cast<R>(a_), b = static_cast<R>(b_);                    \
      return expr;                                                               \
    }                                                                            \
  };

FLUXION_ARITH_OP(add, "add", static_cast<R>(a + b))
FLUXION_ARITH_OP(subtract, "subtract", static_cast<R>(a - b))
FLUXION_ARITH_OP(multiply, "multiply", static_cast<R>(a * b))
FLUXION_ARITH_OP(divide, "divide", detail::int_divide(a, b))
FLUXION_ARITH_OP(mod, "mod", detail::int_mod(a, b))
FLUXION_ARITH_OP(maximum, "maximum", (a > b || a != a) ? a : b)
FLUXION_ARITH_OP(minimum, "minimum", (a < b || a != a) ? a : b)
#undef FLUXION_ARITH_OP

struct pow {
  static constexpr const char* name = "pow";
  template <class A, class B>
  FLUXION_HOST_DEVICE static promote_t<A, B> apply(A a_, B b_) {
    using R = promote_t<A, B>;
    if constexpr (std::is_floating_point_v<R>) {
      return ::fluxion::math::pow(static_cast<R>(a_), static_cast<R>(b_));
    } else {  // exponentiation by squaring; negative exponents follow integer division
      R base = static_cast<R>(a_), e = static_cast<R>(b_), r = 1;
      if (e < 0) return base == 1 ? R(1) : (base == -1 ? (e % 2 ? R(-1) : R(1)) : R(0));
      while (e) {
        if (e & 1) r *= base;
        base *= base;
        e >>= 1;
      }
      return r;
    }
  }
};

#define FLUXION_COMPARE_OP(tag, opname, op)                                        \
  struct tag {                                                                   \
    static constexpr const char* name = opname;                                  \
    template <class A, class B>                                                  \
    FLUXION_HOST_DEVICE static bool apply(A a, B b) {                            \
      using R = promote_t<A, B>;                                                 \
      return static_cast<R>(a) op static_cast<R>(b);                             \
    }                                                                            \
  };
FLUXION_COMPARE_OP(equal, "equal", ==)
FLUXION_COMPARE_OP(not_equal, "not_equal", !=)
FLUXION_COMPARE_OP(less, "less", <)
FLUXION_COMPARE_OP(less_equal, "less_equal", <=)
FLUXION_COMPARE_OP(greater, "greater", >)
FLUXION_COMPARE_OP(greater_equal, "greater_equal", >=)
#undef FLUXION_COMPARE_OP

struct logical_and {
  static constexpr const char* name = "logical_and";
  template <class A, class B>
  FLUXION_HOST_DEVICE static bool apply(A a, B b) {
    return static_cast<bool>(a) && static_cast<bool>(b);
  }
};
struct logical_or {
  static constexpr const char* name = "logical_or";
  template <class A, class B>
  FLUXION_HOST_DEVICE static bool apply(A a, B b) {
    return static_cast<bool>(a) || static_cast<bool>(b);
  }
};

// ---- ternary -------------------------------------------------------------------------------

struct where {
  static constexpr const char* name = "where";
  template <class C, class A, class B>
  FLUXION_HOST_DEVICE static promote_t<A, B> apply(C c, A a, B b) {
    using R = promote_t<A, B>;
    return static_cast<bool>(c) ? static_cast<R>(a) : static_cast<R>(b);
  }
};

}  // namespace fluxion::ops
