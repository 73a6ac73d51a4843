// Reduction op tags: identity, combine and finalize, shared by every backend.
#pragma once

#include <limits>
#include <type_traits>

#include "../core/config.hpp"
#include "../core/dtype.hpp"

namespace fluxion::ops {

namespace detail {
// The extremes as constexpr variables: device code may read these, but may not call
// std::numeric_limits' host-only functions (nvcc warns #20013 without --expt-relaxed-constexpr).
template <class R>
inline constexpr R lowest_v =
    std::is_floating_point_v<R> ? -std::numeric_limits<R>::infinity() : std::numeric_limits<R>::lowest();
template <class R>
inline constexpr R highest_v =
    std::is_floating_point_v<R> ? std::numeric_limits<R>::infinity() : std::numeric_limits<R>::max();
}  // namespace detail

struct reduce_sum {
  static constexpr const char* name = "reduce_sum";
  template <class T>
  using result = promote_t<T, T>;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return R(0); }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return a + b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

struct reduce_mean : reduce_sum {
  static constexpr const char* name = "reduce_mean";
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t n) {
    if constexpr (std::is_integral_v<R>) return n == 0 ? R(0) : static_cast<R>(a / static_cast<R>(n));
    else return a / static_cast<R>(n);
  }
};

struct reduce_prod {
  static constexpr const char* name = "reduce_prod";
  template <class T>
  using result = promote_t<T, T>;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return R(1); }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return a * b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

struct reduce_max {
  static constexpr const char* name = "reduce_max";
  template <class T>
  using result = T;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return detail::lowest_v<R>; }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return (a > b || a != a) ? a : b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

struct reduce_min {
  static constexpr const char* name = "reduce_min";
  template <class T>
  using result = T;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return detail::highest_v<R>; }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return (a < b || a != a) ? a : b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

struct reduce_all {
  static constexpr const char* name = "all";
  template <class T>
  using result = bool;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return true; }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return a && b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

struct reduce_any {
  static constexpr const char* name = "any";
  template <class T>
  using result = bool;
  template <class R>
  FLUXION_HOST_DEVICE static R identity() { return false; }
  template <class R>
  FLUXION_HOST_DEVICE static R combine(R a, R b) { return a || b; }
  template <class R>
  FLUXION_HOST_DEVICE static R finalize(R a, index_t) { return a; }
};

}  // namespace fluxion::ops
