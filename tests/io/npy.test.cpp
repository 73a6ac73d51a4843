// fx::io::load_npy and save_npy: round trips of every dtype at ranks 0 to 4, files written by NumPy
// (tests/fixtures/io/make_fixtures.py), and every error, with its message.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fluxion/io.hpp>
#include <fluxion/tensor.hpp>

#include "../test_util.hpp"
#include "../scratch_dir.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace io_npy_test {

namespace {

std::string fixture(const std::string& name) { return std::string(FLUXION_TEST_FIXTURES_DIR) + "/io/" + name + ".npy"; }


void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A version 1.0 file with the given header dict (padded as NumPy pads it) and data bytes.
std::string npy_v1(std::string dict, const std::string& data) {
  dict += '\n';
  while ((10 + dict.size()) % 64 != 0) dict.insert(dict.size() - 1, " ");
  std::string bytes = "\x93NUMPY";
  bytes += '\x01';
  bytes += '\0';
  bytes += static_cast<char>(dict.size() & 0xff);
  bytes += static_cast<char>(dict.size() >> 8);
  return bytes + dict + data;
}

template <class T>
std::string message_of_load(const std::string& path) {
  try {
    (void)fx::io::load_npy<T>(path);
  } catch (const fx::io_error& e) {
    return e.what();
  }
  FAIL("load_npy<" << fx::dtype_name<T>() << ">(" << path << ") did not throw fx::io_error");
  return "";
}

void check_contains(const std::string& message, const std::vector<std::string>& parts) {
  INFO("message: " << message);
  for (const auto& part : parts) CHECK_MESSAGE(message.find(part) != std::string::npos, "missing: " << part);
}

}  // namespace

TEST_CASE_TEMPLATE("save_npy then load_npy gives the same tensor, ranks 0 to 4", T, float, double, std::int32_t,
                   std::int64_t, bool) {
  scratch_dir dir;
  const std::vector<fx::shape> shapes = {fx::shape{}, fx::shape{5}, fx::shape{2, 3}, fx::shape{2, 1, 3},
                                         fx::shape{2, 3, 1, 2}, fx::shape{0, 3}};
  unsigned seed = 1;
  for (const auto& s : shapes) {
    CAPTURE(s);
    const auto t = test::random_tensor<T>(s, seed++, -1000, 1000);
    const std::string path = dir.file("t.npy");
    fx::io::save_npy(path, t);
    const auto back = fx::io::load_npy<T>(path);
    CHECK(back.shape() == t.shape());
    CHECK(back.to_vector() == t.to_vector());
    // No temporary file is left next to the result.
    CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator{}) == 1);
  }
}

TEST_CASE("save_npy writes what NumPy writes: the header is padded to 64 bytes, data follows") {
  scratch_dir dir;
  const fx::tensor<float> t = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  fx::io::save_npy(dir.file("a.npy"), t);
  const std::string bytes = read_bytes(dir.file("a.npy"));
  // The same header, byte for byte, as NumPy's np.save of a float32 (2, 3) array.
  CHECK(bytes.substr(0, 128) == read_bytes(fixture("float32_2x3")).substr(0, 128));
  REQUIRE(bytes.size() == 128 + 6 * 4);
  CHECK(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  CHECK(bytes[127] == '\n');
  CHECK(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") == 10);
  float first;
  std::memcpy(&first, bytes.data() + 128, 4);
  CHECK(first == 1.f);
}

TEST_CASE("save_npy materializes an expression, and overwrites an existing file") {
  scratch_dir dir;
  const fx::tensor<double> x = {1.0, 2.0, 3.0};
  const std::string path = dir.file("e.npy");
  fx::io::save_npy(path, x);
  fx::io::save_npy(path, x * 2.0 + 1.0);
  CHECK(fx::io::load_npy<double>(path).to_vector() == std::vector<double>{3, 5, 7});
  fx::io::save_npy(path, x > 1.5);
  CHECK(fx::io::load_npy<bool>(path).to_vector() == std::vector<bool>{false, true, true});
}

TEST_CASE("load_npy reads files written by NumPy") {
  SUBCASE("float32 (2, 3)") {
    const auto t = fx::io::load_npy<float>(fixture("float32_2x3"));
    CHECK(t.shape() == fx::shape{2, 3});
    CHECK(t.to_vector() == std::vector<float>{-1.f, -0.5f, 0.f, 0.5f, 1.f, 1.5f});
  }
  SUBCASE("float64 (4,)") {
    const auto t = fx::io::load_npy<double>(fixture("float64_4"));
    CHECK(t.shape() == fx::shape{4});
    CHECK(t.to_vector() == std::vector<double>{0.0, 1.0 / 3, 2.0 / 3, 1.0});
  }
  SUBCASE("int32 (3, 1, 2)") {
    const auto t = fx::io::load_npy<std::int32_t>(fixture("int32_3x1x2"));
    CHECK(t.shape() == fx::shape{3, 1, 2});
    CHECK(t.to_vector() == std::vector<std::int32_t>{-2, -1, 0, 1, 2, 3});
  }
  SUBCASE("int64 (5,), values beyond 32 bits") {
    const auto t = fx::io::load_npy<std::int64_t>(fixture("int64_5"));
    std::vector<std::int64_t> want;
    for (std::int64_t i = 0; i < 5; ++i) want.push_back(i * 1'000'000'007 - 3);
    CHECK(t.to_vector() == want);
  }
  SUBCASE("bool (2, 2)") {
    const auto t = fx::io::load_npy<bool>(fixture("bool_2x2"));
    CHECK(t.shape() == fx::shape{2, 2});
    CHECK(t.to_vector() == std::vector<bool>{true, false, false, true});
  }
  SUBCASE("a scalar, shape ()") {
    const auto t = fx::io::load_npy<double>(fixture("float64_scalar"));
    CHECK(t.rank() == 0);
    CHECK(t.item() == 2.5);
  }
  SUBCASE("an empty array, shape (0, 3)") {
    const auto t = fx::io::load_npy<float>(fixture("float32_empty_0x3"));
    CHECK(t.shape() == fx::shape{0, 3});
    CHECK(t.size() == 0);
  }
  SUBCASE("format version 2.0") {
    CHECK(read_bytes(fixture("float32_v2"))[6] == 2);
    const auto t = fx::io::load_npy<float>(fixture("float32_v2"));
    CHECK(t.shape() == fx::shape{3, 2});
    CHECK(t.to_vector() == std::vector<float>{0, 1, 2, 3, 4, 5});
  }
  SUBCASE("format version 3.0") {
    CHECK(read_bytes(fixture("int64_v3"))[6] == 3);
    const auto t = fx::io::load_npy<std::int64_t>(fixture("int64_v3"));
    CHECK(t.to_vector() == std::vector<std::int64_t>{0, 1, 2, 3});
  }
  SUBCASE("Fortran order is transposed into row-major") {
    const auto t = fx::io::load_npy<double>(fixture("float64_fortran_2x3x4"));
    REQUIRE(t.shape() == fx::shape{2, 3, 4});
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) CHECK(t(i, j, k) == i * 12 + j * 4 + k);
  }
}

TEST_CASE("load_npy: the requested type must match the file's dtype") {
  check_contains(message_of_load<double>(fixture("float32_2x3")),
                 {"load_npy: '", "float32_2x3.npy", "float32 ('<f4')", "float64 was requested", "load_npy<float>"});
  check_contains(message_of_load<std::int32_t>(fixture("int64_5")),
                 {"load_npy", "int64_5.npy", "int64 ('<i8')", "int32 was requested", "load_npy<std::int64_t>"});
  check_contains(message_of_load<float>(fixture("bool_2x2")), {"bool ('|b1')", "float32 was requested"});
  check_contains(message_of_load<float>(fixture("float32_big_endian")),
                 {"float32_big_endian.npy", "big-endian float32 ('>f4')", "big-endian data is not supported"});
  check_contains(message_of_load<std::int32_t>(fixture("uint8_2x2")),
                 {"uint8_2x2.npy", "uint8 ('|u1')", "int32 was requested", "convert the array"});
  check_contains(message_of_load<float>(fixture("float16_3")), {"float16 ('<f2')", "float32 was requested"});
}

TEST_CASE("load_npy: bad files give io_error naming the op, the file and the problem") {
  scratch_dir dir;
  SUBCASE("missing file") {
    check_contains(message_of_load<float>(dir.file("nope.npy")), {"load_npy: '", "nope.npy", "no such file"});
  }
  SUBCASE("a directory") {
    check_contains(message_of_load<float>(dir.path.string()), {"load_npy", "is a directory"});
  }
  SUBCASE("bad magic") {
    write_bytes(dir.file("text.npy"), "hello, this is not numpy data at all");
    check_contains(message_of_load<float>(dir.file("text.npy")),
                   {"load_npy: '", "text.npy", "bad magic", "68 65 6c 6c 6f 2c"});
  }
  SUBCASE("empty file") {
    write_bytes(dir.file("empty.npy"), "");
    check_contains(message_of_load<float>(dir.file("empty.npy")), {"empty.npy", "bad magic", "[]"});
  }
  SUBCASE("unsupported version") {
    std::string bytes = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "\0\0\0\0");
    bytes[6] = 4;
    write_bytes(dir.file("v4.npy"), bytes);
    check_contains(message_of_load<float>(dir.file("v4.npy")), {"v4.npy", "unsupported format version 4.0"});
  }
  SUBCASE("truncated header: inside the header length") {
    write_bytes(dir.file("short.npy"), std::string("\x93NUMPY\x01\x00\x76", 9));
    check_contains(message_of_load<float>(dir.file("short.npy")),
                   {"short.npy", "truncated header", "after 9 bytes", "2-byte header length"});
  }
  SUBCASE("truncated header: the dict is cut short") {
    const std::string whole = npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
    write_bytes(dir.file("cut.npy"), whole.substr(0, 40));
    check_contains(message_of_load<float>(dir.file("cut.npy")),
                   {"cut.npy", "truncated header", "header length says 118 bytes but only 30 follow"});
  }
  SUBCASE("malformed header dicts") {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "must start with '{'"},
        {"{'descr': '<f4', 'fortran_order': False, }", "the key 'shape' is missing"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "'fortran_order' must be True or False"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "non-negative integers"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", "must be a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected key 'extra'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", "'descr' appears twice"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "structured dtypes"},
        {"{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "expected ':' after the key 'descr'"},
        {"{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", "expected ',' or '}'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "unexpected text after the closing"},
    };
    for (const auto& [dict_, problem] : cases) {
      const auto& dict = dict_;  // clang 14 cannot capture a structured binding (CAPTURE)
      CAPTURE(dict);
      write_bytes(dir.file("bad.npy"), npy_v1(dict, std::string(4, '\0')));
      check_contains(message_of_load<float>(dir.file("bad.npy")), {"load_npy: '", "bad.npy", "malformed header", problem});
    }
  }
  SUBCASE("data shorter than the shape needs") {
    write_bytes(dir.file("data.npy"),
                npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", std::string(20, '\0')));
    check_contains(message_of_load<float>(dir.file("data.npy")),
                   {"load_npy: '", "data.npy", "data is truncated", "(2, 3)", "needs 24 bytes",
                    "the file has 20 after its 128-byte header"});
  }
  SUBCASE("too many axes") {
    write_bytes(dir.file("rank9.npy"),
                npy_v1("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", "xxxx"));
    check_contains(message_of_load<float>(dir.file("rank9.npy")), {"rank9.npy", "rank 9", "at most 8 axes"});
  }
}

TEST_CASE("save_npy: an unwritable path gives io_error and leaves nothing behind") {
  scratch_dir dir;
  const std::string path = dir.file("no_such_dir/x.npy");
  try {
    fx::io::save_npy(path, fx::tensor<float>{1.f});
    FAIL("save_npy did not throw");
  } catch (const fx::io_error& e) {
    check_contains(e.what(), {"save_npy: '", "no_such_dir/x.npy", "cannot create the temporary file"});
  }
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator{}) == 0);
}

}  // namespace io_npy_test
