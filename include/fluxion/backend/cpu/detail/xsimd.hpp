// <xsimd/xsimd.hpp>, included with g++ 12's false uninitialized-variable warnings off: with AVX-512,
// xsimd's floor, nearbyint, shifts and int conversions use intrinsics whose _mm512_undefined_*()
// pass-through an unmasked operation never reads (GCC bug 105593, fixed in 13). Under -Wall every
// program that used exp, sin or log printed pages of them. The state applies where xsimd's
// templates are defined, so it covers them also where fluxion's kernels inline them.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <xsimd/xsimd.hpp>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
