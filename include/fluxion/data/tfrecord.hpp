// TFRecord files as datasets of records, and tf.train.Example records decoded.
//
//   auto records = fx::data::tfrecord("train.tfrecord");          // dataset<std::string>, CRCs checked
//   auto ds = records.map([](const std::string& r) {
//     fx::data::example ex = fx::data::parse_example(r);
//     return std::tuple{ex.float_tensor("image"), fx::tensor<std::int32_t>(ex.int64s("label").at(0))};
//   });
//
// tfrecord(path) streams the records of a file through fx::io::tfrecord_reader (io/tfrecord.hpp):
// a length-CRC or data-CRC mismatch, or a file that ends inside a record, throws fluxion::io_error
// naming the file, the record and its byte offset. parse_example decodes the protobuf wire format of
// tf.train.Example (Example{Features features = 1}, Features{map<string, Feature> feature = 1},
// Feature{oneof BytesList bytes_list = 1, FloatList float_list = 2, Int64List int64_list = 3}) with
// a small decoder of its own (no libprotobuf): packed and unpacked repeated values are both read,
// unknown fields are skipped, and malformed bytes throw fluxion::io_error naming the byte offset in
// the record and what was expected.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "../core/error.hpp"
#include "../io/tfrecord.hpp"
#include "../tensor/tensor.hpp"
#include "dataset.hpp"

namespace fluxion::data {

/// The records of a TFRecord file, in order, each checked against both of its CRCs.
inline dataset<std::string> tfrecord(const std::string& path) {
  io::tfrecord_reader check(path);  // a missing file is an error now, not at iteration
  return dataset<std::string>([path]() -> dataset<std::string>::next_fn {
    auto reader = std::make_shared<io::tfrecord_reader>(path);
    return [reader]() { return reader->next(); };
  });
}

/// One feature of a tf.train.Example: a list of byte strings, floats or 64-bit integers.
using feature = std::variant<std::vector<std::string>, std::vector<float>, std::vector<std::int64_t>>;

/// A decoded tf.train.Example: its features by name.
class example {
 public:
  std::map<std::string, feature> features;

  bool contains(const std::string& name) const { return features.count(name) != 0; }
  const std::vector<std::string>& bytes(const std::string& name) const { return get<0>(name, "bytes"); }
  const std::vector<float>& floats(const std::string& name) const { return get<1>(name, "floats"); }
  const std::vector<std::int64_t>& int64s(const std::string& name) const { return get<2>(name, "int64s"); }

  /// A float feature as a tensor of shape `s`, (n,) by default.
  tensor<float> float_tensor(const std::string& name, std::optional<shape> s = std::nullopt) const {
    return to_tensor<float>(floats(name), name, s, "float_tensor");
  }
  /// An int64 feature as a tensor of shape `s`, (n,) by default.
  tensor<std::int64_t> int64_tensor(const std::string& name, std::optional<shape> s = std::nullopt) const {
    return to_tensor<std::int64_t>(int64s(name), name, s, "int64_tensor");
  }

 private:
  static const char* kind_name(std::size_t i) { return i == 0 ? "bytes_list" : i == 1 ? "float_list" : "int64_list"; }
  template <std::size_t I>
  const std::variant_alternative_t<I, feature>& get(const std::string& name, const char* op) const {
    const auto it = features.find(name);
    if (it == features.end()) {
      std::string have;
      for (const auto& [k, v] : features) have += (have.empty() ? "'" : ", '") + k + "'";
      throw invalid_argument("example::" + std::string(op) + ": no feature named '" + name + "'; the example has " +
                             (have.empty() ? std::string("none") : have));
    }
    if (it->second.index() != I)
      throw invalid_argument("example::" + std::string(op) + ": the feature '" + name + "' is a " +
                             kind_name(it->second.index()) + ", not a " + kind_name(I));
    return std::get<I>(it->second);
  }
  template <class T, class V>
  static tensor<T> to_tensor(const std::vector<V>& v, const std::string& name, std::optional<shape> s, const char* op) {
    const shape target = s ? *s : shape{static_cast<index_t>(v.size())};
    if (target.size() != static_cast<index_t>(v.size()))
      throw shape_error("example::" + std::string(op) + ": the feature '" + name + "' has " + std::to_string(v.size()) +
                        " values, shape " + to_string(target) + " needs " + std::to_string(target.size()));
    tensor<T> t(target);
    for (std::size_t i = 0; i < v.size(); ++i) t.mutable_data()[i] = static_cast<T>(v[i]);
    return t;
  }
};

namespace detail {

/// A cursor over protobuf wire-format bytes; errors name the offset in the whole record.
class wire_reader {
 public:
  wire_reader(std::string_view bytes, std::size_t base, std::string_view what)
      : m_bytes(bytes), m_base(base), m_what(what) {}
  bool done() const { return m_pos == m_bytes.size(); }
  std::size_t offset() const { return m_base + m_pos; }

  std::uint64_t varint() {
    const std::size_t start = offset();
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (m_pos == m_bytes.size()) malformed(start, "a varint is truncated");
      const auto b = static_cast<unsigned char>(m_bytes[m_pos++]);
      v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    malformed(start, "a varint is longer than 10 bytes");
  }
  std::string_view length_delimited() {
    const std::size_t start = offset();
    const std::uint64_t n = varint();
    if (n > m_bytes.size() - m_pos)
      malformed(start, "a length-delimited field says " + std::to_string(n) + " bytes, " +
                           std::to_string(m_bytes.size() - m_pos) + " are left in the " + std::string(m_what));
    auto s = m_bytes.substr(m_pos, static_cast<std::size_t>(n));
    m_pos += static_cast<std::size_t>(n);
    return s;
  }
  std::uint32_t fixed32() {
    if (m_bytes.size() - m_pos < 4) malformed(offset(), "a 4-byte value is truncated");
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(m_bytes[m_pos + static_cast<std::size_t>(i)]);
    m_pos += 4;
    return v;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); break;
      case 1:
        if (m_bytes.size() - m_pos < 8) malformed(offset(), "an 8-byte value is truncated");
        m_pos += 8;
        break;
      case 2: length_delimited(); break;
      case 5: fixed32(); break;
      default: malformed(offset(), "unsupported wire type " + std::to_string(wire_type) + " (groups, or not protobuf)");
    }
  }
  /// The next tag as (field number, wire type).
  std::pair<std::uint64_t, int> tag() {
    const std::size_t start = offset();
    const std::uint64_t t = varint();
    if ((t >> 3) == 0) malformed(start, "field number 0 is invalid");
    return {t >> 3, static_cast<int>(t & 7)};
  }
  wire_reader sub(std::string_view bytes, std::string_view what) const {
    return wire_reader(bytes, m_base + static_cast<std::size_t>(bytes.data() - m_bytes.data()), what);
  }
  [[noreturn]] void malformed(std::size_t at, const std::string& what) const {
    throw io_error("parse_example: malformed tf.train.Example at byte offset " + std::to_string(at) + " (inside the " +
                   std::string(m_what) + "): " + what);
  }
  [[noreturn]] void wrong_type(std::size_t at, const char* field, int got, const char* want) const {
    malformed(at, std::string("field '") + field + "' has wire type " + std::to_string(got) + ", expected " + want);
  }

 private:
  std::string_view m_bytes;
  std::size_t m_base;
  std::string_view m_what;
  std::size_t m_pos = 0;
};

inline feature parse_feature(wire_reader r) {
  feature f = std::vector<float>{};  // a Feature with no kind set: an empty list
  while (!r.done()) {
    const std::size_t at = r.offset();
    const auto [field, type] = r.tag();
    if (field < 1 || field > 3) {
      r.skip(type);
      continue;
    }
    if (type != 2) r.wrong_type(at, field == 1 ? "bytes_list" : field == 2 ? "float_list" : "int64_list", type, "2");
    wire_reader list = r.sub(r.length_delimited(), field == 1 ? "BytesList" : field == 2 ? "FloatList" : "Int64List");
    if (field == 1) {
      std::vector<std::string> values;
      while (!list.done()) {
        const std::size_t vat = list.offset();
        const auto [n, t] = list.tag();
        if (n != 1) { list.skip(t); continue; }
        if (t != 2) list.wrong_type(vat, "BytesList.value", t, "2");
        values.emplace_back(list.length_delimited());
      }
      f = std::move(values);
    } else if (field == 2) {
      std::vector<float> values;
      while (!list.done()) {
        const std::size_t vat = list.offset();
        const auto [n, t] = list.tag();
        if (n != 1) { list.skip(t); continue; }
        if (t == 5) {
          values.push_back(std::bit_cast<float>(list.fixed32()));
        } else if (t == 2) {  // packed
          wire_reader packed = list.sub(list.length_delimited(), "packed FloatList");
          while (!packed.done()) values.push_back(std::bit_cast<float>(packed.fixed32()));
        } else {
          list.wrong_type(vat, "FloatList.value", t, "5 or 2 (packed)");
        }
      }
      f = std::move(values);
    } else {
      std::vector<std::int64_t> values;
      while (!list.done()) {
        const std::size_t vat = list.offset();
        const auto [n, t] = list.tag();
        if (n != 1) { list.skip(t); continue; }
        if (t == 0) {
          values.push_back(static_cast<std::int64_t>(list.varint()));
        } else if (t == 2) {  // packed
          wire_reader packed = list.sub(list.length_delimited(), "packed Int64List");
          while (!packed.done()) values.push_back(static_cast<std::int64_t>(packed.varint()));
        } else {
          list.wrong_type(vat, "Int64List.value", t, "0 or 2 (packed)");
        }
      }
      f = std::move(values);
    }
  }
  return f;
}

}  // namespace detail

/// Decodes a serialized tf.train.Example.
inline example parse_example(std::string_view record) {
  example ex;
  detail::wire_reader top(record, 0, "Example");
  while (!top.done()) {
    const std::size_t at = top.offset();
    const auto [field, type] = top.tag();
    if (field != 1) {
      top.skip(type);
      continue;
    }
    if (type != 2) top.wrong_type(at, "features", type, "2");
    detail::wire_reader features = top.sub(top.length_delimited(), "Features");
    while (!features.done()) {
      const std::size_t fat = features.offset();
      const auto [n, t] = features.tag();
      if (n != 1) {
        features.skip(t);
        continue;
      }
      if (t != 2) features.wrong_type(fat, "feature", t, "2");
      detail::wire_reader entry = features.sub(features.length_delimited(), "Features.feature map entry");
      std::string key;
      feature value = std::vector<float>{};
      while (!entry.done()) {
        const std::size_t eat = entry.offset();
        const auto [en, et] = entry.tag();
        if (en == 1) {
          if (et != 2) entry.wrong_type(eat, "key", et, "2");
          key = std::string(entry.length_delimited());
        } else if (en == 2) {
          if (et != 2) entry.wrong_type(eat, "value", et, "2");
          value = detail::parse_feature(entry.sub(entry.length_delimited(), "Feature"));
        } else {
          entry.skip(et);
        }
      }
      ex.features[key] = std::move(value);  // a repeated key: the last one wins, as in protobuf maps
    }
  }
  return ex;
}

}  // namespace fluxion::data
