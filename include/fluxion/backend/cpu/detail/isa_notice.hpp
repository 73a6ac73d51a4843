// A one-line notice on stderr, once per process, when the CPU has wider SIMD vectors than the
// program was compiled for, as TensorFlow's "Your CPU supports instructions that this TensorFlow
// binary was not compiled to use: AVX2 FMA". A program built without -march=native (CMake adds no
// such flag by itself) runs fluxion's loops on 128-bit SSE2 vectors, 2-4x slower than the figures in
// the README, and nothing else would say why. The thread pool prints it when it starts.
//
// Silence it with the macro FLUXION_NO_ISA_NOTICE (defined when the program compiles) or the
// environment variable FLUXION_NO_ISA_NOTICE (set to anything but 0), e.g. for a binary built for
// generic x86-64 on purpose.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace fluxion::detail {

/// The SIMD levels fluxion's CPU kernels are built for (backend/cpu/detail/simd_arch.hpp).
enum class simd_level { sse2 = 0, avx2_fma = 1, avx512 = 2 };

inline const char* simd_level_name(simd_level l) noexcept {
  switch (l) {
    case simd_level::avx512: return "AVX-512 (16 floats a vector)";
    case simd_level::avx2_fma: return "AVX2 and FMA (8 floats a vector)";
    default: return "SSE2 (4 floats a vector)";
  }
}

/// What this translation unit's kernels were compiled for.
constexpr simd_level compiled_simd_level() noexcept {
#if defined(__AVX512F__)
  return simd_level::avx512;
#elif defined(__AVX2__) && defined(__FMA__)
  return simd_level::avx2_fma;
#else
  return simd_level::sse2;
#endif
}

/// What the CPU running the program supports (x86-64 with g++ or clang; sse2 elsewhere).
inline simd_level cpu_simd_level() noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) return simd_level::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return simd_level::avx2_fma;
#endif
  return simd_level::sse2;
}

/// The notice for code compiled for `compiled` on a CPU of level `cpu`: empty unless the CPU has more.
inline std::string isa_notice(simd_level cpu, simd_level compiled) {
  if (static_cast<int>(cpu) <= static_cast<int>(compiled)) return {};
  return std::string("fluxion: this CPU supports ") + simd_level_name(cpu) + ", but this program was compiled for " +
         simd_level_name(compiled) +
         ", so fluxion's loops run at a fraction of their speed. Compile with -march=native (CMake: "
         "target_compile_options(app PRIVATE -march=native)); set FLUXION_NO_ISA_NOTICE=1 to silence this.\n";
}

/// The notice this process prints: isa_notice for this CPU, unless the environment variable
/// FLUXION_NO_ISA_NOTICE is set to anything but 0.
inline std::string process_isa_notice() {
  const char* quiet = std::getenv("FLUXION_NO_ISA_NOTICE");
  if (quiet != nullptr && std::string(quiet) != "0") return {};
  return isa_notice(cpu_simd_level(), compiled_simd_level());
}

/// Prints process_isa_notice() to stderr, the first time only.
inline void print_isa_notice_once() {
#if !defined(FLUXION_NO_ISA_NOTICE)
  static const bool printed = [] {
    const std::string notice = process_isa_notice();
    if (notice.empty()) return false;
    std::fputs(notice.c_str(), stderr);
    return true;
  }();
  (void)printed;
#endif
}

}  // namespace fluxion::detail
