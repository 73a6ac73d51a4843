// Shared by the libFuzzer targets: the input written to a file in /dev/shm, for readers that take a
// path. Every target accepts fluxion::error (a clean refusal) and nothing else: a crash, a sanitizer
// report or another exception is a finding.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace fuzz {
inline std::string write_input(const std::uint8_t* data, std::size_t size, const char* suffix) {
  const std::string path = "/dev/shm/fluxion_fuzz_" + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
  return path;
}
}  // namespace fuzz
