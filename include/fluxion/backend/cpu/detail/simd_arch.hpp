// The xsimd architecture fluxion's CPU kernels use: the widest the compiler targets
// (xsimd::default_arch), except in an unoptimized build for an AVX-512 target.
//
// Without optimization g++'s AVX-512 intrinsics are macros whose casts ignore xsimd's conversions,
// so xsimd's AVX-512 kernels (log, sincos, select, ...) do not compile at -O0 (g++ 12, xsimd 10):
// a CMake Debug build of a fluxion program failed on an AVX-512 machine. Such a build uses AVX2 with
// FMA instead: slower, as an unoptimized build is anyway, and it compiles.
#pragma once

#include "xsimd.hpp"

#if defined(__AVX512F__) && !defined(__OPTIMIZE__) && defined(__AVX2__) && defined(__FMA__)
#define FLUXION_SIMD_AVX512_CAPPED 1
#else
#define FLUXION_SIMD_AVX512_CAPPED 0
#endif

namespace fluxion::detail {

#if FLUXION_SIMD_AVX512_CAPPED
using simd_arch = xsimd::fma3<xsimd::avx2>;
#else
using simd_arch = xsimd::default_arch;
#endif

}  // namespace fluxion::detail
