// Reusable, aligned scratch memory for CPU kernels (GEMM packing panels, im2col columns).
//
//   float* panel = fluxion::detail::kernels::scratch<float, scratch_slot::gemm_a>(mc * kc);
//
// Each (type, slot) pair is one thread_local buffer that only grows, so a kernel called in a loop
// allocates on its first call and never again (principle 8). Contents are not preserved across a
// growth, and a slot must not be used by two live callers on one thread at once: each kernel owns
// its slots.
#pragma once

#include <cstddef>
#include <new>

#include "../../../core/config.hpp"

namespace fluxion::detail::kernels {

enum class scratch_slot {
  gemm_a,
  gemm_b,
  gemm_c,
  gemm_edge,
  gemm_narrow,  // the narrow path's packed B: its leftover rows run the general path, which uses gemm_b
  gemm_flags,
  conv_columns,
  conv_filters,
  conv_packed,
  conv_flags,
  conv_partials
};

template <class T>
class aligned_scratch {
 public:
  aligned_scratch() = default;
  aligned_scratch(const aligned_scratch&) = delete;
  aligned_scratch& operator=(const aligned_scratch&) = delete;
  ~aligned_scratch() { release(); }

  /// At least n elements, aligned to buffer_alignment; previous contents are lost when it grows.
  T* reserve(std::size_t n) {
    if (n > m_capacity) {
      release();
      // Round up so that many slightly larger requests do not reallocate each time.
      std::size_t cap = n + n / 4 + 64;
      m_data = static_cast<T*>(::operator new (cap * sizeof(T), std::align_val_t{buffer_alignment}));
      m_capacity = cap;
    }
    return m_data;
  }

 private:
  void release() noexcept {
    if (m_data) ::operator delete (m_data, std::align_val_t{buffer_alignment});
    m_data = nullptr;
    m_capacity = 0;
  }

  T* m_data = nullptr;
  std::size_t m_capacity = 0;
};

template <class T, scratch_slot Slot>
T* scratch(std::size_t n) {
  thread_local aligned_scratch<T> buffer;
  return buffer.reserve(n);
}

}  // namespace fluxion::detail::kernels
