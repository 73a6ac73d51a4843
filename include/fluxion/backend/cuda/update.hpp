// Optimizer updates on fx::cuda: one multi-tensor kernel per apply_gradients reads each variable's
// gradient, value and slots once and writes the new value and slots (optim/optimizer.hpp's
// fused_update, whose cpu loop runs the same step functor on xsimd batches, a variable at a time).
//
// A kernel per variable cost a launch each: Adam on the CNN's 8 variables took 51 µs in 8 kernels
// on an H100, most of it launches (stop 43's profile). Here the variables are cut into chunks of
// update_chunk elements; a table of the chunks (variable, first element, end) and one of the
// variables' buffers go to the device (one small upload, queued), and thread i updates element
// i % update_chunk of chunk i / update_chunk, so finding its variable is one table read. Threads
// past a variable's last element do nothing. While an index check of this thread is pending
// (checks.hpp), the kernel reads its flag, and if the check failed leaves every variable and slot
// as it was: the read that reports the failure finds the weights of the last good step.
#pragma once

#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>

#include "../../core/config.hpp"
#include "memory.hpp"

namespace fluxion::detail {

namespace cuda_kernel {

/// Elements of a variable per chunk of the multi-tensor update (a power of two).
inline constexpr index_t update_chunk = 4096;

/// One variable's buffers, as the kernel reads them from the device.
template <class T>
struct update_pointers {
  index_t size;  // elements
  const T* gradient;
  const T* value;
  T* new_value;
  const T* slots[3];
  T* new_slots[3];
};

/// A chunk of a variable: its index in the table of update_pointers and its first element; it
/// ends update_chunk later or at the variable's end.
struct update_span {
  index_t variable, begin;
};

template <std::size_t Slots, class T, class Step>
struct update_element {
  const update_pointers<T>* variables;
  const update_span* chunks;
  T weight_decay, learning_rate;
  bool decay;
  Step step;
  const std::int32_t* failed;  // this thread's index-check flag while checks are pending (checks.hpp)

  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const update_span c = chunks[i / update_chunk];
    const update_pointers<T>& p = variables[c.variable];
    const index_t j = c.begin + i % update_chunk;
    if (j >= p.size) return;
    if (failed && *failed) {  // an index check before this update failed: everything stays as it was
      p.new_value[j] = p.value[j];
      if constexpr (Slots > 0)
        for (std::size_t k = 0; k < Slots; ++k) p.new_slots[k][j] = p.slots[k][j];
      return;
    }
    const T g = p.gradient[j];
    T w = p.value[j];
    std::array<T, Slots> s{};
    if constexpr (Slots > 0)
      for (std::size_t k = 0; k < Slots; ++k) s[k] = p.slots[k][j];
    if (decay) w = w - w * weight_decay * learning_rate;  // decoupled weight decay first, as on the cpu
    step(g, w, s);
    p.new_value[j] = w;
    if constexpr (Slots > 0)
      for (std::size_t k = 0; k < Slots; ++k) p.new_slots[k][j] = s[k];
  }
};

}  // namespace cuda_kernel

/// One kernel: step(gradient, value, slots) for every element of every variable in the list, as
/// the cpu's fused_update (Buffers: optim::detail::update_buffers<T>; Constants:
/// optim::detail::step_constants).
template <std::size_t Slots, class Buffers, class Constants, class Step>
void device_fused_update(std::span<const Buffers> list, const Constants& c, const Step& step) {
  using T = std::remove_cv_t<std::remove_pointer_t<decltype(list.front().new_value)>>;
  static_assert(Slots <= 3);
  using cuda_kernel::update_chunk;
  std::vector<cuda_kernel::update_pointers<T>> variables;
  std::vector<cuda_kernel::update_span> chunks;
  for (const Buffers& b : list) {
    if (b.size == 0) continue;
    const index_t v = static_cast<index_t>(variables.size());
    variables.push_back({b.size, b.gradient, b.value, b.new_value, {b.slots[0], b.slots[1], b.slots[2]},
                         {b.new_slots[0], b.new_slots[1], b.new_slots[2]}});
    for (index_t begin = 0; begin < b.size; begin += update_chunk)
      chunks.push_back({v, begin});
  }
  if (chunks.empty()) return;
  // Both tables in one upload: the pointers first (8-byte aligned), then the chunks.
  const std::size_t pointer_bytes = variables.size() * sizeof(variables[0]);
  const std::size_t bytes = pointer_bytes + chunks.size() * sizeof(chunks[0]);
  std::vector<unsigned char> host(bytes);
  std::memcpy(host.data(), variables.data(), pointer_bytes);
  std::memcpy(host.data() + pointer_bytes, chunks.data(), bytes - pointer_bytes);
  device_scratch<unsigned char> tables(static_cast<index_t>(bytes));
  device_memory<cuda>::to_device(tables.data(), host.data(), static_cast<index_t>(bytes));
  const cuda_kernel::update_element<Slots, T, Step> f{
      reinterpret_cast<const cuda_kernel::update_pointers<T>*>(tables.data()),
      reinterpret_cast<const cuda_kernel::update_span*>(tables.data() + pointer_bytes),
      static_cast<T>(c.weight_decay),
      static_cast<T>(c.learning_rate),
      c.weight_decay != 0,
      step,
      pending_checks::mine().flag_if_pending()};
  thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0),
                     static_cast<index_t>(chunks.size()) * update_chunk, f);
}

}  // namespace fluxion::detail
