// The safetensors format (Hugging Face's): named tensors in one file, read and written without
// any dependency, interchangeable with Python's `safetensors` package.
//
//   fx::io::safetensors file;
//   file.add("dense/kernel", kernel);                  // any tensor<float, double, int32, int64, bool>
//   file.set_metadata("note", "epoch 3");
//   file.save("weights.safetensors");                  // atomic: temporary file, fsync, rename, fsync dir
//   auto loaded = fx::io::safetensors::load("weights.safetensors");   // validates the whole file
//   fx::tensor<float> k = loaded.get<float>("dense/kernel");
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ..., "__metadata__": {"k": "v"}},
// then the data, little-endian and row-major. F32, F64, I32, I64 and BOOL (one byte per element)
// map to float, double, std::int32_t, std::int64_t and bool; the format's other dtypes (F16, BF16,
// U8 ...) are refused by name. load() checks everything before it returns: the header length lies
// within the file, the header is well-formed JSON with the expected keys and nothing else, names
// are unique, each tensor's byte range has the size its dtype and shape need, and the ranges tile
// the data exactly, without overlaps, holes or trailing bytes (the format's rule). A truncated or
// corrupted file throws fluxion::io_error naming the function, the file and the problem. Files are
// written with tensors in order of decreasing element size, so every tensor is aligned, and the
// header padded with spaces to a multiple of 8 bytes, as the Python package does. POSIX only
// (fsync and rename).
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/tensor.hpp"
#include "file.hpp"
#include "prebuilt.hpp"

namespace fluxion::io {

/// The element types a safetensors file can hold for fluxion.
enum class safetensors_dtype { f32, f64, i32, i64, boolean };

/// The dtype's name in a safetensors header: "F32", "F64", "I32", "I64", "BOOL".
constexpr const char* safetensors_dtype_name(safetensors_dtype d) noexcept {
  switch (d) {
    case safetensors_dtype::f32: return "F32";
    case safetensors_dtype::f64: return "F64";
    case safetensors_dtype::i32: return "I32";
    case safetensors_dtype::i64: return "I64";
    case safetensors_dtype::boolean: return "BOOL";
  }
  return "?";
}

/// Bytes per element in the file.
constexpr std::size_t safetensors_element_size(safetensors_dtype d) noexcept {
  switch (d) {
    case safetensors_dtype::f32: case safetensors_dtype::i32: return 4;
    case safetensors_dtype::f64: case safetensors_dtype::i64: return 8;
    case safetensors_dtype::boolean: return 1;
  }
  return 0;
}

/// The safetensors dtype of a fluxion element type.
template <element_type T>
constexpr safetensors_dtype safetensors_dtype_of() noexcept {
  if constexpr (std::is_same_v<T, float>) return safetensors_dtype::f32;
  else if constexpr (std::is_same_v<T, double>) return safetensors_dtype::f64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return safetensors_dtype::i32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return safetensors_dtype::i64;
  else return safetensors_dtype::boolean;
}

/// One tensor of a file: its dtype, shape and little-endian bytes (a view into shared storage, so
/// loading a file copies its data once).
class safetensors_tensor {
 public:
  safetensors_tensor(safetensors_dtype dtype, fluxion::shape shape, std::shared_ptr<const std::string> storage,
                     std::size_t offset, std::size_t length)
      : m_dtype(dtype), m_shape(shape), m_storage(std::move(storage)), m_offset(offset), m_length(length) {}
  safetensors_dtype dtype() const noexcept { return m_dtype; }
  const fluxion::shape& shape() const noexcept { return m_shape; }
  std::string_view bytes() const noexcept { return std::string_view(*m_storage).substr(m_offset, m_length); }

 private:
  safetensors_dtype m_dtype;
  fluxion::shape m_shape;
  std::shared_ptr<const std::string> m_storage;
  std::size_t m_offset;
  std::size_t m_length;
};

namespace detail {

/// The header's JSON, parsed: the subset of JSON a header uses is all of JSON, so this is a small
/// complete reader (numbers are kept as text and converted where an integer is expected).
struct json_member;

struct json_value {
  enum class kind { null, boolean, number, string, array, object };
  kind type = kind::null;
  bool flag = false;
  std::string text;  // a string's value, or a number's text
  std::vector<json_value> items;
  std::vector<json_member> members;  // an object's members, in file order
};

/// One member of a JSON object (a struct rather than std::pair, which needs json_value complete).
struct json_member {
  std::string first;
  json_value second;
};

inline const char* json_kind_name(json_value::kind k) {
  switch (k) {
    case json_value::kind::null: return "null";
    case json_value::kind::boolean: return "a boolean";
    case json_value::kind::number: return "a number";
    case json_value::kind::string: return "a string";
    case json_value::kind::array: return "an array";
    case json_value::kind::object: return "an object";
  }
  return "?";
}

class json_reader {
 public:
  json_reader(std::string_view text, std::string op, std::string path)
      : m_text(text), m_op(std::move(op)), m_path(std::move(path)) {}

  json_value parse() {
    skip_space();
    json_value v = value(0);
    skip_space();
    if (m_pos != m_text.size()) malformed("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int max_depth = 64;

  [[noreturn]] void malformed(const std::string& what) const {
    file_fail(m_op, m_path,
              "malformed JSON header: " + what + " (at byte " + std::to_string(m_pos) + " of the " +
                  std::to_string(m_text.size()) + "-byte header)");
  }
  char peek() const { return m_pos < m_text.size() ? m_text[m_pos] : '\0'; }
  bool at_end() const { return m_pos >= m_text.size(); }
  void skip_space() {
    while (!at_end() && (peek() == ' ' || peek() == '\n' || peek() == '\t' || peek() == '\r')) ++m_pos;
  }
  void expect(char c, const char* what) {
    if (at_end() || peek() != c) malformed(what);
    ++m_pos;
  }

  json_value value(int depth) {
    if (depth > max_depth) malformed("nesting deeper than " + std::to_string(max_depth) + " levels");
    if (at_end()) malformed("the header ends where a value is expected");
    json_value v;
    const char c = peek();
    if (c == '{') {
      v.type = json_value::kind::object;
      ++m_pos;
      skip_space();
      if (peek() == '}') {
        ++m_pos;
        return v;
      }
      for (;;) {
        skip_space();
        if (peek() != '"') malformed("expected a quoted key");
        std::string key = string();
        for (const auto& m : v.members)
          if (m.first == key) malformed("the key \"" + key + "\" appears twice in one object");
        skip_space();
        expect(':', "expected ':' after a key");
        skip_space();
        v.members.push_back(json_member{std::move(key), value(depth + 1)});
        skip_space();
        if (peek() == ',') {
          ++m_pos;
          continue;
        }
        expect('}', "expected ',' or '}' in an object");
        return v;
      }
    }
    if (c == '[') {
      v.type = json_value::kind::array;
      ++m_pos;
      skip_space();
      if (peek() == ']') {
        ++m_pos;
        return v;
      }
      for (;;) {
        skip_space();
        v.items.push_back(value(depth + 1));
        skip_space();
        if (peek() == ',') {
          ++m_pos;
          continue;
        }
        expect(']', "expected ',' or ']' in an array");
        return v;
      }
    }
    if (c == '"') {
      v.type = json_value::kind::string;
      v.text = string();
      return v;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      v.type = json_value::kind::number;
      v.text = number();
      return v;
    }
    for (auto [word, kind, flag] : {std::tuple{std::string_view("true"), json_value::kind::boolean, true},
                                    {std::string_view("false"), json_value::kind::boolean, false},
                                    {std::string_view("null"), json_value::kind::null, false}}) {
      if (m_text.substr(m_pos, word.size()) == word) {
        m_pos += word.size();
        v.type = kind;
        v.flag = flag;
        return v;
      }
    }
    malformed(std::string("unexpected character '") + c + "'");
  }

  std::string number() {
    const std::size_t start = m_pos;
    auto digits = [&] {
      const std::size_t from = m_pos;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++m_pos;
      return m_pos - from;
    };
    if (peek() == '-') ++m_pos;
    if (peek() == '0') ++m_pos;
    else if (digits() == 0) malformed("a number needs digits");
    if (peek() == '.') {
      ++m_pos;
      if (digits() == 0) malformed("a number needs digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++m_pos;
      if (peek() == '+' || peek() == '-') ++m_pos;
      if (digits() == 0) malformed("a number needs digits in its exponent");
    }
    return std::string(m_text.substr(start, m_pos - start));
  }

  unsigned hex4() {
    unsigned u = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      else if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) malformed("\\u needs four hexadecimal digits");
      u = u * 16 + static_cast<unsigned>(d);
      ++m_pos;
    }
    return u;
  }

  static void append_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  std::string string() {
    ++m_pos;  // the opening quote
    std::string out;
    for (;;) {
      if (at_end()) malformed("a string is not closed");
      const char c = m_text[m_pos++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) malformed("a control character inside a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_end()) malformed("a string ends inside an escape");
      const char e = m_text[m_pos++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          std::uint32_t cp = hex4();
          if (cp >= 0xd800 && cp < 0xdc00) {
            if (m_text.substr(m_pos, 2) != "\\u") malformed("a high surrogate without its low surrogate");
            m_pos += 2;
            const std::uint32_t low = hex4();
            if (low < 0xdc00 || low >= 0xe000) malformed("a high surrogate without its low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            malformed("a low surrogate without its high surrogate");
          }
          append_utf8(out, cp);
          break;
        }
        default: malformed(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  std::string_view m_text;
  std::string m_op;
  std::string m_path;
  std::size_t m_pos = 0;
};

/// `s` as a JSON string literal.
inline std::string json_quote(std::string_view s) {
  std::string out = "\"";
  static constexpr char hex[] = "0123456789abcdef";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (u < 0x20) {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out + "\"";
}


/// A non-negative integer of the header ("data_offsets", "shape"), or an error naming where it sits.
inline std::uint64_t json_to_unsigned(const json_value& v, const std::string& op, const std::string& path,
                                      const std::string& where) {
  if (v.type != json_value::kind::number)
    file_fail(op, path, where + " must be a non-negative integer, not " + json_kind_name(v.type));
  std::uint64_t n = 0;
  for (char c : v.text) {
    if (c < '0' || c > '9')
      file_fail(op, path, where + " must be a non-negative integer, not " + v.text);
    if (n > (UINT64_MAX - 9) / 10) file_fail(op, path, where + " = " + v.text + " is too large");
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

}  // namespace detail

/// A set of named tensors and string metadata: what a safetensors file holds.
class safetensors {
 public:
  safetensors() = default;

  /// Reads and validates the whole file (see the header comment); throws fluxion::io_error.
  static safetensors load(const std::string& path) { return load(path, "safetensors::load"); }
  /// As load(path), with `op` starting every error message (checkpoint::restore uses its own name).
  static safetensors load(const std::string& path, const std::string& op);
  /// Validates and reads the bytes of a file; `source` names them in errors.
  static safetensors parse(std::string bytes, const std::string& source, const std::string& op = "safetensors::parse");

  /// Adds a tensor under `name`; throws fluxion::invalid_argument when the name is taken or is
  /// "__metadata__".
  template <element_type T, class Device>
  void add(const std::string& name, const tensor<T, Device>& t);

  void set_metadata(const std::string& key, const std::string& value) { m_metadata[key] = value; }
  const std::map<std::string, std::string>& metadata() const noexcept { return m_metadata; }
  /// The metadata value of `key`, or nullptr.
  const std::string* find_metadata(const std::string& key) const {
    const auto it = m_metadata.find(key);
    return it == m_metadata.end() ? nullptr : &it->second;
  }

  bool contains(const std::string& name) const { return m_index.count(name) != 0; }
  std::size_t size() const noexcept { return m_tensors.size(); }
  /// The tensors' names, in the order of the header (or of add()).
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& t : m_tensors) out.push_back(t.first);
    return out;
  }
  /// The tensor named `name`, or nullptr.
  const safetensors_tensor* find(const std::string& name) const {
    const auto it = m_index.find(name);
    return it == m_index.end() ? nullptr : &m_tensors[it->second].second;
  }
  /// Where the tensors came from (a path), or empty for a set built in memory.
  const std::string& source() const noexcept { return m_source; }

  /// The tensor `name` as a tensor<T>; throws fluxion::io_error when it is absent or holds another dtype.
  template <element_type T>
  tensor<T> get(const std::string& name) const;
  /// Converts an entry to a tensor<T>, whose dtype must be exactly the entry's.
  template <element_type T>
  tensor<T> to_tensor(const safetensors_tensor& t, const std::string& name, const std::string& op) const;
  template <element_type T>
  static tensor<T> decode(const safetensors_tensor& t);

  /// The file's bytes: header length, header, data.
  std::string serialize() const;
  /// Writes the file atomically (see detail::atomic_write); throws fluxion::io_error.
  void save(const std::string& path) const { save(path, "safetensors::save"); }
  void save(const std::string& path, const std::string& op) const;

 private:
  static safetensors_dtype parse_dtype(const std::string& text, const std::string& op, const std::string& source,
                                       const std::string& where);

  /// The 8-byte length and padded header in `head`, the tensors' bytes, largest elements first, in `data`.
  void header_and_data(std::string& head, std::vector<std::string_view>& data) const;

  std::vector<std::pair<std::string, safetensors_tensor>> m_tensors;
  std::unordered_map<std::string, std::size_t> m_index;
  std::map<std::string, std::string> m_metadata;
  std::string m_source;
};


// The member templates sit outside the class, so that FLUXION_PREBUILT_KERNELS can declare the
// common ones `extern template` (io/prebuilt.hpp) for src/io.cpp to compile once.
template <element_type T, class Device>
FLUXION_IO_TEMPLATE_INLINE void safetensors::add(const std::string& name, const tensor<T, Device>& t) {
  if (name == "__metadata__")
    throw invalid_argument("safetensors::add: the name \"__metadata__\" is reserved for the metadata");
  if (m_index.count(name))
    throw invalid_argument("safetensors::add: a tensor named '" + name + "' was already added");
  constexpr safetensors_dtype d = safetensors_dtype_of<T>();
  const std::size_t width = safetensors_element_size(d);
  auto bytes = std::make_shared<std::string>(static_cast<std::size_t>(t.size()) * width, '\0');
  const std::vector<T> values = t.to_vector();
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) (*bytes)[i] = values[i] ? 1 : 0;
  } else if (!values.empty()) {
    std::memcpy(bytes->data(), values.data(), bytes->size());
    if constexpr (std::endian::native == std::endian::big)
      for (std::size_t i = 0; i < values.size(); ++i) std::reverse(bytes->data() + i * width, bytes->data() + (i + 1) * width);
  }
  const std::size_t length = bytes->size();
  m_index.emplace(name, m_tensors.size());
  m_tensors.emplace_back(name, safetensors_tensor(d, t.shape(), std::move(bytes), 0, length));
}

template <element_type T>
FLUXION_IO_TEMPLATE_INLINE tensor<T> safetensors::get(const std::string& name) const {
  const safetensors_tensor* t = find(name);
  if (t == nullptr) detail::file_fail("safetensors::get", m_source, "no tensor named '" + name + "'");
  return to_tensor<T>(*t, name, "safetensors::get");
}

template <element_type T>
FLUXION_IO_TEMPLATE_INLINE tensor<T> safetensors::to_tensor(const safetensors_tensor& t, const std::string& name, const std::string& op) const {
  if (t.dtype() != safetensors_dtype_of<T>())
    detail::file_fail(op, m_source,
                      "tensor '" + name + "' holds " + safetensors_dtype_name(t.dtype()) + ", not " +
                          safetensors_dtype_name(safetensors_dtype_of<T>()) + " (" + dtype_name<T>() + ")");
  return decode<T>(t);
}

template <element_type T>
FLUXION_IO_TEMPLATE_INLINE tensor<T> safetensors::decode(const safetensors_tensor& t) {
  tensor<T> out(t.shape());
  const std::string_view bytes = t.bytes();
  if constexpr (std::is_same_v<T, bool>) {
    for (std::size_t i = 0; i < bytes.size(); ++i) out.mutable_data()[i] = bytes[i] != 0;
  } else if (!bytes.empty()) {
    std::memcpy(out.mutable_data(), bytes.data(), bytes.size());
    if constexpr (std::endian::native == std::endian::big) {
      auto* raw = reinterpret_cast<char*>(out.mutable_data());
      for (std::size_t i = 0; i < bytes.size(); i += sizeof(T)) std::reverse(raw + i, raw + i + sizeof(T));
    }
  }
  return out;
}

#if FLUXION_IO_DEFINITIONS
// In src/io.cpp where the program uses prebuilt kernels (io/prebuilt.hpp); inline otherwise.
FLUXION_IO_INLINE safetensors safetensors::load(const std::string& path, const std::string& op) {
  return parse(detail::read_whole_file(op, path, "a safetensors file"), path, op);
}

FLUXION_IO_INLINE safetensors safetensors::parse(std::string bytes, const std::string& source, const std::string& op) {
  using detail::file_fail;
  const std::size_t file_size = bytes.size();
  if (file_size < 8)
    file_fail(op, source,
              "truncated file: it has " + std::to_string(file_size) +
                  " bytes, fewer than the 8-byte header length that starts a safetensors file");
  std::uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  if (header_length > file_size - 8)
    file_fail(op, source,
              "the header length says " + std::to_string(header_length) + " bytes but only " +
                  std::to_string(file_size - 8) + " follow (a truncated file, or a corrupted length)");
  if (header_length < 2) file_fail(op, source, "the header length is " + std::to_string(header_length) +
                                                   "; a header is at least \"{}\"");
  const std::string_view header_text(bytes.data() + 8, static_cast<std::size_t>(header_length));
  if (header_text[0] != '{')
    file_fail(op, source, "the header must start with '{' (a JSON object); it starts with byte " +
                              std::to_string(static_cast<unsigned char>(header_text[0])));
  const detail::json_value header = detail::json_reader(header_text, op, source).parse();

  const std::size_t data_start = 8 + static_cast<std::size_t>(header_length);
  const std::uint64_t data_size = file_size - data_start;
  auto storage = std::make_shared<std::string>(std::move(bytes));
  safetensors out;
  out.m_source = source;
  struct range {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<range> ranges;
  for (const auto& [name, info] : header.members) {
    if (name == "__metadata__") {
      if (info.type != detail::json_value::kind::object)
        file_fail(op, source, std::string("\"__metadata__\" must be an object of strings, not ") +
                                  detail::json_kind_name(info.type));
      for (const auto& [key, value] : info.members) {
        if (value.type != detail::json_value::kind::string)
          file_fail(op, source, "the metadata value of \"" + key + "\" must be a string, not " +
                                    detail::json_kind_name(value.type));
        out.m_metadata[key] = value.text;
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (info.type != detail::json_value::kind::object)
      file_fail(op, source, where + " must be described by an object, not " + detail::json_kind_name(info.type));
    const detail::json_value *dtype = nullptr, *shape_value = nullptr, *offsets = nullptr;
    for (const auto& [key, value] : info.members) {
      if (key == "dtype") dtype = &value;
      else if (key == "shape") shape_value = &value;
      else if (key == "data_offsets") offsets = &value;
      else file_fail(op, source, where + " has an unexpected key \"" + key + "\" (expected dtype, shape, data_offsets)");
    }
    for (auto [p, key] : {std::pair{dtype, "dtype"}, {shape_value, "shape"}, {offsets, "data_offsets"}})
      if (p == nullptr) file_fail(op, source, where + " has no \"" + key + "\"");
    if (dtype->type != detail::json_value::kind::string)
      file_fail(op, source, where + ": \"dtype\" must be a string, not " + detail::json_kind_name(dtype->type));
    const safetensors_dtype d = parse_dtype(dtype->text, op, source, where);
    if (shape_value->type != detail::json_value::kind::array)
      file_fail(op, source, where + ": \"shape\" must be an array, not " + detail::json_kind_name(shape_value->type));
    if (shape_value->items.size() > static_cast<std::size_t>(max_rank))
      file_fail(op, source, where + " has rank " + std::to_string(shape_value->items.size()) +
                                "; fluxion tensors have at most " + std::to_string(max_rank) + " axes");
    std::vector<index_t> extents;
    std::uint64_t elements = 1;
    for (std::size_t i = 0; i < shape_value->items.size(); ++i) {
      const std::uint64_t e =
          detail::json_to_unsigned(shape_value->items[i], op, source, where + ": shape[" + std::to_string(i) + "]");
      if (e > static_cast<std::uint64_t>(shape::max_elements) ||
          (e != 0 && elements > static_cast<std::uint64_t>(shape::max_elements) / e))
        file_fail(op, source, where + ": the shape describes more than 2^56 elements");
      elements *= e;
      extents.push_back(static_cast<index_t>(e));
    }
    if (offsets->type != detail::json_value::kind::array || offsets->items.size() != 2)
      file_fail(op, source, where + ": \"data_offsets\" must be an array of two integers [begin, end]");
    const std::uint64_t begin = detail::json_to_unsigned(offsets->items[0], op, source, where + ": data_offsets[0]");
    const std::uint64_t end = detail::json_to_unsigned(offsets->items[1], op, source, where + ": data_offsets[1]");
    const fluxion::shape s(extents);
    const std::uint64_t needed = elements * safetensors_element_size(d);
    if (end < begin)
      file_fail(op, source, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "] end before they begin");
    if (end - begin != needed)
      file_fail(op, source, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "] span " + std::to_string(end - begin) + " bytes, but shape " + to_string(s) +
                                " of " + safetensors_dtype_name(d) + " needs " + std::to_string(needed));
    if (end > data_size)
      file_fail(op, source, where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                                "] reach past the end of the data, which has " + std::to_string(data_size) +
                                " bytes (a truncated file)");
    ranges.push_back({begin, end, name});
    out.m_index.emplace(name, out.m_tensors.size());
    out.m_tensors.emplace_back(name, safetensors_tensor(d, s, storage, data_start + static_cast<std::size_t>(begin),
                                                        static_cast<std::size_t>(needed)));
  }
  // The byte ranges must tile the data: sorted by start, each begins where the previous ended.
  std::sort(ranges.begin(), ranges.end(), [](const range& a, const range& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  std::uint64_t at = 0;
  const range* previous = nullptr;
  for (const range& r : ranges) {
    if (r.begin < at)
      file_fail(op, source, "tensors '" + previous->name + "' [" + std::to_string(previous->begin) + ", " +
                                std::to_string(previous->end) + ") and '" + r.name + "' [" +
                                std::to_string(r.begin) + ", " + std::to_string(r.end) + ") overlap");
    if (r.begin > at)
      file_fail(op, source, "bytes [" + std::to_string(at) + ", " + std::to_string(r.begin) +
                                ") of the data belong to no tensor (a hole before '" + r.name + "')");
    at = r.end;
    previous = &r;
  }
  if (at != data_size)
    file_fail(op, source, "the tensors cover " + std::to_string(at) + " bytes of data but the file has " +
                              std::to_string(data_size) + " after its header (trailing bytes)");
  return out;
}

FLUXION_IO_INLINE std::string safetensors::serialize() const {
  std::string head;
  std::vector<std::string_view> data;
  header_and_data(head, data);
  std::string out = head;
  for (auto piece : data) out += piece;
  return out;
}

FLUXION_IO_INLINE void safetensors::save(const std::string& path, const std::string& op) const {
  std::string head;
  std::vector<std::string_view> pieces;
  header_and_data(head, pieces);
  pieces.insert(pieces.begin(), head);
  detail::atomic_write(op, path, pieces);
}

FLUXION_IO_INLINE safetensors_dtype safetensors::parse_dtype(const std::string& text, const std::string& op,
                                                         const std::string& source, const std::string& where) {
  for (auto d : {safetensors_dtype::f32, safetensors_dtype::f64, safetensors_dtype::i32, safetensors_dtype::i64,
                 safetensors_dtype::boolean})
    if (text == safetensors_dtype_name(d)) return d;
  static constexpr const char* known[] = {"F16", "BF16", "U8", "I8", "U16", "I16", "U32", "U64", "F8_E4M3",
                                          "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64"};
  for (const char* k : known)
    if (text == k)
      detail::file_fail(op, source, where + " has dtype " + text +
                                        ", which fluxion does not hold (it reads F32, F64, I32, I64 and "
                                        "BOOL); convert it first, e.g. with numpy's astype");
  detail::file_fail(op, source, where + " has an unknown dtype \"" + text + "\"");
}

FLUXION_IO_INLINE void safetensors::header_and_data(std::string& head, std::vector<std::string_view>& data) const {
  std::vector<std::size_t> order(m_tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return safetensors_element_size(m_tensors[a].second.dtype()) > safetensors_element_size(m_tensors[b].second.dtype());
  });
  std::string json = "{";
  if (!m_metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : m_metadata) {
      if (!first) json += ',';
      first = false;
      json += detail::json_quote(k) + ":" + detail::json_quote(v);
    }
    json += '}';
  }
  std::uint64_t offset = 0;
  for (std::size_t i : order) {
    const auto& [name, t] = m_tensors[i];
    if (json.size() > 1) json += ',';
    json += detail::json_quote(name) + ":{\"dtype\":\"" + safetensors_dtype_name(t.dtype()) + "\",\"shape\":[";
    for (int d = 0; d < t.shape().rank(); ++d) {
      if (d) json += ',';
      json += std::to_string(t.shape()[d]);
    }
    const std::uint64_t end = offset + t.bytes().size();
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
    data.push_back(t.bytes());
  }
  json += '}';
  while (json.size() % 8 != 0) json += ' ';
  head.clear();
  for (int i = 0; i < 8; ++i) head += static_cast<char>((static_cast<std::uint64_t>(json.size()) >> (8 * i)) & 0xff);
  head += json;
}
#endif  // FLUXION_IO_DEFINITIONS

}  // namespace fluxion::io

#if FLUXION_IO_PREBUILT
// The element types' specializations, compiled once in src/io.cpp (io/prebuilt.hpp).
#define FLUXION_SAFETENSORS_SPECIALIZATIONS(T)                                                                  \
  FLUXION_IO_EXTERN template void safetensors::add<T, cpu>(const std::string&, const tensor<T, cpu>&);         \
  FLUXION_IO_EXTERN template tensor<T> safetensors::get<T>(const std::string&) const;                          \
  FLUXION_IO_EXTERN template tensor<T> safetensors::to_tensor<T>(const safetensors_tensor&, const std::string&, \
                                                                 const std::string&) const;                     \
  FLUXION_IO_EXTERN template tensor<T> safetensors::decode<T>(const safetensors_tensor&);

namespace fluxion::io {
FLUXION_SAFETENSORS_SPECIALIZATIONS(float)
FLUXION_SAFETENSORS_SPECIALIZATIONS(double)
FLUXION_SAFETENSORS_SPECIALIZATIONS(std::int32_t)
FLUXION_SAFETENSORS_SPECIALIZATIONS(std::int64_t)
FLUXION_SAFETENSORS_SPECIALIZATIONS(bool)
}  // namespace fluxion::io

#undef FLUXION_SAFETENSORS_SPECIALIZATIONS
#endif
