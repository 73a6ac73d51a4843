// Scalar math callable from host and device code alike (plain functions without nvcc).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "config.hpp"

namespace fluxion::math {

#define FLUXION_MATH_UNARY(name, fexpr, dexpr)                                    \
  FLUXION_HOST_DEVICE float name(float x) { return fexpr; }                     \
  FLUXION_HOST_DEVICE double name(double x) { return dexpr; }                   \
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>          \
  FLUXION_HOST_DEVICE double name(T x) { return name(static_cast<double>(x)); }

FLUXION_MATH_UNARY(exp, ::expf(x), ::exp(x))
FLUXION_MATH_UNARY(log, ::logf(x), ::log(x))
FLUXION_MATH_UNARY(log1p, ::log1pf(x), ::log1p(x))
FLUXION_MATH_UNARY(expm1, ::expm1f(x), ::expm1(x))
FLUXION_MATH_UNARY(sqrt, ::sqrtf(x), ::sqrt(x))
FLUXION_MATH_UNARY(sin, ::sinf(x), ::sin(x))
FLUXION_MATH_UNARY(cos, ::cosf(x), ::cos(x))
FLUXION_MATH_UNARY(tan, ::tanf(x), ::tan(x))
FLUXION_MATH_UNARY(tanh, ::tanhf(x), ::tanh(x))
FLUXION_MATH_UNARY(erf, ::erff(x), ::erf(x))
FLUXION_MATH_UNARY(floor, ::floorf(x), ::floor(x))
FLUXION_MATH_UNARY(ceil, ::ceilf(x), ::ceil(x))
FLUXION_MATH_UNARY(nearbyint, ::nearbyintf(x), ::nearbyint(x))
#undef FLUXION_MATH_UNARY

FLUXION_HOST_DEVICE float pow(float a, float b) { return ::powf(a, b); }
FLUXION_HOST_DEVICE double pow(double a, double b) { return ::pow(a, b); }
FLUXION_HOST_DEVICE bool isnan(float x) { return x != x; }
FLUXION_HOST_DEVICE bool isnan(double x) { return x != x; }
FLUXION_HOST_DEVICE bool isinf(float x) { return !isnan(x) && isnan(x - x); }
FLUXION_HOST_DEVICE bool isinf(double x) { return !isnan(x) && isnan(x - x); }

/// Whether x takes best's place in a scan for the first maximum (max pooling, its gradient and
/// every kernel that must agree with them): a larger number, or a NaN where best is not one. A NaN
/// beats every number and the first NaN wins, as in reduce_max and argmax, so a NaN in a window
/// comes out of max pooling, as it does in TensorFlow and PyTorch, and takes the window's gradient.
template <class T>
FLUXION_HOST_DEVICE bool beats_max(T x, T best) {
  if constexpr (std::is_floating_point_v<T>)
    return best == best && (x != x || x > best);
  else
    return x > best;
}

}  // namespace fluxion::math
