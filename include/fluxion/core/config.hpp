// Configuration macros shared by every fluxion header.
//
// FLUXION_HOST_DEVICE marks functions that run on both the host and a CUDA device. Without nvcc it
// is plain `inline`, so the same code is compiled and tested on the CPU (through Thrust's OpenMP
// backend for the device path).
#pragma once

#include <cstddef>
#include <cstdint>

// Autodiff's two compile-time settings. Each floating-point statement a program materializes
// instantiates what these ask for, so they decide much of a program's compile time:
//
// FLUXION_MAX_DERIVATIVE_ORDER (default 1): the highest derivative order the tape and forward
// mode record. 0 leaves autodiff out (inference-only code); 2 or more allows gradients of
// gradients and Hessian-vector products.
//
// FLUXION_FORWARD_MODE (default 0): 1 compiles forward mode in (fx::forward_accumulator, fx::jvp,
// forward-over-reverse). Off, a statement instantiates no tangent function, about a fifth of the
// code a training program generates; using forward mode without it fails to compile and says so.
//
// Both may differ between translation units of one program: the materialization hook's name
// carries them (detail::autodiff_config), so code compiled with one setting never links in place
// of the other's.
#ifndef FLUXION_MAX_DERIVATIVE_ORDER
#define FLUXION_MAX_DERIVATIVE_ORDER 1
#endif
#ifndef FLUXION_FORWARD_MODE
#define FLUXION_FORWARD_MODE 0
#endif

#if defined(__CUDACC__)
#define FLUXION_HOST_DEVICE __host__ __device__ inline
#define FLUXION_CUDA_COMPILER 1
#else
#define FLUXION_HOST_DEVICE inline
#define FLUXION_CUDA_COMPILER 0
#endif

// FLUXION_NOINLINE marks a non-template helper (shape checks and their error messages) that many
// templates call: compiled once per program instead of inlined into every statement type (issue 10).
#if defined(__GNUC__) || defined(__clang__)
#define FLUXION_ALWAYS_INLINE inline __attribute__((always_inline))
#define FLUXION_NOINLINE inline __attribute__((noinline))
#define FLUXION_RESTRICT __restrict__
#else
#define FLUXION_ALWAYS_INLINE inline
#define FLUXION_NOINLINE inline
#define FLUXION_RESTRICT
#endif

namespace fluxion {

using index_t = std::int64_t;

inline constexpr int max_derivative_order = FLUXION_MAX_DERIVATIVE_ORDER;
inline constexpr bool forward_mode_enabled = FLUXION_FORWARD_MODE != 0;

namespace detail {
/// Names the autodiff settings in the materialization hook's template arguments (see above).
inline constexpr int autodiff_config = FLUXION_MAX_DERIVATIVE_ORDER * 2 + (FLUXION_FORWARD_MODE != 0);
}  // namespace detail

/// The largest rank a tensor may have.
inline constexpr int max_rank = 8;

/// Buffers are aligned to a cache line, which also satisfies every SIMD width up to AVX-512.
inline constexpr std::size_t buffer_alignment = 64;

}  // namespace fluxion
