// fx::data::input_file: sequential reading of a plain or gzip-compressed file, for the readers of
// fluxion::data.
//
//   fx::data::input_file in{"train-labels-idx1-ubyte.gz", "idx_labels"};   // gzip by its magic bytes
//   unsigned char header[8];
//   if (in.read(header, 8) < 8) { ... }      // fewer bytes only at the end of the data
//   in.offset();                             // bytes of (uncompressed) data read so far
//
// A file is read as gzip when it starts with the gzip magic bytes 1f 8b, whatever its name. Gzip
// needs zlib: link the CMake target fluxion::zlib, which defines FLUXION_HAS_ZLIB. Without it the
// headers still compile, and opening a gzip file throws fluxion::io_error saying so. A corrupt or
// truncated gzip stream throws fluxion::io_error naming the operation, the file and the
// uncompressed byte offset.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "../core/error.hpp"
#include "../io/file.hpp"

#if defined(FLUXION_HAS_ZLIB) && FLUXION_HAS_ZLIB
#include <zlib.h>
#define FLUXION_DATA_ZLIB 1
#else
#define FLUXION_DATA_ZLIB 0
#endif

namespace fluxion::data {

/// Whether this build reads .gz files (FLUXION_HAS_ZLIB, from the fluxion::zlib target).
inline constexpr bool has_zlib = FLUXION_DATA_ZLIB;

namespace detail {
using io::detail::file_fail;
}  // namespace detail

class input_file {
 public:
  /// Opens `path`; `op` names the public function in error messages.
  input_file(std::string path, std::string op) : m_path(std::move(path)), m_op(std::move(op)) {
    const std::uint64_t size = io::detail::readable_file_size(m_op, m_path, "a file");
    m_file = std::fopen(m_path.c_str(), "rb");
    if (!m_file) detail::file_fail(m_op, m_path, std::string("cannot open the file: ") + std::strerror(errno));
    unsigned char magic[2] = {0, 0};
    const std::size_t got = std::fread(magic, 1, 2, m_file);
    m_gzip = got == 2 && magic[0] == 0x1F && magic[1] == 0x8B;
    if (!m_gzip) {
      std::rewind(m_file);
      m_size = size;
      return;
    }
#if FLUXION_DATA_ZLIB
    std::fclose(std::exchange(m_file, nullptr));
    m_gz = gzopen(m_path.c_str(), "rb");
    if (!m_gz) detail::file_fail(m_op, m_path, std::string("cannot open the gzip file: ") + std::strerror(errno));
    gzbuffer(m_gz, 1 << 17);
#else
    std::fclose(std::exchange(m_file, nullptr));
    detail::file_fail(m_op, m_path,
                      "the file is gzip-compressed, and this program was built without zlib: link the CMake target "
                      "fluxion::zlib (it defines FLUXION_HAS_ZLIB; Debian's package zlib1g-dev), or gunzip the file");
#endif
  }
  input_file(const input_file&) = delete;
  input_file& operator=(const input_file&) = delete;
  ~input_file() {
    if (m_file) std::fclose(m_file);
#if FLUXION_DATA_ZLIB
    if (m_gz) gzclose(m_gz);
#endif
  }

  /// Reads up to n bytes; fewer only at the end of the data. A gzip error throws.
  std::size_t read(void* dst, std::size_t n) {
    std::size_t got = 0;
    if (m_file) {
      got = std::fread(dst, 1, n, m_file);
      if (got < n && std::ferror(m_file))
        detail::file_fail(m_op, m_path, "cannot read at byte offset " + std::to_string(m_offset + got) + ": " +
                                            std::strerror(errno));
    } else {
#if FLUXION_DATA_ZLIB
      auto* p = static_cast<char*>(dst);
      while (got < n) {
        const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
        const int r = gzread(m_gz, p + got, chunk);
        if (r < 0) gzip_failed(got);
        got += static_cast<std::size_t>(r);
        if (static_cast<unsigned>(r) < chunk) break;
      }
      if (got < n) {
        int err = Z_OK;
        gzerror(m_gz, &err);
        if (err != Z_OK && err != Z_STREAM_END) gzip_failed(got);
      }
#endif
    }
    m_offset += got;
    return got;
  }

  const std::string& path() const noexcept { return m_path; }
  const std::string& op() const noexcept { return m_op; }
  bool gzip() const noexcept { return m_gzip; }
  /// Bytes of data (uncompressed) read so far.
  std::uint64_t offset() const noexcept { return m_offset; }
  /// The file's size, for a plain file; a gzip file's data size is not known in advance.
  std::optional<std::uint64_t> size() const noexcept { return m_size; }

 private:
#if FLUXION_DATA_ZLIB
  [[noreturn]] void gzip_failed(std::size_t got) {
    int err = Z_OK;
    const char* message = gzerror(m_gz, &err);
    std::string what = message && *message ? message : "unknown error";
    if (err == Z_BUF_ERROR) what += " (the compressed stream is truncated)";
    detail::file_fail(m_op, m_path,
                      "gzip error at uncompressed byte offset " + std::to_string(m_offset + got) + ": " + what);
  }
  gzFile m_gz = nullptr;
#endif
  std::string m_path, m_op;
  std::FILE* m_file = nullptr;
  bool m_gzip = false;
  std::uint64_t m_offset = 0;
  std::optional<std::uint64_t> m_size;
};

}  // namespace fluxion::data
