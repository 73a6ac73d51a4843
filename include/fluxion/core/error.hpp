// The fluxion error hierarchy. Every message starts with the op's name and gives the shapes or
// values involved, for example "add: shapes (2, 3) and (4,) cannot be broadcast".
//
//   try { fx::gather(fx::tensor<int>{0, 1, 2}, 7); }
//   catch (const fx::out_of_range& e) { std::cerr << e.what(); }
#pragma once

#include <stdexcept>
#include <string>

namespace fluxion {

/// Base of every exception fluxion throws.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An argument has a wrong value (a bad axis, a negative size, a bad option).
class invalid_argument : public error {
 public:
  using error::error;
};

/// An index or position lies outside the valid range.
class out_of_range : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// Shapes disagree: broadcasting, matmul inner dimensions, reshape sizes.
class shape_error : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// A file cannot be opened, read or written, or its contents are not what the reader expects
/// (fluxion::io: a bad magic number, a malformed header, too few bytes, another element type).
class io_error : public error {
 public:
  using error::error;
};

}  // namespace fluxion
