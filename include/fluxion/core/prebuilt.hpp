// fluxion's core non-template code (the thread pool, the host allocator's cache, shape helpers,
// error formatting) for programs built with FLUXION_PREBUILT_KERNELS: such a program sees only
// the declarations, and links the definitions from src/kernels.cpp, compiled once with the
// program's flags (CMake: fluxion_target_prebuilt_kernels(app)). Without the macro the
// definitions are inline, as everywhere else in fluxion: nothing else changes. None of this code
// depends on the autodiff settings or on the device system.
//
//   FLUXION_CORE_DEFINITIONS  1 where the definitions are compiled (header-only programs, and
//                             src/kernels.cpp), 0 in programs with prebuilt kernels
//   FLUXION_CORE_INLINE       what those definitions are declared with: inline, nothing in
//                             src/kernels.cpp (FLUXION_CORE_NOINLINE: the same for helpers that
//                             are FLUXION_NOINLINE header-only)
#pragma once

#if defined(FLUXION_PREBUILT_KERNELS_SOURCE)  // src/kernels.cpp: the one strong definition of each
#define FLUXION_CORE_DEFINITIONS 1
#define FLUXION_CORE_INLINE
#define FLUXION_CORE_NOINLINE
#else
#if defined(FLUXION_PREBUILT_KERNELS)
#define FLUXION_CORE_DEFINITIONS 0
#else
#define FLUXION_CORE_DEFINITIONS 1
#endif
#define FLUXION_CORE_INLINE inline
#define FLUXION_CORE_NOINLINE FLUXION_NOINLINE  // header-only: compiled once per program, not per caller
#endif
