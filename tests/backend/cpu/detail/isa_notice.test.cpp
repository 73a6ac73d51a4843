// The notice a program prints when the CPU has wider SIMD vectors than it was compiled for
// (backend/cpu/detail/isa_notice.hpp). Built three times: with -march=native (no notice expected on
// the machine that built it) and for baseline x86-64 and Haswell (cmake/tests.cmake), where a
// machine with AVX2 or AVX-512 must get it.
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>

#include "fluxion/backend/cpu/thread_pool.hpp"

namespace fx = fluxion;
using fx::detail::simd_level;

namespace {

// Everything the pool writes to stderr while `f` runs (the pool is started inside `f`).
template <class F>
std::string captured_stderr(F&& f) {
  std::fflush(stderr);
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp != nullptr);
  const int saved = dup(fileno(stderr));
  dup2(fileno(tmp), fileno(stderr));
  f();
  std::fflush(stderr);
  dup2(saved, fileno(stderr));
  close(saved);
  std::string out;
  std::rewind(tmp);
  for (int c; (c = std::fgetc(tmp)) != EOF;) out += static_cast<char>(c);
  std::fclose(tmp);
  return out;
}

}  // namespace

// First in the file, so that the pool starts here.
TEST_CASE("isa_notice: the pool prints the notice once when it starts, on stderr") {
  unsetenv("FLUXION_NO_ISA_NOTICE");
  const std::string expected = fx::detail::process_isa_notice();
  const std::string printed = captured_stderr([] {
    fx::set_num_threads(2);
    fx::detail::parallel_for(4, [](fx::index_t) {});
    fx::detail::parallel_for(4, [](fx::index_t) {});
  });
  CHECK(printed == expected);
  const std::string again = captured_stderr([] { fx::detail::print_isa_notice_once(); });
  CHECK(again.empty());
  // The CPU runs this binary, so it has at least what the binary was compiled for.
  CHECK(static_cast<int>(fx::detail::cpu_simd_level()) >= static_cast<int>(fx::detail::compiled_simd_level()));
  if (fx::detail::cpu_simd_level() != fx::detail::compiled_simd_level()) {
    CHECK(printed.find("-march=native") != std::string::npos);
  } else {
    CHECK(printed.empty());
  }
}

TEST_CASE("isa_notice: only a CPU with more than the program was compiled for gets a notice") {
  const simd_level levels[] = {simd_level::sse2, simd_level::avx2_fma, simd_level::avx512};
  for (simd_level cpu : levels)
    for (simd_level compiled : levels) {
      const std::string n = fx::detail::isa_notice(cpu, compiled);
      CAPTURE(static_cast<int>(cpu));
      CAPTURE(static_cast<int>(compiled));
      if (static_cast<int>(cpu) <= static_cast<int>(compiled)) {
        CHECK(n.empty());
      } else {
        CHECK(n.find(std::string("this CPU supports ") + fx::detail::simd_level_name(cpu)) != std::string::npos);
        CHECK(n.find(std::string("compiled for ") + fx::detail::simd_level_name(compiled)) != std::string::npos);
        CHECK(n.find("-march=native") != std::string::npos);
        CHECK(n.find("FLUXION_NO_ISA_NOTICE=1") != std::string::npos);
        CHECK(n.back() == '\n');
      }
    }
  CHECK(fx::detail::isa_notice(simd_level::avx512, simd_level::sse2).find("AVX-512 (16 floats a vector)") !=
        std::string::npos);
}

TEST_CASE("isa_notice: the level compiled for follows the compiler's target macros") {
#if defined(__AVX512F__)
  CHECK(fx::detail::compiled_simd_level() == simd_level::avx512);
#elif defined(__AVX2__) && defined(__FMA__)
  CHECK(fx::detail::compiled_simd_level() == simd_level::avx2_fma);
#else
  CHECK(fx::detail::compiled_simd_level() == simd_level::sse2);
#endif
}

TEST_CASE("isa_notice: FLUXION_NO_ISA_NOTICE silences it, unless it is 0") {
  const std::string full = fx::detail::isa_notice(fx::detail::cpu_simd_level(), fx::detail::compiled_simd_level());
  setenv("FLUXION_NO_ISA_NOTICE", "1", 1);
  CHECK(fx::detail::process_isa_notice().empty());
  setenv("FLUXION_NO_ISA_NOTICE", "yes", 1);
  CHECK(fx::detail::process_isa_notice().empty());
  setenv("FLUXION_NO_ISA_NOTICE", "0", 1);
  CHECK(fx::detail::process_isa_notice() == full);
  unsetenv("FLUXION_NO_ISA_NOTICE");
  CHECK(fx::detail::process_isa_notice() == full);
}
