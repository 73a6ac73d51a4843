// The few vector operations fluxion's CPU kernels need, on xsimd batches for the architecture the
// compiler targets (detail::simd_arch, simd_arch.hpp), or on plain scalars where xsimd knows no
// architecture.
//
//   using ops = simd_ops<float>;
//   ops::batch acc = ops::fma(ops::loadu(a), ops::splat(2.f), ops::loadu(b));  // ops::width lanes
#pragma once

#include <cmath>
#include <type_traits>

#include "xsimd.hpp"

#include "../../../core/config.hpp"
#include "../../../core/math.hpp"
#include "simd_arch.hpp"

namespace fluxion::detail::kernels {

inline constexpr bool has_xsimd_arch = !std::is_same_v<simd_arch, xsimd::unavailable>;

#if (defined(__AVX512F__) && !FLUXION_SIMD_AVX512_CAPPED) || defined(__aarch64__)
inline constexpr int simd_register_count = 32;
#else
inline constexpr int simd_register_count = 16;
#endif

/// a * b + c on xsimd batches, rounded once where the target has fused multiply-add instructions
/// (AVX2's FMA3, AVX-512; SSE2 has none, and multiplies, then adds). xsimd 11 (Debian's) has no
/// AVX-512 fma: its generic one is `x * y + z` through the batch operators, which g++ contracts into
/// one instruction (-ffp-contract=fast, its default) and clang, which contracts only within one
/// expression, does not: under clang every AVX-512 kernel multiplied and added apart, slower and
/// with other bits than g++'s build.
template <class B>
FLUXION_ALWAYS_INLINE B fused_fma(const B& a, const B& b, const B& c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(B) == 64 && std::is_same_v<typename B::value_type, float>) return _mm512_fmadd_ps(a, b, c);
  else if constexpr (sizeof(B) == 64 && std::is_same_v<typename B::value_type, double>) return _mm512_fmadd_pd(a, b, c);
  else
#endif
    return xsimd::fma(a, b, c);
}

/// xsimd batches of the target architecture; the specialization below is the scalar stand-in.
template <class T, bool Simd = has_xsimd_arch>
struct simd_ops {
  using batch = xsimd::batch<T, simd_arch>;
  static constexpr index_t width = static_cast<index_t>(batch::size);
  static FLUXION_ALWAYS_INLINE batch load(const T* p) { return batch::load_aligned(p); }
  static FLUXION_ALWAYS_INLINE batch loadu(const T* p) { return batch::load_unaligned(p); }
  static FLUXION_ALWAYS_INLINE void storeu(T* p, batch v) { v.store_unaligned(p); }
  static FLUXION_ALWAYS_INLINE batch splat(T v) { return batch(v); }
  /// a * b + c, rounded once where the target has fused multiply-add instructions (fused_fma).
  static FLUXION_ALWAYS_INLINE batch fma(batch a, batch b, batch c) { return fused_fma(a, b, c); }
  // NaN stays NaN: relu(NaN) is NaN in every path, as ops::relu and TensorFlow's.
  static FLUXION_ALWAYS_INLINE batch relu(batch v) { return xsimd::select(v < batch(T(0)), batch(T(0)), v); }
  static FLUXION_ALWAYS_INLINE T sum(batch v) { return xsimd::hadd(v); }
  /// out[i] = sum(v[i]) for i < width, sharing the shuffles between the reductions.
  static FLUXION_ALWAYS_INLINE void sum_each(const batch* v, T* out) {
    if constexpr (std::is_same_v<T, float> && width == 16) {
      // xsimd 8's haddp for 16 floats returns the sums of lanes 2-5 and 10-13 as 4 5 2 3 and
      // 12 13 10 11; that order is its own inverse, so feeding the vectors in it undoes it.
      const batch w[16] = {v[0], v[1], v[4],  v[5],  v[2],  v[3],  v[6],  v[7],
                           v[8], v[9], v[12], v[13], v[10], v[11], v[14], v[15]};
      xsimd::haddp(w).store_unaligned(out);
    } else {
      xsimd::haddp(v).store_unaligned(out);
    }
  }
  /// The larger of a and b, NaN if either is NaN (math::beats_max: b is the maximum so far).
  static FLUXION_ALWAYS_INLINE batch max(batch a, batch b) { return xsimd::select((a > b) | xsimd::isnan(a), a, b); }
  /// The smaller of a and b, NaN if either is NaN (b is the minimum so far).
  static FLUXION_ALWAYS_INLINE batch min(batch a, batch b) { return xsimd::select((a < b) | xsimd::isnan(a), a, b); }
  /// Lanes where a takes the place of the maximum so far, b (math::beats_max), take x, the others y.
  static FLUXION_ALWAYS_INLINE auto beats_max(batch a, batch b) { return ((a > b) | xsimd::isnan(a)) & (b == b); }
  static FLUXION_ALWAYS_INLINE batch select_beats_max(batch a, batch b, batch x, batch y) {
    return xsimd::select(beats_max(a, b), x, y);
  }
  /// a if a > b, else b: max without NaN's rule, for loops that check for NaN once (any_nan) and
  /// take the NaN-aware path only then.
  static FLUXION_ALWAYS_INLINE batch max_ordered(batch a, batch b) { return xsimd::select(a > b, a, b); }
  static FLUXION_ALWAYS_INLINE bool any_nan(batch v) { return xsimd::any(xsimd::isnan(v)); }
  static FLUXION_ALWAYS_INLINE batch select_equal(batch a, batch b, batch x, batch y) {
    return xsimd::select(a == b, x, y);
  }
};

template <class T>
struct simd_ops<T, false> {
  using batch = T;
  static constexpr index_t width = 1;
  static FLUXION_ALWAYS_INLINE T load(const T* p) { return *p; }
  static FLUXION_ALWAYS_INLINE T loadu(const T* p) { return *p; }
  static FLUXION_ALWAYS_INLINE void storeu(T* p, T v) { *p = v; }
  static FLUXION_ALWAYS_INLINE T splat(T v) { return v; }
  static FLUXION_ALWAYS_INLINE T fma(T a, T b, T c) { return std::fma(a, b, c); }
  static FLUXION_ALWAYS_INLINE T relu(T v) { return v < T(0) ? T(0) : v; }
  static FLUXION_ALWAYS_INLINE T sum(T v) { return v; }
  static FLUXION_ALWAYS_INLINE void sum_each(const T* v, T* out) { *out = *v; }
  static FLUXION_ALWAYS_INLINE T max(T a, T b) { return (a > b || a != a) ? a : b; }
  static FLUXION_ALWAYS_INLINE T min(T a, T b) { return (a < b || a != a) ? a : b; }
  static FLUXION_ALWAYS_INLINE bool beats_max(T a, T b) { return math::beats_max(a, b); }
  static FLUXION_ALWAYS_INLINE T select_beats_max(T a, T b, T x, T y) { return beats_max(a, b) ? x : y; }
  static FLUXION_ALWAYS_INLINE T max_ordered(T a, T b) { return a > b ? a : b; }
  static FLUXION_ALWAYS_INLINE bool any_nan(T v) { return v != v; }
  static FLUXION_ALWAYS_INLINE T select_equal(T a, T b, T x, T y) { return a == b ? x : y; }
};

/// Calls body(simd_ops<T>{}, ch) for each full vector of channels in [0, c), then
/// body(simd_ops<T, false>{}, ch) for each remaining channel: one generic body serves both.
template <class T, class Body>
FLUXION_ALWAYS_INLINE void for_each_channel_chunk(index_t c, Body&& body) {
  constexpr index_t w = simd_ops<T>::width;
  index_t ch = 0;
  for (; ch + w <= c; ch += w) body(simd_ops<T>{}, ch);
  for (; ch < c; ++ch) body(simd_ops<T, false>{}, ch);
}

/// v where z > 0, else 0, for vectors or values: relu's gradient mask (0 at z = 0 and for a NaN z,
/// as fx::relu's gradient).
template <class B>
FLUXION_ALWAYS_INLINE B where_positive(B z, B v) {
  if constexpr (std::is_arithmetic_v<B>)
    return z > B(0) ? v : B(0);
  else
    return xsimd::select(z > B(0), v, B(0));
}

/// out[i] = a[i] + b[i] for i < n (out may be a or b), element by element: in vectors for float and
/// double, where g++'s -O2 would leave the plain loop scalar (the arrays may overlap); a plain loop
/// for other types.
template <class T>
FLUXION_ALWAYS_INLINE void add_arrays(T* out, const T* a, const T* b, index_t n) {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    for_each_channel_chunk<T>(n, [&](auto ops, index_t i) {
      using O = decltype(ops);
      O::storeu(out + i, O::loadu(a + i) + O::loadu(b + i));
    });
  } else {
    for (index_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
  }
}

}  // namespace fluxion::detail::kernels
