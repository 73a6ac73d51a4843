// fx::io::detail's POSIX file operations (io/file.hpp), against std::filesystem as the reference:
// path splitting, mkdir -p, listing, removal, a file's kind and size, and the atomic write, including
// how each fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <fluxion/io/file.hpp>
#include "../scratch_dir.hpp"
#include "../test_util.hpp"

namespace fs = std::filesystem;
namespace io = fluxion::io::detail;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("io file: paths split and join as std::filesystem::path does") {
  for (const std::string p : {"a/b", "b", "/b", "/", "a/b/c.npy", "a//b", "./x", "../x/y", "/tmp/x/y.safetensors"}) {
    CAPTURE(p);
    CHECK(io::parent_directory(p) == fs::path(p).parent_path().string());
    CHECK(io::file_name_part(p) == fs::path(p).filename().string());
  }
  for (const auto& [dir_, name] : std::vector<std::pair<std::string, std::string>>{
           {"a", "b"}, {"a/", "b"}, {"/", "b"}, {"a/b", "c.npy"}, {"", "b"}}) {
    const auto& dir = dir_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(dir);
    CHECK(io::join_path(dir, name) == (fs::path(dir) / name).string());
  }
}

TEST_CASE("io file: make_directories creates every missing level, and names what is in the way") {
  scratch_dir dir;
  const std::string deep = dir.file("a/b/c");
  CHECK(io::make_directories(deep) == 0);
  CHECK(fs::is_directory(deep));
  CHECK(io::make_directories(deep) == 0);        // already there
  CHECK(io::make_directories(deep + "/") == 0);  // a trailing '/'
  CHECK(io::make_directories("") == 0);
  std::ofstream(dir.file("a_file")) << "x";
  CHECK(io::make_directories(dir.file("a_file")) == ENOTDIR);
  CHECK(io::make_directories(dir.file("a_file/sub")) == ENOTDIR);
  CHECK(fs::is_regular_file(dir.file("a_file")));  // untouched
}

TEST_CASE("io file: stat_path, list_directory and remove_file agree with std::filesystem") {
  scratch_dir dir;
  std::ofstream(dir.file("f.bin"), std::ios::binary) << std::string(1234, 'z');
  fs::create_directory(dir.file("sub"));
  fs::create_symlink(dir.file("missing"), dir.file("dangling"));

  const auto f = io::stat_path(dir.file("f.bin"));
  CHECK(f.kind == io::file_kind::regular);
  CHECK(f.size == fs::file_size(dir.file("f.bin")));
  CHECK(io::stat_path(dir.file("sub")).kind == io::file_kind::directory);
  CHECK(io::stat_path(dir.file("nothing")).kind == io::file_kind::missing);
  CHECK(io::stat_path(dir.file("f.bin/below")).kind == io::file_kind::missing);  // ENOTDIR: missing, no error
  CHECK(io::stat_path(dir.file("f.bin/below")).error == 0);
  CHECK(io::stat_path(dir.file("dangling")).kind == io::file_kind::missing);  // followed
  CHECK(io::stat_path(dir.file("dangling"), /*follow_links=*/false).kind == io::file_kind::other);

  std::vector<std::string> names;
  CHECK(io::list_directory(dir.path.string(), names) == 0);
  std::sort(names.begin(), names.end());
  CHECK(names == names_in(dir.path));
  std::vector<std::string> none;
  CHECK(io::list_directory(dir.file("nothing"), none) == ENOENT);
  CHECK(none.empty());
  CHECK(io::list_directory(dir.file("f.bin"), none) == ENOTDIR);

  CHECK(io::remove_file(dir.file("f.bin")) == 0);
  CHECK_FALSE(fs::exists(dir.file("f.bin")));
  CHECK(io::remove_file(dir.file("f.bin")) == 0);  // already gone
  CHECK(io::remove_file(dir.file("sub")) != 0);    // a directory is not removed
  CHECK(fs::is_directory(dir.file("sub")));
}

TEST_CASE("io file: readable_file_size names a missing file and a directory") {
  scratch_dir dir;
  std::ofstream(dir.file("f.bin"), std::ios::binary) << std::string(10, 'z');
  CHECK(io::readable_file_size("op", dir.file("f.bin"), "a thing") == 10);
  test::check_throws_with<fluxion::io_error>([&] { io::readable_file_size("op", dir.file("no"), "a thing"); },
                                             "op: '" + dir.file("no") + "': no such file");
  test::check_throws_with<fluxion::io_error>([&] { io::readable_file_size("op", dir.path.string(), "a thing"); },
                                             "op: '" + dir.path.string() + "': is a directory, not a thing");
}

TEST_CASE("io file: atomic_write replaces a file whole and leaves no temporary file, also when it fails") {
  scratch_dir dir;
  const std::string path = dir.file("out.bin");
  io::atomic_write("op", path, {"abc", "", std::string_view("de\0f", 4)});
  CHECK(read_all(path) == std::string("abcde\0f", 7));
  io::atomic_write("op", path, {"new"});
  CHECK(read_all(path) == "new");
  CHECK(names_in(dir.path) == std::vector<std::string>{"out.bin"});

  // A relative path: the temporary file goes to the working directory, next to the target.
  const fs::path before = fs::current_path();
  fs::current_path(dir.path);
  io::atomic_write("op", "relative.bin", {"r"});
  fs::current_path(before);
  CHECK(read_all(dir.file("relative.bin")) == "r");

  test::check_throws_with<fluxion::io_error>(
      [&] { io::atomic_write("save_thing", dir.file("no_dir/x.bin"), {"x"}); },
      "save_thing: '" + dir.file("no_dir/x.bin") + "': cannot create the temporary file '" +
          dir.file("no_dir/.x.bin.tmp-"));
  // Renaming over a directory fails after the temporary file was written: it is removed again.
  fs::create_directories(dir.file("a_dir/inside"));
  test::check_throws_with<fluxion::io_error>([&] { io::atomic_write("op", dir.file("a_dir"), {"x"}); },
                                             "op: '" + dir.file("a_dir") +
                                                 "': cannot rename the temporary file '");
  CHECK(names_in(dir.path) == std::vector<std::string>{"a_dir", "out.bin", "relative.bin"});
  CHECK(read_all(path) == "new");
}
