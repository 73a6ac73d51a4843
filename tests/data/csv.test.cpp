// fx::data::csv: header, column selection by name, values, gzip, and every malformed row.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <fluxion/data.hpp>

#include "util.hpp"

using namespace data_test;

TEST_CASE("csv: every column, or the named ones in the asked order") {
  scratch_dir dir;
  const std::string path = dir.file("points.csv");
  write_bytes(path, "x1, \"x2\" ,label\r\n0.5,1.5,1\r\n\r\n-2e3 , +3,0\n7,8.25,2");  // no final newline
  auto all = collect(fx::data::csv(path));
  REQUIRE(all.size() == 3);
  CHECK(all[0].shape() == fx::shape{3});
  CHECK(all[0].to_vector() == std::vector<float>{0.5f, 1.5f, 1});
  CHECK(all[1].to_vector() == std::vector<float>{-2000, 3, 0});
  CHECK(all[2].to_vector() == std::vector<float>{7, 8.25f, 2});
  auto picked = collect(fx::data::csv(path, {"label", "x1"}));
  REQUIRE(picked.size() == 3);
  CHECK(picked[1].to_vector() == std::vector<float>{0, -2000});
  // Features and labels, batched.
  auto pairs = collect(fx::data::csv(path, {"x1", "x2"}).zip(fx::data::csv(path, {"label"})).batch(3));
  REQUIRE(pairs.size() == 1);
  CHECK(std::get<0>(pairs[0]).shape() == fx::shape{3, 2});
  CHECK(std::get<1>(pairs[0]).to_vector() == std::vector<float>{1, 0, 2});
}

TEST_CASE("csv: errors name the file, the line and the column") {
  scratch_dir dir;
  const std::string path = dir.file("bad.csv");
  write_bytes(path, "a,b,c\n1,2,3\n4,5\n");
  check_contains(io_error_of([&] { collect(fx::data::csv(path)); }),
                 {"csv: '" + path + "'", "line 3 has 2 fields, the header has 3 columns"});
  write_bytes(path, "a,b,c\n1,2,3\n4,5,6\n7,oops,9\n");
  check_contains(io_error_of([&] { collect(fx::data::csv(path)); }),
                 {path, "line 4, column 2 ('b'): expected a number, got 'oops'"});
  write_bytes(path, "a,b,c\n1,,3\n");
  check_contains(io_error_of([&] { collect(fx::data::csv(path)); }), {"line 2, column 2 ('b')", "got ''"});
  write_bytes(path, "a,b,c\n1,2x,3\n");
  check_contains(io_error_of([&] { collect(fx::data::csv(path, {"b"})); }), {"got '2x'"});
  write_bytes(path, "a,b,c\n1,2,3\n");
  check_contains(io_error_of([&] { fx::data::csv(path, {"a", "z"}); }),
                 {"no column named 'z'", "the columns are 'a', 'b', 'c'"});
  write_bytes(path, "");
  check_contains(io_error_of([&] { fx::data::csv(path); }), {"the file is empty; expected a header row"});
  check_contains(io_error_of([&] { fx::data::csv(dir.file("none.csv")); }), {"none.csv", "no such file"});
}
