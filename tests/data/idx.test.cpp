// fx::data::idx_images / idx_labels / idx: IDX files written byte by byte here, plain and gzip
// (through zlib), read back value by value; every malformed file with its message.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#if FLUXION_HAS_ZLIB
#include <zlib.h>
#endif

#include <fluxion/data.hpp>

#include "util.hpp"

using namespace data_test;

namespace {

std::string be32(std::uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

/// An IDX file of unsigned bytes: magic 00 00 08 rank, extents, values.
std::string idx_u8(const std::vector<std::uint32_t>& extents, const std::vector<unsigned char>& values) {
  std::string s{'\0', '\0', '\x08', static_cast<char>(extents.size())};
  for (auto e : extents) s += be32(e);
  for (auto v : values) s += static_cast<char>(v);
  return s;
}

#if FLUXION_HAS_ZLIB
void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  REQUIRE(gzclose(f) == Z_OK);
}
#else
// Without zlib (no fluxion::zlib target), the .gz cases are left out; tests/data/no_zlib checks the error.
void write_gzip(const std::string&, const std::string&) {}
#endif

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// 3 images of 2 x 3 pixels: pixel k of image i is 40 * i + k.
std::vector<unsigned char> pixels() {
  std::vector<unsigned char> v;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 6; ++k) v.push_back(static_cast<unsigned char>(40 * i + k + (i == 2 && k == 5 ? 170 : 0)));
  return v;  // the last pixel is 255
}

void check_images(const fx::data::dataset<fx::tensor<float>>& ds) {
  CHECK(ds.cardinality() == 3);
  const auto px = pixels();
  int i = 0;
  for (auto& image : ds) {
    CHECK(image.shape() == fx::shape{2, 3, 1});
    const auto v = image.to_vector();
    for (int k = 0; k < 6; ++k) CHECK(v[static_cast<std::size_t>(k)] == doctest::Approx(px[static_cast<std::size_t>(6 * i + k)] / 255.0).epsilon(1e-7));
    ++i;
  }
  CHECK(i == 3);
}

}  // namespace

TEST_CASE("idx_images and idx_labels: plain and gzip files, values in [0, 1] and int32") {
  scratch_dir dir;
  const std::string images = idx_u8({3, 2, 3}, pixels());
  const std::string labels = idx_u8({3}, {9, 0, 4});
  write_bytes(dir.file("images"), images);
  write_gzip(dir.file("images.gz"), images);
  write_bytes(dir.file("labels"), labels);
  write_gzip(dir.file("labels.gz"), labels);
  check_images(fx::data::idx_images(dir.file("images")));
  auto first = collect(fx::data::idx_images(dir.file("images")));
  CHECK(first[2].to_vector().back() == 1.0f);
  CHECK(first[0].to_vector().front() == 0.0f);
  if (fx::data::has_zlib) check_images(fx::data::idx_images(dir.file("images.gz")));
  for (const char* name : {"labels", "labels.gz"}) {
    if (!fx::data::has_zlib && std::string(name) == "labels.gz") continue;
    auto ds = fx::data::idx_labels(dir.file(name));
    std::vector<std::int32_t> got;
    for (auto& l : ds) {
      CHECK(l.shape() == fx::shape{});
      got.push_back(l.data()[0]);
    }
    CHECK(got == std::vector<std::int32_t>{9, 0, 4});
  }
  // Zipped and batched, as a training loop takes them.
  auto batches = collect(fx::data::idx_images(dir.file("images")).zip(fx::data::idx_labels(dir.file("labels"))).batch(2));
  REQUIRE(batches.size() == 2);
  CHECK(std::get<0>(batches[0]).shape() == fx::shape{2, 2, 3, 1});
  CHECK(std::get<1>(batches[0]).to_vector() == std::vector<std::int32_t>{9, 0});
  CHECK(std::get<1>(batches[1]).to_vector() == std::vector<std::int32_t>{4});
}

TEST_CASE("idx<T>: other value types, big-endian, converted") {
  scratch_dir dir;
  // int16 (0x0B), shape (2, 2): -2, 300, 7, -32768
  std::string s{'\0', '\0', '\x0b', '\x02'};
  s += be32(2) + be32(2);
  for (std::int16_t v : {std::int16_t(-2), std::int16_t(300), std::int16_t(7), std::int16_t(-32768)})
    s += std::string{static_cast<char>(static_cast<std::uint16_t>(v) >> 8), static_cast<char>(v & 0xFF)};
  write_bytes(dir.file("i16"), s);
  auto rows = collect(fx::data::idx<float>(dir.file("i16")));
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].to_vector() == std::vector<float>{-2, 300});
  CHECK(rows[1].to_vector() == std::vector<float>{7, -32768});
  // float32 (0x0D), shape (2,): 1.5 (0x3FC00000), -0.25 (0xBE800000)
  std::string f{'\0', '\0', '\x0d', '\x01'};
  f += be32(2) + be32(0x3FC00000u) + be32(0xBE800000u);
  write_bytes(dir.file("f32"), f);
  auto scalars = collect(fx::data::idx<double>(dir.file("f32")));
  REQUIRE(scalars.size() == 2);
  CHECK(scalars[0].data()[0] == 1.5);
  CHECK(scalars[1].data()[0] == -0.25);
}

TEST_CASE("idx: every malformed file names the file, the offset or element, and what was expected") {
  scratch_dir dir;
  const std::string path = dir.file("bad");
  const std::string images = idx_u8({3, 2, 3}, pixels());

  write_bytes(path, "\x12\x34\x08\x03" + images.substr(4));
  check_contains(io_error_of([&] { fx::data::idx_images(path); }),
                 {"idx_images: '" + path + "'", "bad IDX magic at byte offset 0", "[12 34 08 03]"});
  write_bytes(path, std::string("\0\0\x07\x01", 4) + be32(1) + "x");
  check_contains(io_error_of([&] { fx::data::idx<float>(path); }), {"bad IDX magic", "[00 00 07 01]"});
  write_bytes(path, images.substr(0, 10));
  check_contains(io_error_of([&] { fx::data::idx_images(path); }),
                 {"truncated IDX header", "byte offset 8", "extent 1 of 3"});
  write_bytes(path, images.substr(0, images.size() - 1));
  check_contains(io_error_of([&] { fx::data::idx_images(path); }),
                 {path, "truncated IDX data", "shape (3, 2, 3)", "needs 34 bytes", "the file has 33"});
  write_bytes(path, images + "extra");
  check_contains(io_error_of([&] { fx::data::idx_images(path); }), {"needs 34 bytes", "the file has 39"});
  write_bytes(path, idx_u8({3}, {1, 2, 3}));
  check_contains(io_error_of([&] { fx::data::idx_images(path); }),
                 {"idx_images", "expected images: 3 dimensions", "1 dimension(s) (3,)", "use idx_labels"});
  write_bytes(path, images);
  check_contains(io_error_of([&] { fx::data::idx_labels(path); }),
                 {"idx_labels", "expected labels: 1 dimension", "(3, 2, 3)", "use idx_images"});
  check_contains(io_error_of([&] { fx::data::idx_labels(dir.file("missing")); }), {"missing'", "no such file"});
  // Found by fuzz/idx.fuzz.cpp: 134 million items of zero values each, which the reader streamed
  // (empty tensor after empty tensor) until the fuzzer's timeout.
  write_bytes(path, std::string("\0\0\x08\x02\x08\x02\x01\0\0\0\0\0", 12));
  check_contains(io_error_of([&] { fx::data::idx<float>(path); }),
                 {"idx: '" + path + "'", "bad IDX header: extent 1 is 0", "134349056 items"});
  // Also found by the fuzzer: no items of 4 billion values each. The reader allocated an element's
  // buffer (16 GB) before knowing whether there was any element to read.
  write_bytes(path, std::string("\0\0\x08\x03\0\0\0\0\0\0\0\x7a\x02\0\x10\0", 16));
  std::size_t items = 0;
  for (const auto& image : fx::data::idx<float>(path)) items += static_cast<std::size_t>(image.size() >= 0);
  CHECK(items == 0);

  if (!fx::data::has_zlib) return;
  // A gzip file whose data is short: found while streaming, at the element it hits.
  write_gzip(dir.file("short.gz"), images.substr(0, images.size() - 4));
  auto ds = fx::data::idx_images(dir.file("short.gz"));  // the size of gzip data is not known up front
  check_contains(io_error_of([&] { collect(ds); }),
                 {"short.gz", "truncated IDX data: element 2 of 3 at byte offset 28", "needs 6 bytes", "ends after 2"});
  // A truncated gzip stream, and a corrupt one.
  write_gzip(dir.file("full.gz"), images);
  const std::string gz = read_file(dir.file("full.gz"));
  write_bytes(dir.file("cut.gz"), gz.substr(0, gz.size() - 10));
  check_contains(io_error_of([&] { collect(fx::data::idx_images(dir.file("cut.gz"))); }),
                 {"idx_images: '" + dir.file("cut.gz") + "'", "gzip error at uncompressed byte offset", "truncated"});
  std::string corrupt = gz;
  corrupt[corrupt.size() - 6] ^= 0x55;  // the stored CRC-32 of the data
  write_bytes(dir.file("corrupt.gz"), corrupt);
  check_contains(io_error_of([&] { collect(fx::data::idx_images(dir.file("corrupt.gz"))); }),
                 {"corrupt.gz", "gzip error at uncompressed byte offset"});
}
