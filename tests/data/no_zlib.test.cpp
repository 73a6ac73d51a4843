// fluxion::data built without zlib (FLUXION_HAS_ZLIB undefined in this whole program: the test is
// one translation unit besides doctest's main): the headers compile, plain files read, and a gzip
// file throws naming the CMake target and the macro.
#undef FLUXION_HAS_ZLIB
#include <doctest/doctest.h>

#include <string>

#include <fluxion/data.hpp>

#include "util.hpp"

using namespace data_test;

TEST_CASE("without zlib: plain IDX files read, gzip files throw saying what to link") {
  CHECK(!fx::data::has_zlib);
  scratch_dir dir;
  write_bytes(dir.file("labels"), std::string("\0\0\x08\x01\0\0\0\x02\x05\x06", 10));
  auto labels = collect(fx::data::idx_labels(dir.file("labels")));
  REQUIRE(labels.size() == 2);
  CHECK(labels[1].data()[0] == 6);
  // Gzip is recognized by its magic bytes, whatever the name.
  write_bytes(dir.file("labels.idx"), std::string("\x1f\x8b\x08\x00\0\0\0\0\0\x03", 10));
  check_contains(io_error_of([&] { fx::data::idx_labels(dir.file("labels.idx")); }),
                 {"idx_labels: '" + dir.file("labels.idx") + "'", "gzip-compressed", "without zlib",
                  "fluxion::zlib", "FLUXION_HAS_ZLIB"});
}
