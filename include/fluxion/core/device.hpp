// Device tags. Expressions carry their device in their type; mixing devices does not compile.
//
//   fx::tensor<float, fx::cpu> a;    // xsimd loops and the thread pool
//   fx::tensor<float, fx::cuda> g;   // Thrust kernels; include <fluxion/cuda.hpp>
#pragma once

#include <type_traits>

namespace fluxion {

struct cpu {
  static constexpr const char* name = "cpu";
};
struct cuda {
  static constexpr const char* name = "cuda";
};

template <class D>
inline constexpr bool is_device_v = std::is_same_v<D, cpu> || std::is_same_v<D, cuda>;

template <class D>
concept device = is_device_v<D>;

}  // namespace fluxion
