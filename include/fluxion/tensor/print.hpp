// Printing tensors as NumPy prints arrays, with the dtype and shape appended.
//
//   std::cout << fx::tensor<float>{{4.f}};        // tensor([[4.]], dtype=float32, shape=(1, 1))
//   fx::to_string(fx::tensor<int>{1, 2, 3});      // "tensor([1, 2, 3], dtype=int32, shape=(3,))"
//   std::cout << a * b;                           // any expression: materialized, then printed
//
// The text is what NumPy 2's repr gives for the same array under the default print options, with
// "array" renamed "tensor" and "dtype=..., shape=...)" always appended:
// - floats print their shortest round-trip digits, at most 8 after the point (4. for 4.0), padded
//   so the points align; scientific notation takes over when the largest magnitude reaches 1e8
//   (1e6 for float32, whose decimal precision is 6 digits), when the smallest nonzero one is below
//   1e-4, or when the two are more than a factor 1000 apart;
// - integers are right-aligned to a common width; booleans print as True and False;
// - rows wrap at 75 columns, and nested brackets align under the opening one;
// - tensors with more than 1000 elements show only the first and last 3 entries along each longer
//   axis, with "..." between.
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/dtype.hpp"
#include "../core/shape.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/forward.hpp"
#include "tensor.hpp"

namespace fluxion {
namespace detail::printing {

inline constexpr int line_width = 75;
inline constexpr index_t threshold = 1000;  // more elements than this are summarized
inline constexpr index_t edge_items = 3;
inline constexpr int precision = 8;
inline constexpr const char* prefix = "tensor(";

/// Shortest round-trip digits in positional notation, rounded to at most `precision` digits
/// after the point, trailing zeros trimmed but the point kept: "4.", "-0.5", "0.12345679".
template <class T>
std::string positional(T x) {
  char buf[512];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed);
  std::string s(buf, r.ptr);
  const auto dot = s.find('.');
  if (dot != std::string::npos && s.size() - dot - 1 > static_cast<std::size_t>(precision)) {
    r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed, precision);
    s.assign(buf, r.ptr);
    while (s.back() == '0') s.pop_back();
  }
  if (s.find('.') == std::string::npos) s += '.';
  return s;
}

/// The same in scientific notation: "1.e-05", "-2.5e+20".
template <class T>
std::string scientific(T x) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string s(buf, r.ptr);
  auto e = s.find('e');
  const auto dot = s.find('.');
  if (dot != std::string::npos && e - dot - 1 > static_cast<std::size_t>(precision)) {
    r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific, precision);
    s.assign(buf, r.ptr);
    e = s.find('e');
    std::size_t end = e;
    while (s[end - 1] == '0') --end;
    s.erase(end, e - end);
    e = end;
  }
  if (s.find('.') == std::string::npos) s.insert(e, 1, '.');
  return s;
}

/// NumPy's FloatingFormat in its default mode ("maxprec", precision 8, sign '-').
template <class T>
class float_format {
 public:
  explicit float_format(const std::vector<T>& data) {
    std::vector<T> finite;
    bool neg_inf = false;
    for (T x : data) {
      if (std::isfinite(x)) finite.push_back(x);
      else if (std::isinf(x) && x < 0) neg_inf = true;
    }
    T max_abs = 0, min_abs = 0;
    bool any_nonzero = false;
    for (T x : finite) {
      if (x == 0) continue;
      const T a = std::abs(x);
      max_abs = any_nonzero ? std::max(max_abs, a) : a;
      min_abs = any_nonzero ? std::min(min_abs, a) : a;
      any_nonzero = true;
    }
    // np.finfo(float32).precision is 6, float64's 15: the cutoff is 10^min(8, precision).
    const double cutoff = std::is_same_v<T, float> ? 1e6 : 1e8;
    if (any_nonzero)
      m_exp = static_cast<double>(max_abs) >= cutoff || min_abs < T(0.0001) ||
              static_cast<double>(max_abs) / static_cast<double>(min_abs) > 1000.0;

    if (!finite.empty()) {
      if (m_exp) {
        for (T x : finite) {
          const std::string s = scientific(x);
          const auto dot = s.find('.'), e = s.find('e');
          m_pad_left = std::max(m_pad_left, static_cast<int>(dot));
          m_precision = std::max(m_precision, static_cast<int>(e - dot - 1));
          m_exp_size = std::max(m_exp_size, static_cast<int>(s.size() - e - 2));
        }
        m_pad_right = m_exp_size + 2 + m_precision;
      } else {
        for (T x : finite) {
          const std::string s = positional(x);
          const auto dot = s.find('.');
          m_pad_left = std::max(m_pad_left, static_cast<int>(dot));
          m_pad_right = std::max(m_pad_right, static_cast<int>(s.size() - dot - 1));
        }
      }
    }
    if (finite.size() != data.size())  // room for nan, inf and -inf
      m_pad_left = std::max({m_pad_left, 3 - (m_pad_right + 1), 3 + (neg_inf ? 1 : 0) - (m_pad_right + 1)});
  }

  std::string operator()(T x) const {
    if (!std::isfinite(x)) {
      const std::string s = std::isnan(x) ? "nan" : (x < 0 ? "-inf" : "inf");
      const int width = m_pad_left + m_pad_right + 1;
      return std::string(static_cast<std::size_t>(std::max(0, width - static_cast<int>(s.size()))), ' ') + s;
    }
    if (m_exp) {
      // Every value gets the same number of digits, the most any needs; values that need fewer
      // print more of their exact decimal expansion (0.3f is 3.0000001e-01 next to 1.2345678).
      char buf[64];
      std::string s(buf, std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific, m_precision).ptr);
      auto e = s.find('e');
      if (s.find('.') == std::string::npos) s.insert(e++, 1, '.');
      const auto dot = s.find('.');
      std::string out(static_cast<std::size_t>(std::max(0, m_pad_left - static_cast<int>(dot))), ' ');
      out.append(s, 0, e);
      out += 'e';
      out += s[e + 1];
      const std::string digits = s.substr(e + 2);
      out.append(static_cast<std::size_t>(std::max(0, m_exp_size - static_cast<int>(digits.size()))), '0');
      return out + digits;
    }
    const std::string s = positional(x);
    const auto dot = s.find('.');
    std::string out(static_cast<std::size_t>(std::max(0, m_pad_left - static_cast<int>(dot))), ' ');
    out += s;
    out.append(static_cast<std::size_t>(std::max(0, m_pad_right - static_cast<int>(s.size() - dot - 1))), ' ');
    return out;
  }

 private:
  bool m_exp = false;
  int m_pad_left = 0, m_pad_right = 0, m_precision = 0, m_exp_size = 0;
};

/// Integers right-aligned to the width of the longest.
template <class T>
class integer_format {
 public:
  explicit integer_format(const std::vector<T>& data) {
    for (T x : data) m_width = std::max(m_width, std::to_string(x).size());
  }
  std::string operator()(T x) const {
    std::string s = std::to_string(x);
    return std::string(m_width - std::min(m_width, s.size()), ' ') + s;
  }

 private:
  std::size_t m_width = 0;
};

/// " True" and "False", so that elements align; "True" alone in a rank-0 tensor.
class bool_format {
 public:
  bool_format(const std::vector<bool>&, int rank) : m_true(rank == 0 ? "True" : " True") {}
  std::string operator()(bool x) const { return x ? m_true : "False"; }

 private:
  std::string m_true;
};

template <class T>
auto make_format(const std::vector<T>& shown, int rank) {
  if constexpr (std::is_same_v<T, bool>) return bool_format(shown, rank);
  else if constexpr (std::is_floating_point_v<T>) return float_format<T>(shown);
  else return integer_format<T>(shown);
}

/// NumPy's _formatArray: nested brackets, rows wrapped at the line width, "..." for summaries. It
/// takes the shown elements already formatted, in order, so one printer serves every element type.
class array_printer {
 public:
  array_printer(const std::vector<std::string>& words, const shape& s, bool summarize)
      : m_words(words), m_shape(s), m_summarize(summarize) {}

  std::string print(const std::string& hanging_indent, int width) { return recurse(0, hanging_indent, width); }

 private:
  std::string recurse(int axis, const std::string& hanging_indent, int width) {
    const int axes_left = m_shape.rank() - axis;
    if (axes_left == 0) return m_words[m_next++];
    const std::string next_indent = hanging_indent + ' ';
    const int next_width = width - 1;  // room for the closing ']'
    const index_t n = m_shape[axis];
    const bool show_summary = m_summarize && 2 * edge_items < n;
    const index_t leading = show_summary ? edge_items : 0, trailing = show_summary ? edge_items : n;
    auto child = [&] { return recurse(axis + 1, next_indent, next_width); };

    std::string s;
    if (axes_left == 1) {
      const std::size_t elem_width = static_cast<std::size_t>(width - 1);  // room for ',' or ']'
      std::string line = hanging_indent;
      auto extend = [&](const std::string& word) {
        // Wrap when the word does not fit, unless the line holds nothing yet.
        if (line.size() + word.size() > elem_width && line.size() > hanging_indent.size()) {
          while (!line.empty() && line.back() == ' ') line.pop_back();
          s += line + "\n";
          line = hanging_indent;
        }
        line += word;
      };
      for (index_t i = 0; i < leading; ++i) {
        extend(child());
        line += ", ";
      }
      if (show_summary) {
        extend("...");
        line += ", ";
      }
      for (index_t i = trailing; i > 1; --i) {
        extend(child());
        line += ", ";
      }
      extend(child());
      s += line;
    } else {
      const std::string line_sep = "," + std::string(static_cast<std::size_t>(axes_left - 1), '\n');
      for (index_t i = 0; i < leading; ++i) s += hanging_indent + child() + line_sep;
      if (show_summary) s += hanging_indent + "..." + line_sep;
      for (index_t i = trailing; i > 1; --i) s += hanging_indent + child() + line_sep;
      s += hanging_indent + child();
    }
    return "[" + s.substr(hanging_indent.size()) + "]";
  }

  const std::vector<std::string>& m_words;
  const shape& m_shape;
  bool m_summarize;
  std::size_t m_next = 0;
};

/// The offsets of the elements a summary shows (NumPy's _leading_trailing), in printing order; their
/// values alone decide the formatting.
inline void shown_offsets(const shape& s, int axis, index_t offset, bool summarize, std::vector<index_t>& out) {
  if (axis == s.rank()) {
    out.push_back(offset);
    return;
  }
  const index_t n = s[axis], stride = contiguous_strides(s)[static_cast<std::size_t>(axis)];
  for (index_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * edge_items && i == edge_items) i = n - edge_items;
    shown_offsets(s, axis + 1, offset + i * stride, summarize, out);
  }
}

/// "tensor(" + the printed elements + ", dtype=..., shape=...)", wrapped as NumPy wraps it.
inline std::string finish_repr(const std::vector<std::string>& words, const shape& s, bool summarize,
                               const char* dtype) {
  std::string out = prefix;
  if (s.size() == 0) {
    out += "[]";
  } else {
    const std::string indent(std::char_traits<char>::length(prefix) + 1, ' ');  // under "tensor(["
    out += array_printer(words, s, summarize).print(indent, line_width - 1);
  }
  out += ",";
  const std::string tail = std::string("dtype=") + dtype + ", shape=" + to_string(s) + ")";
  const std::size_t last_line = out.size() - (out.rfind('\n') + 1);  // npos + 1 == 0
  if (last_line + tail.size() + 1 > static_cast<std::size_t>(line_width))
    out += "\n" + std::string(std::char_traits<char>::length(prefix), ' ');
  else
    out += " ";
  return out + tail;
}

template <class T>
std::string format_values(const std::vector<T>& values, const shape& s) {
  const bool summarize = s.size() > threshold;
  std::vector<std::string> words;
  if (s.size() != 0) {
    std::vector<index_t> offsets;
    shown_offsets(s, 0, 0, summarize, offsets);
    std::vector<T> shown;
    shown.reserve(offsets.size());
    for (index_t o : offsets) shown.push_back(values[static_cast<std::size_t>(o)]);
    const auto format = make_format(shown, s.rank());
    words.reserve(shown.size());
    for (std::size_t i = 0; i < shown.size(); ++i) words.push_back(format(static_cast<T>(shown[i])));
  }
  return finish_repr(words, s, summarize, dtype_name<T>());
}

}  // namespace detail::printing

/// NumPy's repr of the tensor's values, with its dtype and shape, and its device when that is not
/// the cpu (the values are copied back to print them).
template <class T, class Device>
std::string to_string(const tensor<T, Device>& t) {
  std::string s = t.is_none() ? std::string(detail::printing::prefix) + "none, dtype=" + dtype_name<T>() + ")"
                              : detail::printing::format_values(t.to_vector(), t.shape());
  if constexpr (!std::is_same_v<Device, cpu>) s.insert(s.size() - 1, std::string(", device=") + Device::name);
  return s;
}

/// Materializes the expression, then prints it.
template <expression E>
  requires(!is_tensor_v<std::remove_cvref_t<E>>)
std::string to_string(const E& e) {
  return to_string(eval(e));
}

template <class T, class Device>
std::ostream& operator<<(std::ostream& os, const tensor<T, Device>& t) {
  return os << to_string(t);
}

template <expression E>
  requires(!is_tensor_v<std::remove_cvref_t<E>>)
std::ostream& operator<<(std::ostream& os, const E& e) {
  return os << to_string(eval(e));
}

}  // namespace fluxion
