// The fluxion error hierarchy. Every message starts with the op's name and gives the shapes or
// values involved, for example "add: shapes (2, 3) and (4,) cannot be broadcast".
//
//   try { fx::gather(fx::tensor<int>{0, 1, 2}, 7); }
//   catch (const fx::out_of_range& e) { std::cerr << e.what(); }
#pragma once

#include <cmath>
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

/// A value that must be finite is NaN or infinite: a loss (fluxion::losses, fit, compiled_step).
/// value() is that value; the message names the op, the value and, where it can, the first
/// non-finite input element.
class numeric_error : public error {
 public:
  numeric_error(const std::string& what, double value) : error(what), m_value(value) {}
  double value() const noexcept { return m_value; }

 private:
  double m_value;
};

namespace detail {
/// Inside a catch block: throws the fluxion error being handled again, as the same type (and value),
/// its message after `where`, which names where it happened ("fit: epoch 1, step 3 (global step 3):
/// "); a message that already starts with where's op ("fit: ") does not repeat it. A numeric_error
/// keeps its value.
[[noreturn]] inline void rethrow_with_context(const std::string& where) {
  const auto text = [&](const std::exception& e) {
    std::string message = e.what();
    const auto colon = where.find(": ");
    if (colon != std::string::npos && message.compare(0, colon + 2, where, 0, colon + 2) == 0)
      message.erase(0, colon + 2);
    return where + message;
  };
  try {
    throw;
  } catch (const numeric_error& e) {
    throw numeric_error(text(e), e.value());
  } catch (const out_of_range& e) {
    throw out_of_range(text(e));
  } catch (const shape_error& e) {
    throw shape_error(text(e));
  } catch (const invalid_argument& e) {
    throw invalid_argument(text(e));
  } catch (const io_error& e) {
    throw io_error(text(e));
  } catch (const error& e) {
    throw error(text(e));
  }
}

/// "nan" (whatever its sign bit), "inf" or "-inf"; a finite value as std::to_string writes it.
inline std::string value_text(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return std::to_string(v);
}
}  // namespace detail

}  // namespace fluxion
