// Helpers of the fluxion::data tests: scratch files and error-message checks.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fluxion/core/error.hpp>

namespace fx = fluxion;

namespace data_test {

/// A fresh directory under the system's temporary directory, removed at the end of the test.
struct scratch_dir {
  std::filesystem::path path;
  scratch_dir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("fluxion_data_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline void check_contains(const std::string& message, const std::vector<std::string>& parts) {
  for (const auto& p : parts) CHECK_MESSAGE(message.find(p) != std::string::npos, "'" << p << "' not in: " << message);
}

/// The message of the fluxion::io_error that f throws ("(no error)" when it throws none).
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const fx::io_error& e) {
    return e.what();
  }
  return "(no error)";
}

/// Every element of a dataset, in order.
template <class D>
auto collect(const D& ds) {
  std::vector<typename D::element_type> out;
  for (auto& e : ds) out.push_back(e);
  return out;
}

}  // namespace data_test
