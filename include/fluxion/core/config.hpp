// Configuration macros shared by every fluxion header.
//
// FLUXION_HOST_DEVICE marks functions that run on both the host and a CUDA device. Without nvcc it
// is plain `inline`, so the same code is compiled and tested on the CPU (through Thrust's OpenMP
// backend for the device path).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define FLUXION_HOST_DEVICE __host__ __device__ inline
#define FLUXION_CUDA_COMPILER 1
#else
#define FLUXION_HOST_DEVICE inline
#define FLUXION_CUDA_COMPILER 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define FLUXION_ALWAYS_INLINE inline __attribute__((always_inline))
#define FLUXION_RESTRICT __restrict__
#else
#define FLUXION_ALWAYS_INLINE inline
#define FLUXION_RESTRICT
#endif

namespace fluxion {

using index_t = std::int64_t;

/// The largest rank a tensor may have.
inline constexpr int max_rank = 8;

/// Buffers are aligned to a cache line, which also satisfies every SIMD width up to AVX-512.
inline constexpr std::size_t buffer_alignment = 64;

}  // namespace fluxion
