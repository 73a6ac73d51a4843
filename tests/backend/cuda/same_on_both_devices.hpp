// Test helper for the device-generic tests: runs one expression builder on cpu tensors and on
// their fx::cuda copies and checks that shapes, element types and values agree. The cpu evaluator
// is the independent reference (xsimd loops and a thread pool, no Thrust).
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "fluxion/cuda.hpp"

namespace fluxion_test {

namespace fx = fluxion;

/// A cpu tensor of shape s with deterministic pseudo-random values in [lo, hi) (integers: the
/// same range, truncated; bool: about half true).
template <class T>
fx::tensor<T> filled(const fx::shape& s, std::uint64_t seed, double lo = -2.0, double hi = 2.0) {
  fx::tensor<T> t(s);
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  T* p = t.mutable_data();
  for (fx::index_t i = 0; i < t.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;  // [0, 1)
    if constexpr (std::is_same_v<T, bool>) p[i] = u < 0.5;
    else p[i] = static_cast<T>(lo + (hi - lo) * u);
  }
  return t;
}

/// A cpu tensor holding `values` under shape s.
template <class T>
fx::tensor<T> with_values(const fx::shape& s, const std::vector<T>& values) {
  REQUIRE(static_cast<fx::index_t>(values.size()) == s.size());
  fx::tensor<T> t(s);
  for (std::size_t i = 0; i < values.size(); ++i) t.mutable_data()[i] = values[i];
  return t;
}

/// Element-by-element comparison: exact for integers and bool, |a - b| <= rtol * (1 + max(|a|, |b|))
/// for floating point, NaN equal to NaN and infinities equal when their signs agree.
template <class T>
void check_values(const std::vector<T>& got, const std::vector<T>& want, double rtol) {
  REQUIRE(got.size() == want.size());
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    bool ok;
    if constexpr (std::is_floating_point_v<T>) {
      const double a = static_cast<double>(got[i]), b = static_cast<double>(want[i]);
      if (std::isnan(a) || std::isnan(b)) ok = std::isnan(a) && std::isnan(b);
      else if (std::isinf(a) || std::isinf(b)) ok = a == b;
      else ok = std::abs(a - b) <= rtol * (1.0 + std::max(std::abs(a), std::abs(b)));
    } else {
      ok = got[i] == want[i];
    }
    if (!ok && reported++ < 5) {
      INFO("element " << i << ": cuda gives " << +got[i] << ", cpu gives " << +want[i]);
      CHECK(ok);
    }
  }
  CHECK(reported == 0);
}

template <class T>
constexpr double default_rtol() {
  if constexpr (std::is_same_v<T, float>) return 1e-5;
  else if constexpr (std::is_same_v<T, double>) return 1e-12;
  else return 0.0;
}

/// Evaluates f(args...) on the cpu and f(to<cuda>(args)...) on the cuda device, checks that they
/// agree, and returns the cpu result for checks against hand-computed values.
template <class F, class... T>
auto same_on_both_devices(double rtol, F&& f, const fx::tensor<T>&... args) {
  auto want = fx::eval(f(args...));
  auto got = fx::eval(f(fx::to<fx::cuda>(args)...));
  using W = decltype(want);
  using G = decltype(got);
  static_assert(std::is_same_v<typename W::device_type, fx::cpu>);
  static_assert(std::is_same_v<typename G::device_type, fx::cuda>);
  static_assert(std::is_same_v<typename W::value_type, typename G::value_type>,
                "the same expression must have the same element type on both devices");
  CHECK(got.shape() == want.shape());
  check_values(got.to_vector(), want.to_vector(), rtol);
  return want;
}

template <class F, class T0, class... T>
auto same_on_both_devices(F&& f, const fx::tensor<T0>& arg0, const fx::tensor<T>&... args) {
  using R = fx::value_type_t<decltype(fx::eval(f(arg0, args...)))>;
  return same_on_both_devices(default_rtol<R>(), f, arg0, args...);
}

/// Sets a process-wide setting for one scope.
template <class T>
struct scoped_setting {
  T& setting;
  T saved;
  scoped_setting(T& s, T value) : setting(s), saved(s) { setting = value; }
  ~scoped_setting() { setting = saved; }
};
template <class T>
struct scoped_setting<std::atomic<T>> {
  std::atomic<T>& setting;
  T saved;
  scoped_setting(std::atomic<T>& s, T value) : setting(s), saved(s.load()) { setting = value; }
  ~scoped_setting() { setting = saved; }
};

}  // namespace fluxion_test
