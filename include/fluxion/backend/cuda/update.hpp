// Optimizer updates on fx::cuda: one kernel per variable reads the gradient, the value and the
// slots once and writes the new value and slots (optim/optimizer.hpp's fused_update, whose cpu
// loop runs the same step functor on xsimd batches).
#pragma once

#include <array>
#include <cstddef>
#include <type_traits>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/config.hpp"
#include "memory.hpp"

namespace fluxion::detail {

namespace cuda_kernel {

template <std::size_t Slots, class T, class Step>
struct update_element {
  const T* gradient;
  const T* value;
  T* new_value;
  std::array<const T*, 3> slots;
  std::array<T*, 3> new_slots;
  T weight_decay, learning_rate;
  bool decay;
  Step step;

  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const T g = gradient[i];
    T w = value[i];
    std::array<T, Slots> s{};
    if constexpr (Slots > 0)
      for (std::size_t k = 0; k < Slots; ++k) s[k] = slots[k][i];
    if (decay) w = w - w * weight_decay * learning_rate;  // decoupled weight decay first, as on the cpu
    step(g, w, s);
    new_value[i] = w;
    if constexpr (Slots > 0)
      for (std::size_t k = 0; k < Slots; ++k) new_slots[k][i] = s[k];
  }
};

}  // namespace cuda_kernel

/// One kernel: step(gradient, value, slots) for every element, as the cpu's fused_update
/// (Buffers: optim::detail::update_buffers<T>; Constants: optim::detail::step_constants).
template <std::size_t Slots, class Buffers, class Constants, class Step>
void device_fused_update(const Buffers& b, const Constants& c, const Step& step) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(b.new_value)>>;
  if (b.size == 0) return;
  static_assert(Slots <= 3);
  const cuda_kernel::update_element<Slots, T, Step> f{b.gradient,
                                                      b.value,
                                                      b.new_value,
                                                      {b.slots[0], b.slots[1], b.slots[2]},
                                                      {b.new_slots[0], b.new_slots[1], b.new_slots[2]},
                                                      static_cast<T>(c.weight_decay),
                                                      static_cast<T>(c.learning_rate),
                                                      c.weight_decay != 0,
                                                      step};
  thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), b.size, f);
}

}  // namespace fluxion::detail
