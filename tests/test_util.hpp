// Shared helpers for the tests: random tensors and naive references.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <fluxion/tensor.hpp>

namespace fx = fluxion;

namespace test {

template <class T>
fx::tensor<T> random_tensor(const fx::shape& s, unsigned seed, double lo = -2, double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  fx::tensor<T> t(s);
  T* p = t.mutable_data();
  for (fx::index_t i = 0; i < s.size(); ++i) {
    if constexpr (std::is_same_v<T, bool>) p[i] = d(rng) > 0;
    else if constexpr (std::is_integral_v<T>) p[i] = static_cast<T>(std::lround(d(rng)));
    else p[i] = static_cast<T>(d(rng));
  }
  return t;
}

/// Row-major coordinates of flat index i in shape s.
inline std::vector<fx::index_t> unravel(fx::index_t i, const fx::shape& s) {
  std::vector<fx::index_t> c(static_cast<std::size_t>(s.rank()));
  for (int d = s.rank() - 1; d >= 0; --d) {
    c[static_cast<std::size_t>(d)] = i % s[d];
    i /= s[d];
  }
  return c;
}

/// Flat index in `s` of output coordinates `c` (of a possibly higher rank), by broadcasting.
inline fx::index_t broadcast_index(const std::vector<fx::index_t>& c, const fx::shape& s) {
  const int shift = static_cast<int>(c.size()) - s.rank();
  fx::index_t f = 0;
  for (int d = 0; d < s.rank(); ++d) f = f * s[d] + (s[d] == 1 ? 0 : c[static_cast<std::size_t>(d + shift)]);
  return f;
}

template <class T>
void check_close(const std::vector<T>& got, const std::vector<T>& want, double rtol = 1e-6, double atol = 1e-6) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    if (g == w) continue;  // includes matching infinities
    if (std::isnan(w)) {
      CHECK_MESSAGE(std::isnan(g), "element " << i);
      continue;
    }
    CHECK_MESSAGE(std::abs(g - w) <= atol + rtol * std::abs(w), "element " << i << ": got " << g << ", want " << w);
  }
}

/// Checks that `f` throws E whose message contains `text`.
template <class E, class F>
void check_throws_with(F&& f, const std::string& text) {
  try {
    f();
    FAIL("expected an exception containing: " << text);
  } catch (const E& e) {
    CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, "message was: " << std::string(e.what()));
  }
}

}  // namespace test
