// Forward declarations and the expression concept. Includes nothing heavy.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../core/device.hpp"
#include "../core/dtype.hpp"

namespace fluxion {

template <class T, class Device = cpu>
class tensor;
template <class T, class Device = cpu>
class variable;

/// Base of every expression node; tensors are expressions too (the leaves).
struct expression_base {};

template <class E>
inline constexpr bool is_expression_v = std::is_base_of_v<expression_base, std::remove_cvref_t<E>>;
template <class E>
concept expression = is_expression_v<E>;

template <class E>
inline constexpr bool is_variable_v = false;
template <class T, class D>
inline constexpr bool is_variable_v<variable<T, D>> = true;

template <class E>
inline constexpr bool is_tensor_v = false;
template <class T, class D>
inline constexpr bool is_tensor_v<tensor<T, D>> = true;

template <class S>
inline constexpr bool is_scalar_v = std::is_arithmetic_v<std::remove_cvref_t<S>>;

/// What an op accepts: an expression, a variable (read as its current value) or a C++ scalar.
template <class X>
concept operand = is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>> || is_scalar_v<X>;

template <class E>
using value_type_t = typename std::remove_cvref_t<E>::value_type;
template <class E>
using device_t = typename std::remove_cvref_t<E>::device_type;

namespace detail {

/// Marks nodes that materialize (kernel boundaries: reductions, matmul, gather, concat, ...).
struct boundary_base {};
template <class E>
inline constexpr bool is_boundary_v = std::is_base_of_v<boundary_base, std::remove_cvref_t<E>>;

template <class E>
auto materialize(const E& e) -> tensor<value_type_t<E>, device_t<E>>;

template <class E>
bool truth_value(const E& e);

/// The value of a one-element expression (expr.item()): materialized, then tensor::item.
template <class E>
typename E::value_type item_of(const E& e);

template <class Device>
struct evaluator;  // backend entry point: assign, reduce, ... (backend/cpu, backend/cuda)

}  // namespace detail
}  // namespace fluxion
