// The Fashion-MNIST reader both compile-time programs share (mlp_train.cpp and its LibTorch twin),
// so that they differ only in the library they train with.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

// Reads an IDX file (gzip), skipping `header` bytes; returns its bytes.
inline std::vector<std::uint8_t> read_idx(const std::string& path, int header) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::vector<std::uint8_t> bytes, chunk(1 << 16);
  int n;
  while ((n = gzread(f, chunk.data(), static_cast<unsigned>(chunk.size()))) > 0)
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + n);
  gzclose(f);
  if (static_cast<int>(bytes.size()) < header) throw std::runtime_error("truncated " + path);
  return {bytes.begin() + header, bytes.end()};
}
