// fx::shape: the extents of a tensor, rank 0 to fx::max_rank, stored inline (no allocation).
//
//   fx::shape s{2, 3};        // s.rank() == 2, s.size() == 6, to_string(s) == "(2, 3)"
//   auto b = fx::broadcast_shapes(s, fx::shape{3}, "add");   // (2, 3)
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>

#include "config.hpp"
#include "error.hpp"
#include "prebuilt.hpp"

namespace fluxion {

class shape;
std::string to_string(const shape& s);

class shape {
 public:
  /// The most elements a shape may describe: 2^56, so that byte counts of any element type fit.
  static constexpr index_t max_elements = index_t{1} << 56;

  constexpr shape() = default;
  shape(std::initializer_list<index_t> dims) { assign(dims.begin(), dims.end()); }
  explicit shape(const std::vector<index_t>& dims) { assign(dims.begin(), dims.end()); }
  template <class It>
  shape(It first, It last) {
    assign(first, last);
  }

  constexpr int rank() const noexcept { return m_rank; }
  constexpr index_t operator[](int i) const noexcept { return m_dims[static_cast<std::size_t>(i)]; }
  constexpr index_t& operator[](int i) noexcept { return m_dims[static_cast<std::size_t>(i)]; }
  constexpr const index_t* begin() const noexcept { return m_dims.data(); }
  constexpr const index_t* end() const noexcept { return m_dims.data() + m_rank; }
  constexpr const index_t* data() const noexcept { return m_dims.data(); }

  /// Number of elements: the product of the extents (1 for rank 0).
  constexpr index_t size() const noexcept {
    index_t n = 1;
    for (int i = 0; i < m_rank; ++i) n *= m_dims[static_cast<std::size_t>(i)];
    return n;
  }

  void push_back(index_t d);

  std::vector<index_t> to_vector() const { return {begin(), end()}; }

  /// Becomes (0,), the shape of an empty tensor.
  constexpr void make_empty() noexcept {
    m_rank = 1;
    m_dims[0] = 0;
  }

  friend constexpr bool operator==(const shape& a, const shape& b) noexcept {
    if (a.m_rank != b.m_rank) return false;
    bool same = true;
    for (int i = 0; i < a.m_rank; ++i) same &= a[i] == b[i];
    return same;
  }

 private:
  template <class It>
  void assign(It first, It last) {
    m_rank = 0;
    for (; first != last; ++first) push_back(static_cast<index_t>(*first));
  }
  void check_extent(index_t d) const;

  std::array<index_t, max_rank> m_dims{};
  int m_rank = 0;
};

#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE void shape::push_back(index_t d) {
  if (m_rank == max_rank)
    throw invalid_argument("shape: cannot add an axis of extent " + std::to_string(d) + " to shape " +
                           to_string(*this) + ": the rank would exceed the maximum of " + std::to_string(max_rank));
  check_extent(d);
  // Every size computed from a shape (elements, bytes, flat offsets) stays far from overflow.
  index_t product = 1;
  for (int i = 0; i < m_rank; ++i)
    if (m_dims[static_cast<std::size_t>(i)] > 0) product *= m_dims[static_cast<std::size_t>(i)];
  if (d > 0 && product > max_elements / d)
    throw invalid_argument("shape: adding an axis of extent " + std::to_string(d) + " to shape " + to_string(*this) +
                           " would give more than 2^56 elements");
  m_dims[static_cast<std::size_t>(m_rank++)] = d;
}

FLUXION_CORE_INLINE void shape::check_extent(index_t d) const {
  if (d < 0)
    throw invalid_argument("shape: extent " + std::to_string(d) + " is negative (after the axes " + to_string(*this) +
                           ")");
}
#endif  // FLUXION_CORE_DEFINITIONS

/// "(2, 3)", "(3,)" or "()" as NumPy writes shapes.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE std::string to_string(const shape& s) {
  std::string r = "(";
  for (int i = 0; i < s.rank(); ++i) {
    if (i) r += ", ";
    r += std::to_string(s[i]);
  }
  if (s.rank() == 1) r += ",";
  return r + ")";
}
#endif  // to_string is declared above shape

inline std::ostream& operator<<(std::ostream& os, const shape& s) { return os << to_string(s); }

/// Row-major strides, in elements.
inline std::array<index_t, max_rank> contiguous_strides(const shape& s) {
  std::array<index_t, max_rank> st{};
  index_t acc = 1;
  for (int i = s.rank() - 1; i >= 0; --i) {
    st[static_cast<std::size_t>(i)] = acc;
    acc *= s[i];
  }
  return st;
}

/// NumPy broadcasting of two shapes, or nothing when they do not broadcast.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE std::optional<shape> try_broadcast_shapes(const shape& a, const shape& b) {
  if (a == b) return a;
  const int r = std::max(a.rank(), b.rank());
  std::array<index_t, max_rank> out{};
  for (int i = 0; i < r; ++i) {
    const int ia = a.rank() - r + i, ib = b.rank() - r + i;
    const index_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[static_cast<std::size_t>(i)] = da == 1 ? db : da;
  }
  return shape(out.begin(), out.begin() + r);
}
#else
std::optional<shape> try_broadcast_shapes(const shape& a, const shape& b);
#endif

/// NumPy broadcasting of two shapes; `op` names the operation in the error message.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE shape broadcast_shapes(const shape& a, const shape& b, const char* op) {
  if (a == b) return a;  // the common case, without the optional's copy
  if (auto s = try_broadcast_shapes(a, b)) return *s;
  std::string message = std::string(op) + ": shapes " + to_string(a) + " and " + to_string(b) + " cannot be broadcast";
  const auto empty = [](const shape& s) { return s.rank() == 1 && s[0] == 0; };
  if (empty(a) != empty(b))  // a tape's none is refused before this (check_not_none); this is another empty tensor
    message += " (shape (0,) is the shape of a default-constructed or moved-from tensor: was it assigned?)";
  throw shape_error(message);
}
#else
shape broadcast_shapes(const shape& a, const shape& b, const char* op);
#endif

/// Maps a possibly negative axis into [0, rank) or throws naming `op`.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE int normalize_axis(int axis, int rank, const char* op) {
  if (axis < -rank || axis >= rank) {
    const std::string range = rank == 0 ? "[]" : "[" + std::to_string(-rank) + ", " + std::to_string(rank) + ")";
    throw out_of_range(std::string(op) + ": axis " + std::to_string(axis) + " is out of range " + range +
                       " for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}
#else
int normalize_axis(int axis, int rank, const char* op);
#endif

namespace detail {
/// "[3]" or "[1, 2]": the position of flat (row-major) element `i` in shape `s`, for messages.
inline std::string position_text(index_t i, const shape& s) {
  std::string r;
  for (int d = s.rank() - 1; d >= 0; --d) {
    r = std::to_string(i % s[d]) + (r.empty() ? "" : ", ") + r;
    i /= s[d];
  }
  return "[" + r + "]";
}

/// Keras's sample_weight shape `ws` aligned to losses of rank `rank`: a trailing unit axis past the
/// losses' rank dropped ((batch, 1) for (batch,) losses), then unit axes appended up to the rank, so
/// that one weight per example weighs each of its steps. The losses and fit both align this way.
inline shape sample_weight_shape(shape ws, int rank) {
  if (ws.rank() == rank + 1 && ws[ws.rank() - 1] == 1) ws = shape(ws.begin(), ws.end() - 1);
  while (ws.rank() < rank) ws.push_back(1);
  return ws;
}
}  // namespace detail

}  // namespace fluxion
