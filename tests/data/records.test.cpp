// fx::data::npy, fx::data::tfrecord and parse_example: files written here, read back through the
// pipeline; tf.train.Example bytes encoded by hand from the protobuf wire-format spec.
#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include <fluxion/data.hpp>
#include <fluxion/io.hpp>
#include <fluxion/io/tfrecord.hpp>
#include <fluxion/tensor/creation.hpp>

#include "util.hpp"

using namespace data_test;

namespace {

// A minimal protobuf encoder, for building test records.
std::string varint(std::uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  return s + static_cast<char>(v);
}
std::string field(int number, const std::string& payload) {  // length-delimited (wire type 2)
  return varint(static_cast<std::uint64_t>(number) << 3 | 2) + varint(payload.size()) + payload;
}
std::string le32(std::uint32_t v) {
  return {static_cast<char>(v), static_cast<char>(v >> 8), static_cast<char>(v >> 16), static_cast<char>(v >> 24)};
}
std::string entry(const std::string& key, const std::string& feature) { return field(1, field(1, key) + field(2, feature)); }
std::string example(const std::string& entries) { return field(1, entries); }

}  // namespace

TEST_CASE("npy: slices of a .npy file along axis 0") {
  scratch_dir dir;
  const std::string path = dir.file("x.npy");
  fx::io::save_npy(path, fx::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {3, 2}));
  auto rows = collect(fx::data::npy<double>(path));
  REQUIRE(rows.size() == 3);
  CHECK(rows[2].shape() == fx::shape{2});
  CHECK(rows[2].to_vector() == std::vector<double>{5, 6});
  check_contains(io_error_of([&] { fx::data::npy<float>(path); }), {"load_npy", path, "float32 was requested"});
  fx::io::save_npy(path, fx::tensor<float>(2.f));
  check_contains(io_error_of([&] { fx::data::npy<float>(path); }), {"npy: '" + path + "'", "a scalar"});
}

TEST_CASE("parse_example: a record encoded by hand, byte by byte") {
  // Example{features{feature{key: "label", value{int64_list{value: [7]}}}}}, packed as TensorFlow writes it.
  const std::string bytes("\x0a\x10\x0a\x0e\x0a\x05label\x12\x05\x1a\x03\x0a\x01\x07", 18);
  const auto ex = fx::data::parse_example(bytes);
  CHECK(ex.features.size() == 1);
  CHECK(ex.int64s("label") == std::vector<std::int64_t>{7});
  CHECK(ex.int64_tensor("label").to_vector() == std::vector<std::int64_t>{7});
}

TEST_CASE("parse_example: bytes, floats (packed and not), int64 (negative, unpacked), unknown fields") {
  const std::string floats_packed = field(2, field(1, le32(std::bit_cast<std::uint32_t>(1.5f)) +
                                                          le32(std::bit_cast<std::uint32_t>(-0.25f))));
  const std::string floats_unpacked = field(2, "\x0d" + le32(std::bit_cast<std::uint32_t>(3.0f)) + "\x0d" +
                                                   le32(std::bit_cast<std::uint32_t>(4.0f)));
  const std::string ints = field(3, "\x08" + varint(static_cast<std::uint64_t>(-1)) + "\x08" + varint(300) +
                                        field(1, varint(5) + varint(1ull << 40)));
  const std::string bytes = field(1, field(1, std::string("png\0data", 8)) + field(1, ""));
  const std::string unknown = varint(7 << 3 | 0) + varint(99);  // field 7, a varint: skipped
  const auto ex = fx::data::parse_example(
      example(entry("f", floats_packed) + unknown + entry("g", floats_unpacked) + entry("i", ints) + entry("b", bytes)) +
      unknown);
  CHECK(ex.floats("f") == std::vector<float>{1.5f, -0.25f});
  CHECK(ex.floats("g") == std::vector<float>{3, 4});
  CHECK(ex.int64s("i") == std::vector<std::int64_t>{-1, 300, 5, std::int64_t{1} << 40});
  CHECK(ex.bytes("b") == std::vector<std::string>{std::string("png\0data", 8), ""});
  CHECK(ex.float_tensor("f", fx::shape{2, 1}).shape() == fx::shape{2, 1});
  CHECK_THROWS_WITH_AS(ex.floats("i"), "example::floats: the feature 'i' is a int64_list, not a float_list",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(ex.floats("z"), doctest::Contains("no feature named 'z'; the example has 'b', 'f', 'g', 'i'"),
                       fx::invalid_argument);
  CHECK_THROWS_AS(ex.float_tensor("f", fx::shape{3}), fx::shape_error);
  CHECK(fx::data::parse_example("").features.empty());
}

TEST_CASE("parse_example: malformed bytes name the byte offset and what was expected") {
  const std::string good = example(entry("x", field(2, field(1, le32(0)))));
  check_contains(io_error_of([&] { fx::data::parse_example(good.substr(0, good.size() - 2)); }),
                 {"parse_example: malformed tf.train.Example at byte offset 1 (inside the Example)", "says " + std::to_string(good.size() - 2)});
  check_contains(io_error_of([&] { fx::data::parse_example(std::string("\x0a\x80", 2)); }),
                 {"byte offset 1", "a varint is truncated"});
  check_contains(io_error_of([&] { fx::data::parse_example(std::string("\x08\x01", 2)); }),
                 {"byte offset 0", "field 'features' has wire type 0, expected 2"});
  check_contains(io_error_of([&] { fx::data::parse_example(std::string("\x13", 1)); }), {"byte offset 1", "unsupported wire type 3"});
  // A packed FloatList whose length is not a multiple of 4.
  check_contains(io_error_of([&] { fx::data::parse_example(example(entry("x", field(2, field(1, "abc"))))); }),
                 {"a 4-byte value is truncated", "packed FloatList"});
}

TEST_CASE("tfrecord: records through the pipeline, parsed, batched; corruption names record and offset") {
  scratch_dir dir;
  const std::string path = dir.file("train.tfrecord");
  std::vector<std::string> records;
  {
    fx::io::tfrecord_writer w(path);
    for (int i = 0; i < 5; ++i) {
      records.push_back(example(entry("x", field(2, field(1, le32(std::bit_cast<std::uint32_t>(0.5f * i)) +
                                                                le32(std::bit_cast<std::uint32_t>(-1.0f * i))))) +
                                entry("y", field(3, field(1, varint(static_cast<std::uint64_t>(i)))))));
      w.write(records.back());
    }
  }
  CHECK(collect(fx::data::tfrecord(path)) == records);
  auto ds = fx::data::tfrecord(path)
                .map([](const std::string& r) {
                  const auto ex = fx::data::parse_example(r);
                  return std::tuple{ex.float_tensor("x"), fx::tensor<std::int32_t>(static_cast<std::int32_t>(ex.int64s("y").at(0)))};
                })
                .batch(4);
  auto batches = collect(ds);
  REQUIRE(batches.size() == 2);
  CHECK(std::get<0>(batches[0]).shape() == fx::shape{4, 2});
  CHECK(std::get<0>(batches[0]).to_vector() == std::vector<float>{0, -0.f, 0.5f, -1, 1, -2, 1.5f, -3});
  CHECK(std::get<1>(batches[1]).to_vector() == std::vector<std::int32_t>{4});

  // Flip one payload byte of record 1: record 0 takes 16 + size bytes, so record 1 starts there.
  std::ifstream in(path, std::ios::binary);
  std::string file{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const std::size_t offset1 = 16 + records[0].size();
  file[offset1 + 12 + 2] ^= 0x20;
  write_bytes(path, file);
  check_contains(io_error_of([&] { collect(fx::data::tfrecord(path)); }),
                 {"tfrecord_reader: '" + path + "'", "record 1 at byte offset " + std::to_string(offset1),
                  "data CRC mismatch"});
  write_bytes(path, file.substr(0, offset1 + 7));
  check_contains(io_error_of([&] { collect(fx::data::tfrecord(path)); }),
                 {"record 1 at byte offset " + std::to_string(offset1), "truncated record"});
  check_contains(io_error_of([&] { fx::data::tfrecord(dir.file("none")); }), {"none'", "no such file"});
}
