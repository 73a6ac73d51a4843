// The reference-counted, immutable storage behind tensors.
//
// A tensor is a handle: copying it copies a pointer and bumps a count. On the CPU the count and
// the data share one cached allocation, with the data 64-byte aligned after a one-line header.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "../core/allocator.hpp"
#include "../core/config.hpp"

namespace fluxion::detail {

struct buffer_header {
  std::atomic<std::int64_t> refs{1};
  void* data = nullptr;
  std::size_t actual = 0;  // bytes of the allocation that holds this header
  void (*release)(buffer_header*) noexcept = nullptr;
};
static_assert(sizeof(buffer_header) <= buffer_alignment);

template <class Device>
struct buffer_factory;

/// CPU buffers: header and data in one cached block.
template <>
struct buffer_factory<cpu> {
  static buffer_header* make(std::size_t bytes) {
    std::size_t actual;
    void* block = device_allocator<cpu>::allocate(bytes + buffer_alignment, actual);
    auto* h = new (block) buffer_header;
    h->data = static_cast<char*>(block) + buffer_alignment;
    h->actual = actual;
    h->release = [](buffer_header* b) noexcept {
      const std::size_t n = b->actual;
      b->~buffer_header();
      device_allocator<cpu>::deallocate(b, n);
    };
    return h;
  }
};

class buffer_ref {
 public:
  buffer_ref() = default;
  explicit buffer_ref(buffer_header* h) noexcept : m_h(h) {}
  buffer_ref(const buffer_ref& o) noexcept : m_h(o.m_h) {
    if (m_h) m_h->refs.fetch_add(1, std::memory_order_relaxed);
  }
  buffer_ref(buffer_ref&& o) noexcept : m_h(std::exchange(o.m_h, nullptr)) {}
  buffer_ref& operator=(buffer_ref o) noexcept {
    std::swap(m_h, o.m_h);
    return *this;
  }
  ~buffer_ref() {
    if (m_h && m_h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) m_h->release(m_h);
  }

  void* data() const noexcept { return m_h ? m_h->data : nullptr; }
  std::int64_t use_count() const noexcept { return m_h ? m_h->refs.load(std::memory_order_relaxed) : 0; }
  explicit operator bool() const noexcept { return m_h != nullptr; }

  template <class Device>
  static buffer_ref allocate(std::size_t bytes) {
    return buffer_ref(buffer_factory<Device>::make(bytes));
  }

 private:
  buffer_header* m_h = nullptr;
};

}  // namespace fluxion::detail
