// SIMD versions of the op tags, for the CPU evaluator. An op without a specialization here is
// still evaluated, by the scalar rule, so adding an op never requires touching this file.
#pragma once

#include <xsimd/xsimd.hpp>

#include "../../expr/ops.hpp"

namespace fluxion::detail::simd {

template <class Op>
struct op {
  static constexpr bool available = false;
};

#define FLUXION_SIMD_OP(Tag, ...)                          \
  template <>                                            \
  struct op<ops::Tag> {                                  \
    static constexpr bool available = true;              \
    template <class B>                                   \
    FLUXION_ALWAYS_INLINE static B apply(__VA_ARGS__)

FLUXION_SIMD_OP(negate, const B& x) { return -x; } };
FLUXION_SIMD_OP(exp, const B& x) { return xsimd::exp(x); } };
FLUXION_SIMD_OP(log, const B& x) { return xsimd::log(x); } };
FLUXION_SIMD_OP(log1p, const B& x) { return xsimd::log1p(x); } };
FLUXION_SIMD_OP(expm1, const B& x) { return xsimd::expm1(x); } };
FLUXION_SIMD_OP(sqrt, const B& x) { return xsimd::sqrt(x); } };
FLUXION_SIMD_OP(rsqrt, const B& x) { return B(1) / xsimd::sqrt(x); } };
FLUXION_SIMD_OP(square, const B& x) { return x * x; } };
FLUXION_SIMD_OP(abs, const B& x) { return xsimd::abs(x); } };
FLUXION_SIMD_OP(sin, const B& x) { return xsimd::sin(x); } };
FLUXION_SIMD_OP(cos, const B& x) { return xsimd::cos(x); } };
FLUXION_SIMD_OP(tan, const B& x) { return xsimd::tan(x); } };
FLUXION_SIMD_OP(tanh, const B& x) { return xsimd::tanh(x); } };
FLUXION_SIMD_OP(erf, const B& x) { return xsimd::erf(x); } };
FLUXION_SIMD_OP(floor, const B& x) { return xsimd::floor(x); } };
FLUXION_SIMD_OP(ceil, const B& x) { return xsimd::ceil(x); } };
FLUXION_SIMD_OP(round, const B& x) { return xsimd::nearbyint(x); } };
FLUXION_SIMD_OP(relu, const B& x) { return xsimd::select(x < B(0), B(0), x); } };
FLUXION_SIMD_OP(sign, const B& x) { return xsimd::select(x > B(0), B(1), xsimd::select(x < B(0), B(-1), x)); } };
FLUXION_SIMD_OP(sigmoid, const B& x) {
  const B e = xsimd::exp(-xsimd::abs(x));  // never overflows
  const B p = B(1) / (B(1) + e);
  return xsimd::select(x >= B(0), p, e * p);
} };
FLUXION_SIMD_OP(softplus, const B& x) {
  return xsimd::select(x > B(0), x, B(0)) + xsimd::log1p(xsimd::exp(-xsimd::abs(x)));
} };
FLUXION_SIMD_OP(add, const B& a, const B& b) { return a + b; } };
FLUXION_SIMD_OP(subtract, const B& a, const B& b) { return a - b; } };
FLUXION_SIMD_OP(multiply, const B& a, const B& b) { return a * b; } };
FLUXION_SIMD_OP(divide, const B& a, const B& b) { return a / b; } };
FLUXION_SIMD_OP(pow, const B& a, const B& b) { return xsimd::pow(a, b); } };
FLUXION_SIMD_OP(maximum, const B& a, const B& b) { return xsimd::select((a > b) || (a != a), a, b); } };
FLUXION_SIMD_OP(minimum, const B& a, const B& b) { return xsimd::select((a < b) || (a != a), a, b); } };
#undef FLUXION_SIMD_OP

}  // namespace fluxion::detail::simd
