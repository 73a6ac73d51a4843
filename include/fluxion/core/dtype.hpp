// Element types and their promotion.
//
// Tensors hold float, double, int32_t, int64_t or bool. Mixing element types promotes by C++'s
// usual arithmetic conversions, decided at compile time: int32 + float -> float, float + double ->
// double, int32 + int64 -> int64, bool + bool -> int32. A C++ scalar next to a tensor takes the
// tensor's type when both are of the same kind (2.0 * tensor<float> stays float, 2 * tensor<float>
// stays float); a floating scalar with an integer tensor promotes as C++ does (0.5 * tensor<int>
// is double). Comparisons and logical operators give bool.
#pragma once

#include <cstdint>
#include <type_traits>

namespace fluxion {

template <class T>
inline constexpr bool is_element_type_v =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
    std::is_same_v<T, std::int64_t> || std::is_same_v<T, bool>;

template <class T>
concept element_type = is_element_type_v<T>;

template <class T>
constexpr const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  else if constexpr (std::is_same_v<T, double>) return "float64";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "int32";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else return "unknown";
}

/// The element type of `a op b` under C++'s arithmetic conversions (bool and int promote to int32).
template <class A, class B>
using promote_t = std::conditional_t<std::is_same_v<decltype(A{} + B{}), int>, std::int32_t, decltype(A{} + B{})>;

/// The element type a C++ scalar of type S takes next to a tensor of type T.
template <class T, class S>
using scalar_promote_t =
    std::conditional_t<std::is_floating_point_v<S> && !std::is_floating_point_v<T>, promote_t<T, S>, T>;

}  // namespace fluxion
