// fx::to<Device>(x): moves a tensor, or the value of any expression, to another device.
//
//   fx::tensor<float> x = {1.f, 2.f, 3.f};
//   fx::tensor<float, fx::cuda> g = fx::to<fx::cuda>(x * 2.f);   // evaluated on the cpu, then copied
//   fx::tensor<float> back = fx::to<fx::cpu>(g + 1.f);           // evaluated on the gpu, then copied
//
// The expression is materialized on the device it lives on (an expression never mixes devices),
// then its elements are copied in one transfer. Moving to the device a tensor is already on returns
// that tensor itself: a handle to the same storage, no copy.
//
// fx::synchronize<fx::cuda>() waits for the work queued on this thread's current stream.
//
// Both are device-generic and in <fluxion/tensor.hpp> (since stop 53; before, only <fluxion/cuda.hpp>
// had them), so that code generic over devices builds for the cpu alone, without Thrust:
// fx::to<fx::cpu>(x) of a cpu tensor is x. Moving to or from fx::cuda needs <fluxion/cuda.hpp>,
// which defines that device's memory; without it a static_assert says so.
#pragma once

#include <type_traits>

#include "../core/device.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/evaluate.hpp"
#include "tensor.hpp"

namespace fluxion {
namespace detail {
/// True where Device's memory functions are defined: always for the cpu; for fx::cuda where
/// <fluxion/cuda.hpp> is included (backend/cuda/memory.hpp).
template <class Device>
concept device_memory_defined = requires { sizeof(device_memory<Device>); };
}  // namespace detail

template <device To, class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto to(const X& x) {
  using E = detail::expr_t<const X&>;
  using T = value_type_t<E>;
  using From = device_t<E>;
  static_assert(detail::device_memory_defined<From> && detail::device_memory_defined<To>,
                "fluxion::to: moving a tensor to or from fluxion::cuda needs #include <fluxion/cuda.hpp> "
                "(and Thrust: link the CMake target fluxion::cuda)");
  tensor<T, From> source = detail::materialize(detail::as_expr<const X&>(x));
  if constexpr (std::is_same_v<From, To>) return source;
  else if constexpr (std::is_same_v<To, cpu>) return detail::host_copy(source);
  else return detail::device_copy<To>(source);
}

/// Waits until the work queued on this thread's current stream has finished (fx::cuda: the shared
/// stream, or the thread's own inside an fx::own_stream scope, backend/cuda/stream.hpp; on the cpu
/// work is done when the statement returns). Inside an fx::own_stream scope, call it before a
/// device tensor this thread made goes to another thread; dataset::prefetch does so.
template <device Device>
void synchronize() {
  if constexpr (requires { detail::device_memory<Device>::fence(); }) detail::device_memory<Device>::fence();
}

}  // namespace fluxion
