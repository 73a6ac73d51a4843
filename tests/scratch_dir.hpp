// A fresh directory under the system's temporary directory, removed at the end of the test: for the
// tests of fluxion's file readers and writers (io/, data/, fit).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("fluxion_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};
