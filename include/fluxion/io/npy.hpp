// NumPy's .npy files: one tensor per file, read and written as numpy.load and numpy.save do.
//
//   auto x = fx::io::load_npy<float>("x.npy");     // a '<f4' file of any shape, () included
//   fx::io::save_npy("y.npy", x * 2.f);             // any expression; written atomically
//
// Format versions 1.0, 2.0 and 3.0 are read; files are written as 1.0 (a rank-8 header fits in its
// 64 KiB). Little-endian '<f4', '<f8', '<i4', '<i8' and '|b1' map to float, double,
// std::int32_t, std::int64_t and bool, and the requested T must match the file's dtype exactly:
// nothing is converted silently. Files in Fortran order are transposed into fluxion's row-major
// layout on load. Big-endian data, other dtypes (uint8 included: fluxion tensors have no 8-bit
// integer type), structured dtypes and object arrays are refused. Every failure throws
// fluxion::io_error naming the function, the file and what is wrong.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/tensor.hpp"
#include "file.hpp"

namespace fluxion::io {
namespace detail {

inline constexpr char npy_magic[] = "\x93NUMPY";
inline constexpr std::size_t npy_magic_size = 6;

/// The dtype string fluxion writes, and requires when reading, for each element type.
template <class T>
constexpr const char* npy_descr() {
  if constexpr (std::is_same_v<T, float>) return "<f4";
  else if constexpr (std::is_same_v<T, double>) return "<f8";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "<i4";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "<i8";
  else return "|b1";
}

template <class T>
constexpr const char* cpp_type_name() {
  if constexpr (std::is_same_v<T, float>) return "float";
  else if constexpr (std::is_same_v<T, double>) return "double";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "std::int32_t";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "std::int64_t";
  else return "bool";
}

/// A file's dtype in words ("float64", "uint8", "big-endian float32"), for messages.
inline std::string describe_descr(const std::string& descr) {
  if (descr.size() < 2) return "'" + descr + "'";
  const char order = descr[0];
  std::string_view body(descr);
  if (order == '<' || order == '>' || order == '|' || order == '=') body.remove_prefix(1);
  std::string name;
  const char kind = body.empty() ? '?' : body[0];
  const std::string bytes(body.substr(body.empty() ? 0 : 1));
  int width = 0;
  for (char c : bytes) {
    if (c < '0' || c > '9' || width > 1000) return "'" + descr + "'";
    width = width * 10 + (c - '0');
  }
  switch (kind) {
    case 'f': name = "float" + std::to_string(8 * width); break;
    case 'i': name = "int" + std::to_string(8 * width); break;
    case 'u': name = "uint" + std::to_string(8 * width); break;
    case 'c': name = "complex" + std::to_string(8 * width); break;
    case 'b': name = width == 1 ? "bool" : "'" + descr + "'"; break;
    default: return "'" + descr + "'";
  }
  if (order == '>' && width > 1) name = "big-endian " + name;
  return name + " ('" + descr + "')";
}

/// The element type fluxion holds for a file's dtype string, by its name; empty when none does.
inline std::string fluxion_dtype_of(const std::string& descr) {
  if (descr == "<f4") return "float";
  if (descr == "<f8") return "double";
  if (descr == "<i4") return "std::int32_t";
  if (descr == "<i8") return "std::int64_t";
  if (descr == "|b1" || descr == "<b1" || descr == "=b1") return "bool";
  return "";
}

struct npy_header {
  std::string descr;
  bool fortran_order = false;
  std::vector<index_t> extents;
  std::size_t data_offset = 0;
};

/// Reads the Python dict literal of a .npy header, exactly the subset NumPy writes:
/// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class header_parser {
 public:
  header_parser(std::string_view text, const std::string& path) : m_text(text), m_path(path) {}

  npy_header parse() {
    npy_header h;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    expect('{', "the header must start with '{'");
    for (;;) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = read_string("a quoted key");
      skip_space();
      expect(':', "expected ':' after the key '" + key + "'");
      skip_space();
      if (key == "descr") {
        if (peek() == '[')
          malformed("structured dtypes (a list as 'descr') are not supported; save a plain array");
        h.descr = read_string("a quoted dtype string after 'descr'");
        mark(seen_descr, key);
      } else if (key == "fortran_order") {
        h.fortran_order = read_bool();
        mark(seen_order, key);
      } else if (key == "shape") {
        h.extents = read_shape();
        mark(seen_shape, key);
      } else {
        malformed("unexpected key '" + key + "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
      }
      skip_space();
      if (peek() == ',') {
        ++m_pos;
        continue;
      }
      skip_space();
      if (peek() != '}') malformed("expected ',' or '}' after the value of '" + key + "'");
    }
    ++m_pos;
    skip_space();
    if (m_pos != m_text.size()) malformed("unexpected text after the closing '}'");
    for (auto [seen, name] : {std::pair{seen_descr, "descr"}, {seen_order, "fortran_order"}, {seen_shape, "shape"}})
      if (!seen) malformed(std::string("the key '") + name + "' is missing");
    return h;
  }

 private:
  [[noreturn]] void malformed(const std::string& what) const {
    std::string shown(m_text.substr(0, 200));
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    file_fail("load_npy", m_path,
              "malformed header: " + what + " (at character " + std::to_string(m_pos) + " of \"" + shown + "\")");
  }
  char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
  void skip_space() {
    while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\n' || m_text[m_pos] == '\t' ||
                                     m_text[m_pos] == '\r'))
      ++m_pos;
  }
  void expect(char c, const std::string& what) {
    if (peek() != c) malformed(what);
    ++m_pos;
  }
  void mark(bool& seen, const std::string& key) {
    if (seen) malformed("the key '" + key + "' appears twice");
    seen = true;
  }
  std::string read_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("expected " + what);
    const std::size_t start = ++m_pos;
    while (m_pos < m_text.size() && m_text[m_pos] != quote) {
      if (m_text[m_pos] == '\\') malformed("escapes in strings are not supported");
      ++m_pos;
    }
    if (m_pos == m_text.size()) malformed("a string is not closed");
    return std::string(m_text.substr(start, m_pos++ - start));
  }
  bool read_bool() {
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, {std::string_view("False"), false}})
      if (m_text.substr(m_pos, word.size()) == word) {
        m_pos += word.size();
        return value;
      }
    malformed("'fortran_order' must be True or False");
  }
  std::vector<index_t> read_shape() {
    std::vector<index_t> dims;
    expect('(', "'shape' must be a tuple such as (2, 3)");
    for (;;) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') malformed("the extents in 'shape' must be non-negative integers");
      index_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (d > (shape::max_elements - 9) / 10) malformed("an extent in 'shape' is too large");
        d = d * 10 + (m_text[m_pos++] - '0');
      }
      if (peek() == 'L') ++m_pos;  // Python 2's long literals, in files written by old NumPy
      dims.push_back(d);
      skip_space();
      if (peek() == ',') ++m_pos;
      else if (peek() != ')') malformed("expected ',' or ')' in 'shape'");
    }
    ++m_pos;
    return dims;
  }

  std::string_view m_text;
  const std::string& m_path;
  std::size_t m_pos = 0;
};

inline std::uint32_t read_little_endian(const unsigned char* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

/// Reverses the bytes of each `width`-byte element in place (a big-endian host).
inline void swap_bytes(char* data, std::size_t count, std::size_t width) {
  for (std::size_t i = 0; i < count; ++i)
    for (std::size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(data[i * width + a], data[i * width + b]);
}

inline std::ifstream open_for_reading(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) file_fail("load_npy", path, std::string("cannot open the file: ") + std::strerror(errno));
  return in;
}

/// Reads and checks everything up to the data: magic, version, header length and the header dict.
inline npy_header read_header(std::ifstream& in, const std::string& path, std::uintmax_t file_size) {
  std::array<unsigned char, 12> pre{};
  const std::size_t have = static_cast<std::size_t>(std::min<std::uintmax_t>(file_size, 12));
  in.read(reinterpret_cast<char*>(pre.data()), static_cast<std::streamsize>(have));
  if (!in) file_fail("load_npy", path, "cannot read the file");
  if (have < npy_magic_size || std::memcmp(pre.data(), npy_magic, npy_magic_size) != 0) {
    std::string shown;
    static constexpr char hex[] = "0123456789abcdef";
    for (std::size_t i = 0; i < std::min<std::size_t>(have, npy_magic_size); ++i) {
      if (i) shown += ' ';
      shown += hex[pre[i] >> 4];
      shown += hex[pre[i] & 15];
    }
    file_fail("load_npy", path,
              "not a .npy file: bad magic (the file starts with [" + shown + "], a .npy file with 93 4e 55 4d 50 59, "
              "\"\\x93NUMPY\")");
  }
  if (have < 8) file_fail("load_npy", path, "truncated header: the file ends after " + std::to_string(have) + " bytes, "
                                            "inside the format version");
  const int major = pre[6], minor = pre[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0)
    file_fail("load_npy", path,
              "unsupported format version " + std::to_string(major) + "." + std::to_string(minor) +
                  " (fluxion reads versions 1.0, 2.0 and 3.0)");
  const int length_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + static_cast<std::size_t>(length_bytes);
  if (have < prefix)
    file_fail("load_npy", path,
              "truncated header: the file ends after " + std::to_string(have) + " bytes, inside the " +
                  std::to_string(length_bytes) + "-byte header length");
  const std::size_t header_length = read_little_endian(pre.data() + 8, length_bytes);
  if (file_size - prefix < header_length)
    file_fail("load_npy", path,
              "truncated header: the header length says " + std::to_string(header_length) + " bytes but only " +
                  std::to_string(file_size - prefix) + " follow");
  std::string text(header_length, '\0');
  in.seekg(static_cast<std::streamoff>(prefix));
  in.read(text.data(), static_cast<std::streamsize>(header_length));
  if (!in) file_fail("load_npy", path, "cannot read the header");
  npy_header h = header_parser(text, path).parse();
  h.data_offset = prefix + header_length;
  return h;
}

template <class T>
void check_dtype(const npy_header& h, const std::string& path) {
  const std::string holds = fluxion_dtype_of(h.descr);
  if (holds == cpp_type_name<T>()) return;
  std::string what = "the file holds " + describe_descr(h.descr) + " data but " + dtype_name<T>() +
                     " was requested (load_npy<" + cpp_type_name<T>() + ">)";
  if (!holds.empty()) {
    what += "; call load_npy<" + holds + "> instead";
  } else if (h.descr.size() > 2 && h.descr[0] == '>') {
    what += "; big-endian data is not supported: save it little-endian, for example with "
            "arr.astype(arr.dtype.newbyteorder('<'))";
  } else {
    what += "; fluxion reads '<f4', '<f8', '<i4', '<i8' and '|b1' (float, double, std::int32_t, std::int64_t, "
            "bool): convert the array first, for example with arr.astype('<f4')";
  }
  file_fail("load_npy", path, what);
}

/// Fortran (column-major) bytes to row-major ones.
inline void fortran_to_row_major(const char* src, char* dst, const shape& s, std::size_t width) {
  const int rank = s.rank();
  std::array<index_t, max_rank> column_strides{}, index{};
  index_t acc = 1;
  for (int d = 0; d < rank; ++d) {
    column_strides[static_cast<std::size_t>(d)] = acc;
    acc *= s[d];
  }
  const index_t n = s.size();
  index_t from = 0;
  for (index_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<std::size_t>(i) * width, src + static_cast<std::size_t>(from) * width, width);
    for (int d = rank - 1; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      if (++index[du] < s[d]) {
        from += column_strides[du];
        break;
      }
      from -= (s[d] - 1) * column_strides[du];
      index[du] = 0;
    }
  }
}

inline std::string header_text(const std::string& descr, const shape& s) {
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + to_string(s) + ", }";
  // NumPy pads with spaces and a final newline so that the data starts at a multiple of 64 bytes.
  const std::size_t prefix = 10;
  const std::size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  return dict;
}

}  // namespace detail

/// Reads a .npy file into a tensor<T>. T must be the element type of the file's dtype.
template <element_type T>
tensor<T> load_npy(const std::string& path) {
  const std::uint64_t file_size = detail::readable_file_size("load_npy", path, "a .npy file");
  std::ifstream in = detail::open_for_reading(path);
  const detail::npy_header h = detail::read_header(in, path, file_size);
  detail::check_dtype<T>(h, path);

  if (static_cast<int>(h.extents.size()) > max_rank)
    detail::file_fail("load_npy", path,
                      "the array has rank " + std::to_string(h.extents.size()) + "; fluxion tensors have at most " +
                          std::to_string(max_rank) + " axes");
  index_t elements = 1;
  for (index_t d : h.extents) {
    if (d != 0 && elements > shape::max_elements / d)
      detail::file_fail("load_npy", path, "the shape describes more than 2^56 elements");
    elements *= d;
  }
  const shape s(h.extents);
  const std::size_t width = std::is_same_v<T, bool> ? 1 : sizeof(T);  // NumPy's bool is one byte
  const std::size_t needed = static_cast<std::size_t>(elements) * width;
  const std::uintmax_t available = file_size - h.data_offset;
  if (available < needed)
    detail::file_fail("load_npy", path,
                      "the data is truncated: shape " + to_string(s) + " of " + dtype_name<T>() + " needs " +
                          std::to_string(needed) + " bytes but the file has " + std::to_string(available) +
                          " after its " + std::to_string(h.data_offset) + "-byte header");

  tensor<T> t(s);
  std::vector<char> bytes(needed);
  in.seekg(static_cast<std::streamoff>(h.data_offset));
  in.read(bytes.data(), static_cast<std::streamsize>(needed));
  if (!in) detail::file_fail("load_npy", path, "cannot read the data");
  if constexpr (std::endian::native == std::endian::big) detail::swap_bytes(bytes.data(), bytes.size() / width, width);
  if (h.fortran_order && s.rank() > 1) {
    std::vector<char> row_major(needed);
    detail::fortran_to_row_major(bytes.data(), row_major.data(), s, width);
    bytes.swap(row_major);
  }
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < needed; ++i) t.mutable_data()[i] = bytes[i] != 0;  // any nonzero byte is true
  } else if (needed) {
    std::memcpy(t.mutable_data(), bytes.data(), needed);
  }
  return t;
}

/// Writes a tensor as a version 1.0 .npy file, atomically (detail::atomic_write): the bytes go to a
/// temporary file next to `path`, fsynced and renamed over `path` once complete.
template <class T, class Device>
void save_npy(const std::string& path, const tensor<T, Device>& t) {
  const std::string header = detail::header_text(detail::npy_descr<T>(), t.shape());
  std::string prefix(detail::npy_magic, detail::npy_magic_size);
  prefix += '\x01';  // version 1.0, then the header length as a little-endian uint16
  prefix += '\0';
  prefix += static_cast<char>(header.size() & 0xff);
  prefix += static_cast<char>(header.size() >> 8);

  std::vector<char> bytes(static_cast<std::size_t>(t.size()) * (std::is_same_v<T, bool> ? 1 : sizeof(T)));
  const std::vector<T> values = t.to_vector();
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(values[i] ? 1 : 0);
  } else {
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    if constexpr (std::endian::native == std::endian::big) detail::swap_bytes(bytes.data(), values.size(), sizeof(T));
  }

  detail::atomic_write("save_npy", path,
                       {prefix, header, std::string_view(bytes.data(), bytes.size())});
}

/// Materializes an expression, then writes it as save_npy(path, tensor) does.
template <expression E>
  requires(!is_tensor_v<std::remove_cvref_t<E>>)
void save_npy(const std::string& path, const E& e) {
  save_npy(path, tensor<value_type_t<E>, device_t<E>>(e));
}

}  // namespace fluxion::io
