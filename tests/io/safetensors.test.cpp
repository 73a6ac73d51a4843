// fx::io::safetensors: round trips of every dtype, the byte layout, every kind of corrupted or
// truncated file refused with its message, JSON escapes, atomic saves, and files read and written
// by Python's safetensors package (tests/io/safetensors_interop.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fluxion/io/safetensors.hpp>
#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>

#include "../test_util.hpp"
#include "../scratch_dir.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace io_safetensors_test {

namespace {

namespace io = fluxion::io;


void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A file from a header text (not padded) and data bytes.
std::string file_of(const std::string& header, const std::string& data) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((static_cast<std::uint64_t>(header.size()) >> (8 * i)) & 0xff);
  return bytes + header + data;
}

template <class T>
bool same_bytes(const fx::tensor<T>& a, const fx::tensor<T>& b) {
  if (a.shape() != b.shape()) return false;
  if constexpr (std::is_same_v<T, bool>) return a.to_vector() == b.to_vector();
  else return a.size() == 0 || std::memcmp(a.data(), b.data(), static_cast<std::size_t>(a.size()) * sizeof(T)) == 0;
}

/// load() of these bytes throws io_error starting "safetensors::load: '<path>': " and containing `what`.
void expect_refused(const std::string& bytes, const std::string& what) {
  scratch_dir dir;
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, bytes);
  std::string message = "(no exception)";
  try {
    io::safetensors::load(path);
  } catch (const fx::io_error& e) {
    message = e.what();
  }
  INFO("message: " << message);
  CHECK(message.rfind("safetensors::load: '" + path + "': ", 0) == 0);
  CHECK(message.find(what) != std::string::npos);
}

/// A valid two-tensor file: "a" F32 (2,) and "b" I64 (1,), 16 bytes of data.
std::string valid_file() {
  io::safetensors s;
  s.add("a", fx::from_vector(std::vector<float>{1.f, 2.f}, {2}));
  s.add("b", fx::from_vector(std::vector<std::int64_t>{7}, {1}));
  return s.serialize();
}

}  // namespace

TEST_CASE_TEMPLATE("safetensors: every dtype round-trips bit-exactly at ranks 0 to 4", T, float, double, std::int32_t,
                   std::int64_t, bool) {
  scratch_dir dir;
  const std::vector<fx::shape> shapes{{}, {5}, {0}, {3, 4}, {2, 0, 3}, {2, 3, 1, 2}};
  io::safetensors s;
  std::vector<fx::tensor<T>> originals;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    originals.push_back(test::random_tensor<T>(shapes[i], static_cast<unsigned>(i) + 1, -1e6, 1e6));
    s.add("t" + std::to_string(i), originals.back());
  }
  if constexpr (std::is_floating_point_v<T>) {
    fx::tensor<T> special(fx::shape{4});
    special.mutable_data()[0] = std::numeric_limits<T>::infinity();
    special.mutable_data()[1] = -T(0);
    special.mutable_data()[2] = std::numeric_limits<T>::denorm_min();
    special.mutable_data()[3] = std::numeric_limits<T>::quiet_NaN();
    originals.push_back(special);
    s.add("special", special);
  }
  s.set_metadata("kind", fx::dtype_name<T>());
  const std::string path = dir.file("x.safetensors");
  s.save(path);
  const auto loaded = io::safetensors::load(path);
  CHECK(loaded.size() == originals.size());
  CHECK(loaded.source() == path);
  REQUIRE(loaded.find_metadata("kind") != nullptr);
  CHECK(*loaded.find_metadata("kind") == fx::dtype_name<T>());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto t = loaded.get<T>("t" + std::to_string(i));
    CHECK(t.shape() == shapes[i]);
    CHECK(same_bytes(t, originals[i]));
  }
  if constexpr (std::is_floating_point_v<T>) CHECK(same_bytes(loaded.get<T>("special"), originals.back()));
}

TEST_CASE("safetensors: the layout is the format's: length, padded JSON, aligned data in order") {
  io::safetensors s;
  s.add("flag", fx::from_vector(std::vector<bool>{true, false, true}, {3}));
  s.add("w", fx::from_vector(std::vector<float>{1.f, -2.f}, {2}));
  s.add("n", fx::from_vector(std::vector<std::int64_t>{-5}, {1}));
  const std::string bytes = s.serialize();
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  CHECK(n % 8 == 0);
  REQUIRE(bytes.size() == 8 + n + 8 + 8 + 3);
  const std::string header = bytes.substr(8, n);
  CHECK(header.front() == '{');
  // Largest elements first, so each tensor starts at a multiple of its element size.
  CHECK(header.find("\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]}") != std::string::npos);
  CHECK(header.find("\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}") != std::string::npos);
  CHECK(header.find("\"flag\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[16,19]}") != std::string::npos);
  const std::string data = bytes.substr(8 + n);
  std::int64_t first = 0;
  std::memcpy(&first, data.data(), 8);
  CHECK(first == -5);
  CHECK(data.substr(16) == std::string("\x01\x00\x01", 3));
  // Insertion order is kept for names().
  CHECK(io::safetensors::parse(bytes, "mem").names() == std::vector<std::string>{"n", "w", "flag"});
}

TEST_CASE("safetensors: names and metadata with escapes and UTF-8 survive; \\u escapes are decoded") {
  io::safetensors s;
  const std::string odd = "quote\" back\\slash\nnew\ttab \x01 caf\xc3\xa9";
  s.add(odd, fx::tensor<float>(3.f));
  s.set_metadata(odd, odd);
  const auto back = io::safetensors::parse(s.serialize(), "mem");
  CHECK(back.contains(odd));
  CHECK(back.get<float>(odd).to_vector() == std::vector<float>{3.f});
  CHECK(back.metadata().at(odd) == odd);

  const auto decoded = io::safetensors::parse(
      file_of(R"({"caf\u00e9 \ud83d\ude00 \/":{"dtype":"I32","shape":[],"data_offsets":[0,4]}})", std::string(4, '\0')),
      "mem");
  CHECK(decoded.names() == std::vector<std::string>{"caf\xc3\xa9 \xf0\x9f\x98\x80 /"});
}

TEST_CASE("safetensors: get and add check their arguments") {
  const auto s = io::safetensors::parse(valid_file(), "f.safetensors");
  CHECK_THROWS_WITH_AS(s.get<double>("a"), "safetensors::get: 'f.safetensors': tensor 'a' holds F32, not F64 (float64)",
                       fx::io_error);
  CHECK_THROWS_WITH_AS(s.get<float>("zz"), "safetensors::get: 'f.safetensors': no tensor named 'zz'", fx::io_error);
  io::safetensors w;
  w.add("x", fx::tensor<float>(1.f));
  CHECK_THROWS_WITH_AS(w.add("x", fx::tensor<float>(2.f)), "safetensors::add: a tensor named 'x' was already added",
                       fx::invalid_argument);
  CHECK_THROWS_AS(w.add("__metadata__", fx::tensor<float>(2.f)), fx::invalid_argument);
  CHECK(w.get<float>("x").to_vector() == std::vector<float>{1.f});
}

TEST_CASE("safetensors: a truncated file is refused wherever it is cut") {
  const std::string good = valid_file();
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(good[static_cast<std::size_t>(i)]);
  const std::size_t header_end = 8 + static_cast<std::size_t>(n);
  for (std::size_t cut : {std::size_t{0}, std::size_t{3}, std::size_t{7}}) {
    CAPTURE(cut);
    expect_refused(good.substr(0, cut), "fewer than the 8-byte header length");
  }
  for (std::size_t cut : {std::size_t{8}, std::size_t{9}, header_end / 2, header_end - 1}) {
    CAPTURE(cut);
    expect_refused(good.substr(0, cut), "the header length says " + std::to_string(n) + " bytes but only");
  }
  for (std::size_t cut : {header_end, header_end + 1, header_end + 8, good.size() - 1}) {
    CAPTURE(cut);
    expect_refused(good.substr(0, cut), "reach past the end of the data");
  }
  // Every other cut is refused too, whatever the message.
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    CAPTURE(cut);
    CHECK_THROWS_AS(io::safetensors::parse(good.substr(0, cut), "mem"), fx::io_error);
  }
  CHECK_NOTHROW(io::safetensors::parse(good, "mem"));
}

TEST_CASE("safetensors: a corrupted header length is refused") {
  const std::string good = valid_file();
  std::string huge = good;
  for (int i = 0; i < 8; ++i) huge[static_cast<std::size_t>(i)] = '\xff';
  expect_refused(huge, "the header length says 18446744073709551615 bytes");
  std::string longer = good, shorter = good;
  longer[0] = static_cast<char>(longer[0] + 8);  // the header swallows the first 8 data bytes
  expect_refused(longer, "malformed JSON header: unexpected text after the JSON value");
  shorter[0] = static_cast<char>(shorter[0] - 9);
  expect_refused(shorter, "malformed JSON header");
  std::string zero = good;
  for (int i = 0; i < 8; ++i) zero[static_cast<std::size_t>(i)] = '\0';
  expect_refused(zero, "the header length is 0");
}

TEST_CASE("safetensors: malformed JSON is refused with where it went wrong") {
  const std::string d(4, '\0');
  expect_refused(file_of("[1, 2]", ""), "the header must start with '{'");
  expect_refused(file_of(R"({"a":})", d), "malformed JSON header: unexpected character '}' (at byte 5 of the 6-byte header)");
  expect_refused(file_of(R"({"a" {})", d), "expected ':' after a key");
  expect_refused(file_of(R"({"a":{"dtype":"F32)", d), "a string is not closed");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},})", d), "expected a quoted key");
  expect_refused(file_of(R"({"a":{"dtype":"F32" "shape":[]}})", d), "expected ',' or '}' in an object");
  expect_refused(file_of(R"({"a":{"shape":[1,]}})", d), "unexpected character ']'");
  expect_refused(file_of(R"({"a":{"shape":[01]}})", d), "expected ',' or ']' in an array");
  expect_refused(file_of(R"({"a":{"dtype":"F\q"}})", d), "unknown escape '\\q'");
  expect_refused(file_of(R"({"a":{"dtype":"\ud800"}})", d), "a high surrogate without its low surrogate");
  expect_refused(file_of("{\"a\":{\"dtype\":\"F\x01\"}}", d), "a control character inside a string");
  expect_refused(file_of(R"({"a":1,"a":2})", d), "the key \"a\" appears twice in one object");
  expect_refused(file_of(std::string(100, '[').insert(0, "{\"a\":"), d), "nesting deeper than 64 levels");
  expect_refused(file_of(R"({"a":tru})", d), "unexpected character 't'");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]}} x)", d),
                 "unexpected text after the JSON value");
}

TEST_CASE("safetensors: tensor descriptions are validated") {
  const std::string d8(8, '\0');
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4],"extra":1}})", d8),
                 "tensor 'a' has an unexpected key \"extra\"");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2]}})", d8), "tensor 'a' has no \"data_offsets\"");
  expect_refused(file_of(R"({"a":[1]})", d8), "tensor 'a' must be described by an object, not an array");
  expect_refused(file_of(R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]}})", d8),
                 "tensor 'a' has dtype F16, which fluxion does not hold");
  expect_refused(file_of(R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,8]}})", d8),
                 "tensor 'a' has an unknown dtype \"Q7\"");
  expect_refused(file_of(R"({"a":{"dtype":5,"shape":[2],"data_offsets":[0,8]}})", d8),
                 "\"dtype\" must be a string, not a number");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8),
                 "tensor 'a': shape[0] must be a non-negative integer, not -2");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", d8),
                 "shape[0] must be a non-negative integer, not 2.0");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,8]}})", d8),
                 "is too large");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"data_offsets":[0,4]}})", d8),
                 "tensor 'a' has rank 17; fluxion tensors have at most");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", d8),
                 "the shape describes more than 2^56 elements");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", d8),
                 "\"data_offsets\" must be an array of two integers");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", d8), "end before they begin");
  expect_refused(file_of(R"({"__metadata__":{"k":1}})", ""), "the metadata value of \"k\" must be a string, not a number");
  expect_refused(file_of(R"({"__metadata__":[]})", ""), "\"__metadata__\" must be an object of strings, not an array");
}

TEST_CASE("safetensors: offsets must match the dtype and shape and tile the data exactly") {
  // Wrong dtype size: three F32 need 12 bytes, the offsets give 8 (as if the dtype were 2 bytes wide).
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 "tensor 'a': data_offsets [0, 8] span 8 bytes, but shape (3,) of F32 needs 12");
  expect_refused(file_of(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", std::string(8, '\0')),
                 "but shape (2,) of F64 needs 16");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         std::string(12, '\0')),
                 "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                         std::string(8, '\0')),
                 "overlap");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                         std::string(12, '\0')),
                 "bytes [4, 8) of the data belong to no tensor (a hole before 'b')");
  expect_refused(file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, '\0')),
                 "the tensors cover 4 bytes of data but the file has 6 after its header (trailing bytes)");
  // Out of order in the header is fine as long as the ranges tile the data.
  const auto s = io::safetensors::parse(file_of(R"({"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},)"
                                                R"("a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})",
                                                std::string("\x01\0\0\0\x02\0\0\0", 8)),
                                        "mem");
  CHECK(s.get<std::int32_t>("a").to_vector() == std::vector<std::int32_t>{1});
  CHECK(s.get<std::int32_t>("b").to_vector() == std::vector<std::int32_t>{2});
  CHECK(io::safetensors::parse(file_of("{}", ""), "mem").size() == 0);
}

TEST_CASE("safetensors: missing files and directories are named") {
  scratch_dir dir;
  CHECK_THROWS_WITH_AS(io::safetensors::load(dir.file("none")),
                       ("safetensors::load: '" + dir.file("none") + "': no such file").c_str(), fx::io_error);
  CHECK_THROWS_WITH_AS(io::safetensors::load(dir.path.string()),
                       ("safetensors::load: '" + dir.path.string() + "': is a directory, not a safetensors file").c_str(),
                       fx::io_error);
}

TEST_CASE("safetensors: save replaces the file atomically and leaves no temporary behind") {
  scratch_dir dir;
  const std::string path = dir.file("w.safetensors");
  io::safetensors a, b;
  a.add("x", fx::tensor<float>(1.f));
  b.add("x", fx::tensor<float>(2.f));
  a.save(path);
  b.save(path);
  CHECK(io::safetensors::load(path).get<float>("x").to_vector() == std::vector<float>{2.f});
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path)) {
    ++files;
    CHECK(e.path().filename() == "w.safetensors");
  }
  CHECK(files == 1);
  const std::string missing = dir.file("no/such/dir/w.safetensors");
  std::string message = "(no exception)";
  try {
    a.save(missing);
  } catch (const fx::io_error& e) {
    message = e.what();
  }
  CHECK(message.rfind("safetensors::save: '" + missing + "': cannot create the temporary file", 0) == 0);
}

namespace {

/// The tensors tests/io/safetensors_interop.py expects, computed here from the same formulas.
io::safetensors interop_tensors() {
  io::safetensors s;
  fx::tensor<float> kernel(fx::shape{2, 3});
  for (int i = 0; i < 6; ++i) kernel.mutable_data()[i] = static_cast<float>((i - 2.5) / 4);
  fx::tensor<double> f64(fx::shape{4});
  for (int i = 0; i < 4; ++i) f64.mutable_data()[i] = i * 0.1;
  fx::tensor<std::int32_t> i32(fx::shape{3, 2});
  for (int i = 0; i < 6; ++i) i32.mutable_data()[i] = i * i - 7;
  fx::tensor<std::int64_t> i64(fx::shape{2});
  for (int i = 0; i < 2; ++i) i64.mutable_data()[i] = i * 1000000000000LL - 3;
  fx::tensor<bool> mask(fx::shape{5});
  for (int i = 0; i < 5; ++i) mask.mutable_data()[i] = i % 3 == 0;
  s.add("dense/kernel", kernel);
  s.add("f64", f64);
  s.add("i32", i32);
  s.add("i64", i64);
  s.add("mask", mask);
  s.add("scalar", fx::tensor<float>(1.5f));
  s.add("empty", fx::tensor<float>(fx::shape{0, 3}));
  s.set_metadata("note", "h\xc3\xa9llo \"quoted\" \\ back");
  s.set_metadata("step", "42");
  return s;
}

/// The first Python with both numpy and safetensors, or empty.
std::string python_with_safetensors() {
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    const std::string probe = std::string(candidate) + " -c \"import numpy, safetensors\" > /dev/null 2>&1";
    if (std::system(probe.c_str()) == 0) return candidate;
  }
  return {};
}

}  // namespace

TEST_CASE("safetensors: Python's safetensors package reads fluxion's files, and fluxion reads its files") {
  const std::string python = python_with_safetensors();
  if (python.empty()) {
    MESSAGE("skipped: no Python with numpy and safetensors (python3 -m pip install safetensors numpy)");
    return;
  }
  scratch_dir dir;
  const std::string script = std::string(FLUXION_TEST_FIXTURES_DIR) + "/../io/safetensors_interop.py";
  const io::safetensors expected = interop_tensors();

  const std::string ours = dir.file("fluxion.safetensors");
  expected.save(ours);
  const std::string read_command =
      python + " \"" + script + "\" read \"" + ours + "\" > \"" + dir.file("out") + "\" 2>&1";
  const int read_status = std::system(read_command.c_str());
  INFO("python read: " << read_bytes(dir.file("out")));
  CHECK(read_status == 0);

  const std::string theirs = dir.file("python.safetensors");
  const std::string write_command =
      python + " \"" + script + "\" write \"" + theirs + "\" > \"" + dir.file("out") + "\" 2>&1";
  const int write_status = std::system(write_command.c_str());
  INFO("python write: " << read_bytes(dir.file("out")));
  REQUIRE(write_status == 0);
  const auto loaded = io::safetensors::load(theirs);
  auto names = loaded.names();
  std::sort(names.begin(), names.end());
  auto want = expected.names();
  std::sort(want.begin(), want.end());
  CHECK(names == want);
  CHECK(same_bytes(loaded.get<float>("dense/kernel"), expected.get<float>("dense/kernel")));
  CHECK(same_bytes(loaded.get<double>("f64"), expected.get<double>("f64")));
  CHECK(same_bytes(loaded.get<std::int32_t>("i32"), expected.get<std::int32_t>("i32")));
  CHECK(same_bytes(loaded.get<std::int64_t>("i64"), expected.get<std::int64_t>("i64")));
  CHECK(same_bytes(loaded.get<bool>("mask"), expected.get<bool>("mask")));
  CHECK(same_bytes(loaded.get<float>("scalar"), expected.get<float>("scalar")));
  CHECK(loaded.get<float>("empty").shape() == fx::shape{0, 3});
  CHECK(loaded.metadata() == expected.metadata());
}

}  // namespace io_safetensors_test
