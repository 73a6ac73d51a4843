// TFRecord files: TensorFlow's record framing, read and written with its masked CRC-32C checks.
//
//   fx::io::tfrecord_writer out{"data.tfrecord"};
//   out.write("first record");
//   out.write(serialized_example);
//   out.flush();                                   // the records so far are in the file
//
//   fx::io::tfrecord_reader in{"data.tfrecord"};
//   while (auto record = in.next()) use(*record);   // std::optional<std::string>
//
// Each record is framed as TensorFlow's record_writer.cc writes it:
//   uint64 length (little-endian), uint32 masked_crc32c(length bytes), length bytes of data,
//   uint32 masked_crc32c(data).
// crc32c is CRC-32C (Castagnoli, the polynomial 0x1EDC6F41 reflected as 0x82F63B78, as in iSCSI,
// RFC 3720), and masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xA282EAD8. TensorBoard event
// files use the same framing. The reader checks both CRCs of every record; a mismatch, or a file
// that ends inside a record, throws fluxion::io_error naming the file, the record (counted from 0)
// and its byte offset. Compressed (GZIP or ZLIB) TFRecord files are not read.
#pragma once

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "../core/error.hpp"
#include "file.hpp"

namespace fluxion::io {
namespace detail {

/// Slicing-by-8 tables of CRC-32C (reflected polynomial 0x82F63B78), built at run time on first use:
/// g++ evaluated the constexpr tables on every compile of a program that included this header (about
/// 0.15 s, with PNG's CRC table in summary.hpp).
struct crc32c_tables {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  crc32c_tables() {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (std::size_t s = 1; s < 8; ++s)
      for (std::size_t i = 0; i < 256; ++i) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  }
};
inline const crc32c_tables& crc32c_table() {
  static const crc32c_tables tables;
  return tables;
}

inline void put_le32(unsigned char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline void put_le64(unsigned char* p, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
inline std::uint32_t get_le32(const unsigned char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline std::uint64_t get_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace detail

/// Extends a CRC-32C: crc32c_extend(crc32c(a), b) == crc32c(a + b).
inline std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n) noexcept {
  const auto& t = detail::crc32c_table().t;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t c = ~crc;
  while (n >= 8) {
    const std::uint32_t lo = c ^ detail::get_le32(p);
    const std::uint32_t hi = detail::get_le32(p + 4);
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

/// CRC-32C (Castagnoli) of n bytes: crc32c("123456789", 9) == 0xE3069283.
inline std::uint32_t crc32c(const void* data, std::size_t n) noexcept { return crc32c_extend(0, data, n); }
inline std::uint32_t crc32c(std::string_view bytes) noexcept { return crc32c(bytes.data(), bytes.size()); }

/// TensorFlow's masking of a CRC stored next to the data it covers.
inline constexpr std::uint32_t mask_crc32c(std::uint32_t crc) noexcept {
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}
/// The inverse of mask_crc32c.
inline constexpr std::uint32_t unmask_crc32c(std::uint32_t masked) noexcept {
  const std::uint32_t rot = masked - 0xA282EAD8u;
  return (rot >> 17) | (rot << 15);
}
/// masked_crc32c(p, n) == mask_crc32c(crc32c(p, n)): the checksum TFRecord files store.
inline std::uint32_t masked_crc32c(const void* data, std::size_t n) noexcept { return mask_crc32c(crc32c(data, n)); }
inline std::uint32_t masked_crc32c(std::string_view bytes) noexcept { return masked_crc32c(bytes.data(), bytes.size()); }

/// The 12-byte header of a record of `length` bytes: the length and its masked CRC.
inline std::array<unsigned char, 12> tfrecord_header(std::uint64_t length) noexcept {
  std::array<unsigned char, 12> h{};
  detail::put_le64(h.data(), length);
  detail::put_le32(h.data() + 8, masked_crc32c(h.data(), 8));
  return h;
}

/// Writes records to a new file (an existing one is replaced). Records are buffered: flush() or
/// the destructor puts them in the file. Every failure throws fluxion::io_error naming the file.
class tfrecord_writer {
 public:
  explicit tfrecord_writer(std::string path) : m_path(std::move(path)) {
    m_out.open(m_path, std::ios::binary | std::ios::trunc);
    if (!m_out)
      detail::file_fail("tfrecord_writer", m_path, std::string("cannot create the file: ") + std::strerror(errno));
  }
  tfrecord_writer(const tfrecord_writer&) = delete;
  tfrecord_writer& operator=(const tfrecord_writer&) = delete;
  tfrecord_writer(tfrecord_writer&&) = default;
  tfrecord_writer& operator=(tfrecord_writer&&) = default;
  ~tfrecord_writer() {
    if (m_out.is_open()) m_out.flush();  // errors cannot be reported from a destructor; call flush()
  }

  /// Appends one record (any bytes, empty included).
  void write(std::string_view record) {
    const auto header = tfrecord_header(record.size());
    unsigned char footer[4];
    detail::put_le32(footer, masked_crc32c(record.data(), record.size()));
    m_out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    m_out.write(record.data(), static_cast<std::streamsize>(record.size()));
    m_out.write(reinterpret_cast<const char*>(footer), 4);
    if (!m_out)
      detail::file_fail("tfrecord_writer::write", m_path,
                        "cannot write record " + std::to_string(m_records) + ": " + std::strerror(errno));
    ++m_records;
    m_bytes += header.size() + record.size() + 4;
  }

  /// Hands the buffered records to the operating system.
  void flush() {
    m_out.flush();
    if (!m_out) detail::file_fail("tfrecord_writer::flush", m_path, std::string("cannot write: ") + std::strerror(errno));
  }

  /// Flushes and closes the file; later writes throw.
  void close() {
    flush();
    m_out.close();
  }

  const std::string& path() const noexcept { return m_path; }
  /// Records written so far.
  std::uint64_t records() const noexcept { return m_records; }
  /// Bytes written so far, framing included.
  std::uint64_t bytes() const noexcept { return m_bytes; }

 private:
  std::string m_path;
  std::ofstream m_out;
  std::uint64_t m_records = 0;
  std::uint64_t m_bytes = 0;
};

/// Reads the records of a TFRecord file in order, checking both CRCs of each.
class tfrecord_reader {
 public:
  explicit tfrecord_reader(std::string path) : m_path(std::move(path)) {
    m_size = detail::readable_file_size("tfrecord_reader", m_path, "a TFRecord file");
    m_in.open(m_path, std::ios::binary);
    if (!m_in)
      detail::file_fail("tfrecord_reader", m_path, std::string("cannot open the file: ") + std::strerror(errno));
  }

  /// The next record, or std::nullopt at the end of the file.
  std::optional<std::string> next() {
    if (m_offset == m_size) return std::nullopt;
    const std::uint64_t start = m_offset;
    const std::uint64_t left = m_size - start;
    if (left < 12)
      fail(start, "truncated record: the file ends " + std::to_string(left) +
                      " bytes into its 12-byte header (length and length CRC)");
    unsigned char header[12];
    read_bytes(reinterpret_cast<char*>(header), 12, start);
    const std::uint32_t stored = detail::get_le32(header + 8), computed = masked_crc32c(header, 8);
    if (stored != computed)
      fail(start, "length CRC mismatch: the file stores masked CRC-32C " + hex(stored) + " for the length field, its "
                  "bytes give " + hex(computed) + " (a corrupt file, or not a TFRecord file)");
    const std::uint64_t length = detail::get_le64(header);
    if (length > left - 12 || left - 12 - length < 4)
      fail(start, "truncated record: its header says " + std::to_string(length) + " data bytes plus a 4-byte CRC, but " +
                      std::to_string(left - 12) + " bytes follow the header");
    std::string data(static_cast<std::size_t>(length), '\0');
    read_bytes(data.data(), length, start);
    unsigned char footer[4];
    read_bytes(reinterpret_cast<char*>(footer), 4, start);
    const std::uint32_t stored_data = detail::get_le32(footer), computed_data = masked_crc32c(data.data(), data.size());
    if (stored_data != computed_data)
      fail(start, "data CRC mismatch: the file stores masked CRC-32C " + hex(stored_data) + " for the " +
                      std::to_string(length) + " data bytes, they give " + hex(computed_data));
    m_offset = start + 16 + length;
    ++m_record;
    return data;
  }

  const std::string& path() const noexcept { return m_path; }
  /// The index of the record next() returns next (the number read so far).
  std::uint64_t record_index() const noexcept { return m_record; }
  /// The byte offset of the next record.
  std::uint64_t offset() const noexcept { return m_offset; }

 private:
  [[noreturn]] void fail(std::uint64_t start, const std::string& what) const {
    detail::file_fail("tfrecord_reader", m_path,
                      "record " + std::to_string(m_record) + " at byte offset " + std::to_string(start) + ": " + what);
  }
  void read_bytes(char* dst, std::uint64_t n, std::uint64_t start) {
    m_in.read(dst, static_cast<std::streamsize>(n));
    if (!m_in) fail(start, std::string("cannot read the file: ") + std::strerror(errno));
  }
  static std::string hex(std::uint32_t v) {
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string s = "0x";
    for (int i = 28; i >= 0; i -= 4) s += digits[(v >> i) & 15];
    return s;
  }

  std::string m_path;
  std::ifstream m_in;
  std::uint64_t m_size = 0;
  std::uint64_t m_offset = 0;
  std::uint64_t m_record = 0;
};

}  // namespace fluxion::io
