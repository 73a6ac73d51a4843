// SIMD versions of the op tags, for the CPU evaluator. An op without a specialization here is
// still evaluated, by the scalar rule, so adding an op never requires touching this file.
#pragma once

#include <cstdint>
#include <type_traits>

#include "detail/simd_ops.hpp"
#include "detail/xsimd.hpp"

#include "../../expr/ops.hpp"

namespace fluxion::detail::simd {

template <class Op>
struct op {
  static constexpr bool available = false;
};

/// sin (Cosine = false) or cos of float batches, inline: Cephes' sinf/cosf (reduction by pi/4 in
/// three parts, minimax polynomials on [-pi/4, pi/4]; relative error about 1e-7 for |x| <= 4096).
/// xsimd's own range reduction is an out-of-line call, and a call inside a loop makes every vector
/// register caller-saved: the fused loop around it then spills and reloads on every iteration
/// (measured 1.8x slower than this at 1M floats). Lanes beyond 4096, inf and NaN go to xsimd.
template <bool Cosine, class B>
FLUXION_ALWAYS_INLINE B sin_cos_float(const B& x) {
  const B ax = xsimd::abs(x);
  if (!xsimd::all(ax <= B(4096.f))) return Cosine ? xsimd::cos(x) : xsimd::sin(x);
  B y = xsimd::floor(ax * B(1.27323954473516f));           // the octant, 4/pi * |x|
  y = y + (y - B(2.f) * xsimd::floor(y * B(0.5f)));        // rounded up to even
  const B q = y - B(8.f) * xsimd::floor(y * B(0.125f));    // 0, 2, 4 or 6
  const B r = ((ax - y * B(0.78515625f)) - y * B(2.4187564849853515625e-4f)) - y * B(3.77489497744594108e-8f);
  const B z = r * r;
  const B sin_r = kernels::fused_fma(kernels::fused_fma(kernels::fused_fma(B(-1.9515295891e-4f), z, B(8.3321608736e-3f)), z, B(-1.6666654611e-1f)) * z, r, r);
  const B cos_r = kernels::fused_fma(kernels::fused_fma(kernels::fused_fma(B(2.443315711809948e-5f), z, B(-1.388731625493765e-3f)), z,
                                        B(4.166664568298827e-2f)) * z, z, kernels::fused_fma(B(-0.5f), z, B(1.f)));
  const auto odd_quadrant = (q == B(2.f)) || (q == B(6.f));
  if constexpr (Cosine) {
    const B v = xsimd::select(odd_quadrant, sin_r, cos_r);
    return xsimd::select((q == B(2.f)) || (q == B(4.f)), -v, v);
  } else {
    const B v = xsimd::select(odd_quadrant, cos_r, sin_r);
    // sin(x) = sign(x) sin(|x|): x's sign bit goes onto the result by xor, which also keeps
    // sin(-0) = -0. Combining the two conditions as masks (`!=`, `^`) is wrong on some of
    // xsimd's architectures: on SSE2 its `!=` compares the all-ones masks as floats (NaNs), so
    // true != true was true and sin had the wrong sign for x < -3 pi / 4.
    const B w = xsimd::select(q >= B(4.f), -v, v);
    return xsimd::bitwise_xor(w, xsimd::bitwise_and(x, B(-0.f)));
  }
}

#define FLUXION_SIMD_OP(Tag, ...)                          \
  template <>                                            \
  struct op<ops::Tag> {                                  \
    static constexpr bool available = true;              \
    template <class B>                                   \
    FLUXION_ALWAYS_INLINE static B apply(__VA_ARGS__)

/// exp of float batches, inline for the same reason as sin_cos_float: Cephes' expf (x = n ln 2 + r,
/// a degree-6 polynomial for e^r, 2^n from the exponent bits; about 1 ulp). Lanes outside
/// [-87, 88], where the result would overflow or go subnormal, and NaN go to xsimd.
template <class B>
FLUXION_ALWAYS_INLINE B exp_float(const B& x) {
  if (!xsimd::all((x >= B(-87.f)) && (x <= B(88.f)))) return xsimd::exp(x);
  const B n = xsimd::floor(kernels::fused_fma(x, B(1.44269504088896341f), B(0.5f)));
  B r = kernels::fused_fma(n, B(-0.693359375f), x);
  r = kernels::fused_fma(n, B(2.12194440e-4f), r);
  B p = B(1.9875691500e-4f);
  p = kernels::fused_fma(p, r, B(1.3981999507e-3f));
  p = kernels::fused_fma(p, r, B(8.3334519073e-3f));
  p = kernels::fused_fma(p, r, B(4.1665795894e-2f));
  p = kernels::fused_fma(p, r, B(1.6666665459e-1f));
  p = kernels::fused_fma(p, r, B(5.0000001201e-1f));
  p = kernels::fused_fma(p, r * r, r) + B(1.f);
  using I = xsimd::batch<std::int32_t, typename B::arch_type>;
  const I bits = (xsimd::to_int(n) + I(127)) << 23;
  return p * xsimd::bitwise_cast<B>(bits);
}

/// exp through the inline float kernel where there is one.
template <class B>
FLUXION_ALWAYS_INLINE B exp_any(const B& x) {
  if constexpr (std::is_same_v<typename B::value_type, float>) return exp_float(x);
  else return xsimd::exp(x);
}

FLUXION_SIMD_OP(negate, const B& x) { return -x; } };
FLUXION_SIMD_OP(exp, const B& x) { return exp_any(x); } };
FLUXION_SIMD_OP(log, const B& x) { return xsimd::log(x); } };
FLUXION_SIMD_OP(log1p, const B& x) { return xsimd::log1p(x); } };
FLUXION_SIMD_OP(expm1, const B& x) { return xsimd::expm1(x); } };
FLUXION_SIMD_OP(sqrt, const B& x) { return xsimd::sqrt(x); } };
FLUXION_SIMD_OP(rsqrt, const B& x) { return B(1) / xsimd::sqrt(x); } };
FLUXION_SIMD_OP(square, const B& x) { return x * x; } };
FLUXION_SIMD_OP(abs, const B& x) { return xsimd::abs(x); } };
FLUXION_SIMD_OP(sin, const B& x) {
  if constexpr (std::is_same_v<typename B::value_type, float>) return sin_cos_float<false>(x);
  else return xsimd::sin(x);
} };
FLUXION_SIMD_OP(cos, const B& x) {
  if constexpr (std::is_same_v<typename B::value_type, float>) return sin_cos_float<true>(x);
  else return xsimd::cos(x);
} };
FLUXION_SIMD_OP(tan, const B& x) { return xsimd::tan(x); } };
FLUXION_SIMD_OP(tanh, const B& x) { return xsimd::tanh(x); } };
FLUXION_SIMD_OP(erf, const B& x) { return xsimd::erf(x); } };
FLUXION_SIMD_OP(floor, const B& x) { return xsimd::floor(x); } };
FLUXION_SIMD_OP(ceil, const B& x) { return xsimd::ceil(x); } };
FLUXION_SIMD_OP(round, const B& x) { return xsimd::nearbyint(x); } };
FLUXION_SIMD_OP(relu, const B& x) { return xsimd::select(x < B(0), B(0), x); } };
FLUXION_SIMD_OP(sign, const B& x) { return xsimd::select(x > B(0), B(1), xsimd::select(x < B(0), B(-1), x)); } };
FLUXION_SIMD_OP(sigmoid, const B& x) {
  const B e = exp_any(-xsimd::abs(x));  // never overflows
  const B p = B(1) / (B(1) + e);
  return xsimd::select(x >= B(0), p, e * p);
} };
FLUXION_SIMD_OP(softplus, const B& x) {
  return xsimd::select(x > B(0), x, B(0)) + xsimd::log1p(exp_any(-xsimd::abs(x)));
} };
FLUXION_SIMD_OP(add, const B& a, const B& b) { return a + b; } };
FLUXION_SIMD_OP(subtract, const B& a, const B& b) { return a - b; } };
FLUXION_SIMD_OP(multiply, const B& a, const B& b) { return a * b; } };
FLUXION_SIMD_OP(divide, const B& a, const B& b) { return a / b; } };
FLUXION_SIMD_OP(pow, const B& a, const B& b) { return xsimd::pow(a, b); } };
FLUXION_SIMD_OP(maximum, const B& a, const B& b) { return xsimd::select((a > b) || xsimd::isnan(a), a, b); } };
FLUXION_SIMD_OP(minimum, const B& a, const B& b) { return xsimd::select((a < b) || xsimd::isnan(a), a, b); } };
#undef FLUXION_SIMD_OP

}  // namespace fluxion::detail::simd
