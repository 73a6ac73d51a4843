// fx::io TFRecord framing: CRC-32C against RFC 3720's vectors, masking, the exact bytes of records
// (from an independent bitwise CRC in Python, tests/io comments below), round trips, and every
// corruption the reader must name.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <fluxion/io/tfrecord.hpp>
#include "../scratch_dir.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace io_tfrecord_test {

namespace fx = fluxion;

namespace {


std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}
std::string message_of_reading(const std::string& path) {
  try {
    fx::io::tfrecord_reader r(path);
    while (r.next()) {
    }
  } catch (const fx::io_error& e) {
    return e.what();
  }
  return "(no error)";
}
void check_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& p : parts) CHECK_MESSAGE(message.find(p) != std::string::npos, "'" << p << "' not in: " << message);
}

}  // namespace

TEST_CASE("crc32c: RFC 3720 test vectors") {
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
    down[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  }
  CHECK(fx::io::crc32c(zeros.data(), 32) == 0x8A9136AAu);
  CHECK(fx::io::crc32c(ones.data(), 32) == 0x62A8AB43u);
  CHECK(fx::io::crc32c(up.data(), 32) == 0x46DD794Eu);
  CHECK(fx::io::crc32c(down.data(), 32) == 0x113FDB5Cu);
  CHECK(fx::io::crc32c("123456789", 9) == 0xE3069283u);
  CHECK(fx::io::crc32c(nullptr, 0) == 0u);
  // Every split point of a longer message gives the same CRC (exercises the 8-byte path and the tail).
  std::string text;
  for (int i = 0; i < 100; ++i) text += static_cast<char>('a' + i % 26);
  const std::uint32_t whole = fx::io::crc32c(text);
  for (std::size_t split = 0; split <= text.size(); ++split)
    CHECK(fx::io::crc32c_extend(fx::io::crc32c(text.data(), split), text.data() + split, text.size() - split) == whole);
}

TEST_CASE("masked_crc32c: TensorFlow's mask and its inverse") {
  for (std::uint32_t crc : {0u, 1u, 0xE3069283u, 0xFFFFFFFFu, 0x8A9136AAu}) {
    CHECK(fx::io::unmask_crc32c(fx::io::mask_crc32c(crc)) == crc);
    CHECK(fx::io::mask_crc32c(crc) != crc);
  }
  CHECK(fx::io::masked_crc32c("123456789", 9) == fx::io::mask_crc32c(0xE3069283u));
  // rotate_right(0xE3069283, 15) + 0xA282EAD8, by hand: 0x2507C60D + 0xA282EAD8 = 0xC78AB0E5
  CHECK(fx::io::mask_crc32c(0xE3069283u) == 0xC78AB0E5u);
}

TEST_CASE("tfrecord_writer: exact bytes, as an independent bitwise CRC in Python computes them") {
  // Python: L = struct.pack('<Q', len(r)); L + pack('<I', mask(crc32c(L))) + r + pack('<I', mask(crc32c(r)))
  scratch_dir dir;
  const std::string path = dir.file("a.tfrecord");
  {
    fx::io::tfrecord_writer w(path);
    w.write("hello");
    w.write("");
    CHECK(w.records() == 2);
    CHECK(w.bytes() == 21 + 16);
  }
  CHECK(read_all(path) == from_hex("0500000000000000eab2043e68656c6c6fbb1f1c19"
                                   "000000000000000029039807d8ea82a2"));
}

TEST_CASE("tfrecord round trip: many records of many sizes, binary bytes included") {
  scratch_dir dir;
  const std::string path = dir.file("b.tfrecord");
  std::vector<std::string> records;
  for (int i = 0; i < 50; ++i) {
    std::string r;
    for (int k = 0; k < i * 37; ++k) r += static_cast<char>((k * 131 + i) & 0xFF);
    records.push_back(r);
  }
  fx::io::tfrecord_writer w(path);
  for (const auto& r : records) w.write(r);
  w.flush();  // readable before the writer is gone
  fx::io::tfrecord_reader reader(path);
  std::size_t n = 0;
  while (auto r = reader.next()) {
    REQUIRE(n < records.size());
    CHECK(*r == records[n]);
    ++n;
  }
  CHECK(n == records.size());
  CHECK(reader.record_index() == records.size());
  CHECK(!reader.next());
}

TEST_CASE("tfrecord_reader: every corruption names the file, the record and its offset") {
  scratch_dir dir;
  const std::string path = dir.file("c.tfrecord");
  {
    fx::io::tfrecord_writer w(path);
    w.write("first");    // record 0 at offset 0: 16 + 5 = 21 bytes
    w.write("second!");  // record 1 at offset 21: 16 + 7 bytes
  }
  const std::string good = read_all(path);
  REQUIRE(good.size() == 21 + 23);

  SUBCASE("a flipped payload byte is a data CRC mismatch of record 1") {
    std::string bad = good;
    bad[21 + 12 + 3] ^= 0x01;
    write_all(path, bad);
    check_contains(message_of_reading(path), {"tfrecord_reader", path, "record 1 at byte offset 21", "data CRC mismatch"});
  }
  SUBCASE("a flipped length byte is a length CRC mismatch") {
    std::string bad = good;
    bad[21] ^= 0x40;
    write_all(path, bad);
    check_contains(message_of_reading(path), {path, "record 1 at byte offset 21", "length CRC mismatch"});
  }
  SUBCASE("a flipped stored data CRC") {
    std::string bad = good;
    bad[20] ^= 0x10;
    write_all(path, bad);
    check_contains(message_of_reading(path), {"record 0 at byte offset 0", "data CRC mismatch"});
  }
  SUBCASE("truncated inside the header") {
    write_all(path, good.substr(0, 21 + 5));
    check_contains(message_of_reading(path), {"record 1 at byte offset 21", "truncated record", "5 bytes into its 12-byte header"});
  }
  SUBCASE("truncated inside the data") {
    write_all(path, good.substr(0, 21 + 12 + 4));
    check_contains(message_of_reading(path), {"record 1 at byte offset 21", "truncated record", "7 data bytes"});
  }
  SUBCASE("truncated inside the data CRC") {
    write_all(path, good.substr(0, good.size() - 1));
    check_contains(message_of_reading(path), {"record 1 at byte offset 21", "truncated record"});
  }
  SUBCASE("a missing file and a directory") {
    check_contains(message_of_reading(dir.file("nope.tfrecord")), {"nope.tfrecord", "no such file"});
    check_contains(message_of_reading(dir.path.string()), {"is a directory"});
  }
  SUBCASE("an empty file has no records") {
    write_all(path, "");
    fx::io::tfrecord_reader r(path);
    CHECK(!r.next());
  }
}

TEST_CASE("tfrecord_writer: an unwritable path throws naming it") {
  scratch_dir dir;
  const std::string path = dir.file("missing_dir/x.tfrecord");
  try {
    fx::io::tfrecord_writer w(path);
    FAIL("no exception");
  } catch (const fx::io_error& e) {
    check_contains(e.what(), {"tfrecord_writer", path, "cannot create"});
  }
}

}  // namespace io_tfrecord_test
