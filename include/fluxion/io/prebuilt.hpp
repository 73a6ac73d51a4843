// The I/O code that fluxion_target_prebuilt_kernels compiles once, in src/io.cpp, for programs
// built with FLUXION_PREBUILT_KERNELS: safetensors files, checkpoints (saving, validating and
// restoring, the checkpoint manager) and TensorBoard summaries. Such a program sees only their declarations, and the
// `extern template` declarations of their templates for the common element types, optimizers and
// objects; a model's own binding (its variables) is still compiled in the program. Without the
// macro the definitions are inline, as everywhere else in fluxion: nothing else changes.
//
//   FLUXION_IO_DEFINITIONS   1 where the non-template definitions are compiled (header-only
//                            programs, and src/io.cpp), 0 in programs with prebuilt kernels
//   FLUXION_IO_INLINE        what those definitions are declared with: inline, nothing in src/io.cpp
//   FLUXION_IO_PREBUILT      1 where the templates' specializations are prebuilt (declared extern)
//   FLUXION_IO_EXTERN        extern in programs, nothing in src/io.cpp (which defines them)
//   FLUXION_IO_TEMPLATE_INLINE  what the templates that may be prebuilt are declared with: inline
//                            header-only (as member templates defined in their class are), nothing
//                            where they are prebuilt (`extern template` does not keep g++ from
//                            instantiating an inline function at -O2)
#pragma once

// Prebuilt: in src/io.cpp, and in every program built with FLUXION_PREBUILT_KERNELS.
#if defined(FLUXION_PREBUILT_IO_SOURCE) || defined(FLUXION_PREBUILT_KERNELS)
#define FLUXION_IO_PREBUILT 1
#define FLUXION_IO_TEMPLATE_INLINE
#else
#define FLUXION_IO_PREBUILT 0
#define FLUXION_IO_TEMPLATE_INLINE inline
#endif

#if defined(FLUXION_PREBUILT_IO_SOURCE)  // src/io.cpp: the one strong definition of each
#define FLUXION_IO_DEFINITIONS 1
#define FLUXION_IO_INLINE
#define FLUXION_IO_EXTERN
#else
#define FLUXION_IO_DEFINITIONS !FLUXION_IO_PREBUILT
#define FLUXION_IO_INLINE inline
#define FLUXION_IO_EXTERN extern
#endif
