// Random tensors from a counter-based generator: the same seed gives the same numbers, whatever
// the thread count and however the work is split.
//
//   fx::random::generator gen{42};
//   auto u = fx::random::uniform<float>({1 << 20}, gen);             // [0, 1)
//   auto n = fx::random::normal<double>({64, 64}, gen, 0.0, 0.02);
//   auto t = fx::random::truncated_normal<float>({784, 128}, gen);   // within 2 stddev
//   auto k = fx::random::uniform<std::int32_t>({10}, gen, 0, 6);     // dice: [0, 6)
//
// The generator is Philox-4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), the algorithm behind tf.random.Generator (the values differ from
// TensorFlow's: how blocks become values is fluxion's own). The seed is its key; each 128-bit
// block is the cipher of a counter. A draw reserves as many blocks as it needs by advancing the
// generator's offset, and element i of the draw is computed from block offset + i / (elements per
// block) alone, so any chunking gives the same values and successive draws never overlap.
// Elements per block: 4 for float and int32, 2 for double and int64. Uniform values are exact
// functions of the bits; normal values go through xsimd's log, sin and cos, so builds for other
// SIMD instruction sets may differ from this one in the last bits.
//
// Draws without a generator argument use the global generator, seeded with 0 until
// fx::random::set_seed is called (like tf.random.set_seed, but deterministic by default).
#pragma once

#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <type_traits>

#include "../backend/cpu/detail/xsimd.hpp"

#include "../backend/cpu/detail/simd_arch.hpp"
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "creation.hpp"
#include "tensor.hpp"

namespace fluxion::random {

using philox_counter = std::array<std::uint32_t, 4>;
using philox_key = std::array<std::uint32_t, 2>;

namespace detail {

inline constexpr std::uint32_t philox_m0 = 0xD2511F53u, philox_m1 = 0xCD9E8D57u;  // multipliers
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u, philox_w1 = 0xBB67AE85u;  // Weyl key increments

/// One Philox-4x32 round, on words held anywhere (one block, or one lane of a group).
FLUXION_ALWAYS_INLINE void philox_round(std::uint32_t& c0, std::uint32_t& c1, std::uint32_t& c2, std::uint32_t& c3,
                                        std::uint32_t k0, std::uint32_t k1) noexcept {
  const std::uint64_t p0 = static_cast<std::uint64_t>(philox_m0) * c0;
  const std::uint64_t p1 = static_cast<std::uint64_t>(philox_m1) * c2;
  c0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
  c2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
  c1 = static_cast<std::uint32_t>(p1);
  c3 = static_cast<std::uint32_t>(p0);
}

/// The counter of block `index`, attempt `attempt`: words 0-1 the index, word 2 the attempt.
inline philox_counter block_counter(std::uint64_t index, std::uint32_t attempt) noexcept {
  return {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32), attempt, 0u};
}

}  // namespace detail

/// The Philox-4x32 block cipher with `Rounds` rounds (10 is the standard strength).
template <int Rounds = 10>
inline philox_counter philox4x32(philox_counter c, philox_key k) noexcept {
  for (int r = 0; r < Rounds; ++r) {
    if (r > 0) {
      k[0] += detail::philox_w0;
      k[1] += detail::philox_w1;
    }
    detail::philox_round(c[0], c[1], c[2], c[3], k[0], k[1]);
  }
  return c;
}

/// A Philox-4x32-10 stream: a 64-bit seed (the key) and an offset (the next unused block).
/// Concurrent draws from one generator are safe and get disjoint blocks; their order decides
/// which draw gets which blocks. Copying a generator copies its state: the copy repeats the
/// original's future draws.
class generator {
 public:
  explicit generator(std::uint64_t seed) noexcept : m_seed(seed) {}
  generator(const generator& other) noexcept : m_seed(other.m_seed), m_offset(other.offset()) {}
  generator& operator=(const generator& other) noexcept {
    m_seed = other.m_seed;
    m_offset.store(other.offset(), std::memory_order_relaxed);
    return *this;
  }

  std::uint64_t seed() const noexcept { return m_seed; }
  /// Blocks consumed so far.
  std::uint64_t offset() const noexcept { return m_offset.load(std::memory_order_relaxed); }

  /// Restarts the stream of `seed` at offset 0 (not safe while another thread draws).
  void reset(std::uint64_t seed) noexcept {
    m_seed = seed;
    m_offset.store(0, std::memory_order_relaxed);
  }
  /// Skips `n_blocks` blocks.
  void skip(std::uint64_t n_blocks) noexcept { reserve(n_blocks); }
  /// Reserves `n_blocks` blocks for the caller and returns the first one.
  std::uint64_t reserve(std::uint64_t n_blocks) noexcept {
    return m_offset.fetch_add(n_blocks, std::memory_order_relaxed);
  }

  /// The 128 random bits of block `index`. `attempt` selects an independent block at the same
  /// index, for rejection sampling (truncated_normal redraws with attempts 1, 2, ...).
  philox_counter block(std::uint64_t index, std::uint32_t attempt = 0) const noexcept {
    return philox4x32<10>(detail::block_counter(index, attempt), key());
  }
  /// The Philox key: the seed's low and high words.
  philox_key key() const noexcept {
    return {static_cast<std::uint32_t>(m_seed), static_cast<std::uint32_t>(m_seed >> 32)};
  }

 private:
  std::uint64_t m_seed;
  std::atomic<std::uint64_t> m_offset{0};
};

/// The generator used by draws that take none.
inline generator& global_generator() noexcept {
  static generator g{0};
  return g;
}

/// Reseeds the global generator and restarts its stream (call it before other threads draw).
inline void set_seed(std::uint64_t seed) noexcept { global_generator().reset(seed); }

namespace detail {

using fluxion::index_t;
using fluxion::detail::describe_scalar;

template <class T>
inline constexpr int per_block = sizeof(T) == 4 ? 4 : 2;

/// Blocks are enciphered 16 at a time, words stored apart (w[word][block]), so the rounds and
/// the transforms run as SIMD loops. Every element is computed the same way, as part of a full
/// group, whatever the draw's size: the tail of a draw computes a whole group and keeps a part.
inline constexpr int group_blocks = 16;
struct block_group {
  alignas(64) std::uint32_t w[4][group_blocks];
};

inline void philox_group(std::uint64_t first, std::uint32_t attempt, philox_key key, block_group& g) noexcept {
  auto& c = g.w;
  for (int l = 0; l < group_blocks; ++l) {
    const philox_counter start = block_counter(first + static_cast<std::uint64_t>(l), attempt);
    for (int j = 0; j < 4; ++j) c[j][l] = start[static_cast<std::size_t>(j)];
  }
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += philox_w0;
      k1 += philox_w1;
    }
    for (int l = 0; l < group_blocks; ++l) philox_round(c[0][l], c[1][l], c[2][l], c[3][l], k0, k1);
  }
}

/// Uniform on [0, 1) from 24 random bits (float) or 53 (double): every value is a multiple of
/// 2^-24 or 2^-53, and 1 is never produced.
inline float unit_float(std::uint32_t x) noexcept { return static_cast<float>(x >> 8) * 0x1p-24f; }
inline double unit_double(std::uint32_t hi, std::uint32_t lo) noexcept {
  return static_cast<double>(((static_cast<std::uint64_t>(hi) << 32) | lo) >> 11) * 0x1p-53;
}

/// Box–Muller on n pairs of uniforms: z0 = r cos(theta), z1 = r sin(theta) with r = sqrt(-2 log(1 -
/// u1)) (1 - u1 lies in (0, 1], so the logarithm is finite) and theta = 2 pi u2. n is a multiple
/// of the SIMD width, or the scalar loop takes the rest.
template <class T>
void box_muller(const T* u1, const T* u2, T* z0, T* z1, int n) noexcept {
  using batch = xsimd::batch<T, ::fluxion::detail::simd_arch>;
  constexpr int width = static_cast<int>(batch::size);
  constexpr T two_pi = 2 * std::numbers::pi_v<T>;
  int i = 0;
  for (; i + width <= n; i += width) {
    const batch r = xsimd::sqrt(batch(T(-2)) * xsimd::log(batch(T(1)) - batch::load_unaligned(u1 + i)));
    const auto [s, c] = xsimd::sincos(batch(two_pi) * batch::load_unaligned(u2 + i));
    (r * c).store_unaligned(z0 + i);
    (r * s).store_unaligned(z1 + i);
  }
  for (; i < n; ++i) {
    const T r = std::sqrt(T(-2) * std::log(T(1) - u1[i]));
    z0[i] = r * std::cos(two_pi * u2[i]);
    z1[i] = r * std::sin(two_pi * u2[i]);
  }
}

/// Standard normal values of a group, element 4b + j (float) or 2b + j (double) from block b.
template <class T>
void normal_group(const block_group& g, T* out) noexcept {
  constexpr int n = group_blocks;
  alignas(64) T u1[n], u2[n], z0[n], z1[n];
  if constexpr (std::is_same_v<T, float>) {
    for (int p = 0; p < 2; ++p) {
      for (int b = 0; b < n; ++b) {
        u1[b] = unit_float(g.w[2 * p][b]);
        u2[b] = unit_float(g.w[2 * p + 1][b]);
      }
      box_muller(u1, u2, z0, z1, n);
      for (int b = 0; b < n; ++b) {
        out[4 * b + 2 * p] = z0[b];
        out[4 * b + 2 * p + 1] = z1[b];
      }
    }
  } else {
    for (int b = 0; b < n; ++b) {
      u1[b] = unit_double(g.w[0][b], g.w[1][b]);
      u2[b] = unit_double(g.w[2][b], g.w[3][b]);
    }
    box_muller(u1, u2, z0, z1, n);
    for (int b = 0; b < n; ++b) {
      out[2 * b] = z0[b];
      out[2 * b + 1] = z1[b];
    }
  }
}

/// Element j (of per_block<T>) of the standard normal values of one block, redrawn with `attempt`.
template <class T>
T normal_element(philox_key key, std::uint64_t block, std::uint32_t attempt, int j) noexcept {
  const philox_counter x = philox4x32<10>(block_counter(block, attempt), key);
  T u1[1], u2[1], z0[1], z1[1];
  int pair;
  if constexpr (std::is_same_v<T, float>) {
    pair = j / 2;
    u1[0] = unit_float(x[static_cast<std::size_t>(2 * pair)]);
    u2[0] = unit_float(x[static_cast<std::size_t>(2 * pair + 1)]);
  } else {
    u1[0] = unit_double(x[0], x[1]);
    u2[0] = unit_double(x[2], x[3]);
  }
  box_muller(u1, u2, z0, z1, 1);
  return j % 2 == 0 ? z0[0] : z1[0];
}

/// Reserves the blocks of a draw of shape `s` and fills it by groups: values(first block of the
/// group, its enciphered blocks, T out[group_blocks * per_block<T>]).
template <class T, class Device, class Values>
tensor<T, Device> draw(const shape& s, generator& gen, Values values) {
  constexpr index_t k = per_block<T>, group = group_blocks * per_block<T>;
  static_assert(fluxion::detail::generate_chunk % group == 0);
  const index_t n = s.size();
  const std::uint64_t first = gen.reserve(static_cast<std::uint64_t>((n + k - 1) / k));
  const philox_key key = gen.key();
  return fluxion::detail::generate_on_host<T, Device>(s, [&](T* out, index_t begin, index_t end) {
    block_group g;
    alignas(64) T tmp[group];
    for (index_t i = begin; i < end; i += group) {  // begin is a multiple of the group size
      const std::uint64_t b = first + static_cast<std::uint64_t>(i / k);
      philox_group(b, 0, key, g);
      values(b, g, tmp);
      const index_t m = end - i < group ? end - i : group;
      for (index_t j = 0; j < m; ++j) out[i + j] = tmp[j];
    }
  });
}

template <class T>
inline constexpr bool is_draw_type_v = std::is_same_v<T, float> || std::is_same_v<T, double> ||
                                       std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

template <class T>
void check_normal_arguments(const char* op, T mean, T stddev) {
  if (!(stddev >= 0) || !std::isfinite(stddev))
    throw invalid_argument(std::string(op) + ": stddev = " + describe_scalar(stddev) +
                           " must be finite and non-negative");
  if (!std::isfinite(mean))
    throw invalid_argument(std::string(op) + ": mean = " + describe_scalar(mean) + " must be finite");
}

}  // namespace detail

/// Uniform values in [minval, maxval). Floating values are minval + (maxval - minval) * u with u
/// on a grid of 2^-24 (float) or 2^-53 (double); integers use a multiply-shift of 32 or 64 random
/// bits (no rejection: a bias below range / 2^32 or range / 2^64).
template <class T, class Device = cpu>
tensor<T, Device> uniform(const shape& s, generator& gen, std::type_identity_t<T> minval = T(0),
                          std::type_identity_t<T> maxval = T(1)) {
  static_assert(detail::is_draw_type_v<T>,
                "fluxion::random::uniform<T>: T must be float, double, std::int32_t or std::int64_t.");
  if (!(minval < maxval))
    throw invalid_argument("uniform: minval = " + detail::describe_scalar(minval) +
                           " must be less than maxval = " + detail::describe_scalar(maxval));
  if constexpr (std::is_floating_point_v<T>) {
    const T range = maxval - minval;
    if (!std::isfinite(range))
      throw invalid_argument("uniform: the range from minval = " + detail::describe_scalar(minval) +
                             " to maxval = " + detail::describe_scalar(maxval) + " must be finite");
    // minval + range * u can round up to maxval; the largest value below maxval replaces it.
    const T below = std::nextafter(maxval, minval);
    return detail::draw<T, Device>(s, gen, [minval, range, below](std::uint64_t, const detail::block_group& g, T* out) {
      for (int b = 0; b < detail::group_blocks; ++b) {
        for (int j = 0; j < detail::per_block<T>; ++j) {
          T u;
          if constexpr (std::is_same_v<T, float>) u = detail::unit_float(g.w[j][b]);
          else u = detail::unit_double(g.w[2 * j][b], g.w[2 * j + 1][b]);
          const T v = minval + range * u;
          out[detail::per_block<T> * b + j] = v < below ? v : below;
        }
      }
    });
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    const std::uint64_t range = static_cast<std::uint64_t>(static_cast<std::int64_t>(maxval) - minval);
    return detail::draw<T, Device>(s, gen, [minval, range](std::uint64_t, const detail::block_group& g, T* out) {
      for (int b = 0; b < detail::group_blocks; ++b)
        for (int j = 0; j < 4; ++j)
          out[4 * b + j] = static_cast<T>(minval + static_cast<std::int64_t>((g.w[j][b] * range) >> 32));
    });
  } else {
    const std::uint64_t range = static_cast<std::uint64_t>(maxval) - static_cast<std::uint64_t>(minval);
    return detail::draw<T, Device>(s, gen, [minval, range](std::uint64_t, const detail::block_group& g, T* out) {
      for (int b = 0; b < detail::group_blocks; ++b) {
        for (int j = 0; j < 2; ++j) {
          const std::uint64_t r = (static_cast<std::uint64_t>(g.w[2 * j][b]) << 32) | g.w[2 * j + 1][b];
          const auto hi = static_cast<std::uint64_t>((static_cast<unsigned __int128>(r) * range) >> 64);
          out[2 * b + j] = static_cast<T>(static_cast<std::uint64_t>(minval) + hi);
        }
      }
    });
  }
}

/// Normal values with the given mean and standard deviation (Box–Muller).
template <class T, class Device = cpu>
tensor<T, Device> normal(const shape& s, generator& gen, std::type_identity_t<T> mean = T(0),
                         std::type_identity_t<T> stddev = T(1)) {
  constexpr bool floating = std::is_floating_point_v<T> && detail::is_draw_type_v<T>;
  static_assert(floating, "fluxion::random::normal<T>: T must be float or double.");
  if constexpr (floating) {  // else: the message above only
    detail::check_normal_arguments("normal", mean, stddev);
    return detail::draw<T, Device>(s, gen, [mean, stddev](std::uint64_t, const detail::block_group& g, T* out) {
      detail::normal_group(g, out);
      for (int i = 0; i < detail::group_blocks * detail::per_block<T>; ++i) out[i] = mean + stddev * out[i];
    });
  } else {
    return tensor<T, Device>();
  }
}

/// Normal values with the given mean and standard deviation, re-drawn while more than 2
/// standard deviations from the mean (tf.random.truncated_normal). Each rejected element alone
/// is re-drawn, from the block at its index with attempt 1, 2, ..., so the result still depends
/// only on the seed, the offset and the element's index.
template <class T, class Device = cpu>
tensor<T, Device> truncated_normal(const shape& s, generator& gen, std::type_identity_t<T> mean = T(0),
                                   std::type_identity_t<T> stddev = T(1)) {
  constexpr bool floating = std::is_floating_point_v<T> && detail::is_draw_type_v<T>;
  static_assert(floating, "fluxion::random::truncated_normal<T>: T must be float or double.");
  if constexpr (floating) {  // else: the message above only
    detail::check_normal_arguments("truncated_normal", mean, stddev);
    auto values = [key = gen.key(), mean, stddev](std::uint64_t first, const detail::block_group& g, T* out) {
      constexpr int k = detail::per_block<T>;
      detail::normal_group(g, out);
      for (int i = 0; i < detail::group_blocks * k; ++i) {
        T z = out[i];
        for (std::uint32_t attempt = 1; !(std::abs(z) <= T(2)); ++attempt)
          z = detail::normal_element<T>(key, first + static_cast<std::uint64_t>(i / k), attempt, i % k);
        out[i] = mean + stddev * z;
      }
    };
    return detail::draw<T, Device>(s, gen, values);
  } else {
    return tensor<T, Device>();
  }
}

// ---- the same draws from the global generator --------------------------------------------------

template <class T, class Device = cpu>
tensor<T, Device> uniform(const shape& s, std::type_identity_t<T> minval = T(0),
                          std::type_identity_t<T> maxval = T(1)) {
  return uniform<T, Device>(s, global_generator(), minval, maxval);
}
template <class T, class Device = cpu>
tensor<T, Device> normal(const shape& s, std::type_identity_t<T> mean = T(0), std::type_identity_t<T> stddev = T(1)) {
  return normal<T, Device>(s, global_generator(), mean, stddev);
}
template <class T, class Device = cpu>
tensor<T, Device> truncated_normal(const shape& s, std::type_identity_t<T> mean = T(0),
                                   std::type_identity_t<T> stddev = T(1)) {
  return truncated_normal<T, Device>(s, global_generator(), mean, stddev);
}

}  // namespace fluxion::random

// With FLUXION_PREBUILT_KERNELS, the draws of every model's initializers and data are compiled once,
// in src/kernels.cpp (see backend/cpu/prebuilt.hpp).
#if defined(FLUXION_PREBUILT_KERNELS) || defined(FLUXION_PREBUILT_KERNELS_SOURCE)
#define FLUXION_RANDOM_SPECIALIZATIONS(EXTERN, T)                                                                   \
  EXTERN template tensor<T, cpu> random::uniform<T, cpu>(const shape&, random::generator&, std::type_identity_t<T>, \
                                                         std::type_identity_t<T>);

namespace fluxion {
#if defined(FLUXION_PREBUILT_KERNELS_SOURCE)
FLUXION_RANDOM_SPECIALIZATIONS(, float)
FLUXION_RANDOM_SPECIALIZATIONS(, double)
FLUXION_RANDOM_SPECIALIZATIONS(, std::int32_t)
FLUXION_RANDOM_SPECIALIZATIONS(, std::int64_t)
template tensor<float, cpu> random::normal<float, cpu>(const shape&, random::generator&, float, float);
template tensor<double, cpu> random::normal<double, cpu>(const shape&, random::generator&, double, double);
#else
FLUXION_RANDOM_SPECIALIZATIONS(extern, float)
FLUXION_RANDOM_SPECIALIZATIONS(extern, double)
FLUXION_RANDOM_SPECIALIZATIONS(extern, std::int32_t)
FLUXION_RANDOM_SPECIALIZATIONS(extern, std::int64_t)
extern template tensor<float, cpu> random::normal<float, cpu>(const shape&, random::generator&, float, float);
extern template tensor<double, cpu> random::normal<double, cpu>(const shape&, random::generator&, double, double);
#endif
}  // namespace fluxion

#undef FLUXION_RANDOM_SPECIALIZATIONS
#endif
