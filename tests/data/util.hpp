// Helpers of the fluxion::data tests: scratch files and error-message checks.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fluxion/core/error.hpp>
#include "../scratch_dir.hpp"

namespace fx = fluxion;

namespace data_test {


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
