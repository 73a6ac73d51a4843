// Caching allocators, one per device, and their statistics.
//
// Tensors get their buffers here. A freed buffer goes back to a per-thread cache keyed by a size
// class (at most 12.5% larger than asked), and past 64 buffers of a class to a pool all threads
// share, so a training loop in steady state allocates nothing from the system, even when another
// thread makes its batches. fx::memory_stats<fx::cpu>() (also fx::memory::stats) counts requests and bytes,
// which the tests use to prove that a fused statement allocates exactly its output, and the peak of
// the bytes in use since fx::memory::reset_peak() (which starts the tracking; before it the peak
// is the current value):
//
//   auto before = fx::memory_stats().allocations;
//   fx::tensor<float> r = a * b + c * d - fx::sin(e);
//   assert(fx::memory_stats().allocations - before == 1);
//
//   fx::memory::reset_peak();
//   train_step();
//   auto activations = fx::memory_stats().peak_bytes_in_use - weights_and_slots;
//
// Bytes are those of the size classes handed out (what the process holds for them), counted for
// tensor buffers; the kernels' per-thread scratch (packing, im2col) is not counted.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "config.hpp"
#include "device.hpp"
#include "error.hpp"
#include "prebuilt.hpp"

namespace fluxion {
namespace memory {

struct statistics {
  std::int64_t allocations = 0;         // buffer requests served (cached or not)
  std::int64_t system_allocations = 0;  // requests that reached the system allocator
  std::int64_t bytes_in_use = 0;        // bytes held by live buffers (size classes, not requests)
  std::int64_t buffers_in_use = 0;
  std::int64_t cached_bytes = 0;        // bytes kept for reuse
  std::int64_t peak_bytes_in_use = 0;   // the most bytes_in_use since reset_peak() (before it: bytes_in_use)
  std::int64_t stream_waits = 0;        // fx::cuda: reuses of a cached block on another thread's stream, each
                                        // ordered after that stream's work by an event (no host wait)
  std::int64_t host_reads = 0;          // fx::cuda: copies to the host (item(), to_vector(), fx::to<cpu>),
                                        // each of which waits for the work queued before it
};

}  // namespace memory

namespace detail {

// Counters are per thread and updated with plain relaxed loads and stores (no locked
// instructions on the hot path); statistics() sums every live thread and the retired ones.
struct thread_counters {
  std::atomic<std::int64_t> allocations{0}, system_allocations{0}, bytes_in_use{0}, buffers_in_use{0},
      cached_bytes{0};
  static void bump(std::atomic<std::int64_t>& c, std::int64_t d) {
    c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
  }
};

/// Size classes: 128 bytes minimum, then 8 classes per power of two.
inline std::size_t size_class(std::size_t bytes, int& index) {
  if (bytes <= 128) {
    index = 0;
    return 128;
  }
  const int p = std::bit_width(bytes - 1);  // 2^(p-1) < bytes <= 2^p
  const std::size_t step = std::size_t{1} << (p - 4);
  const std::size_t rounded = (bytes + step - 1) / step * step;
  index = 1 + (p - 8) * 8 + static_cast<int>((rounded >> (p - 4)) - 9);
  return rounded;
}

inline constexpr int n_size_classes = 1 + 56 * 8 + 8;

/// Free host buffers that threads' caches handed on, shared by every thread under a lock. A
/// thread's cache keeps at most host_cache::local_buffers_per_class buffers of a size class and
/// passes the rest here, where the next miss of any thread finds them. Without it, a buffer made on
/// one thread and freed on another piled up in the second thread's cache: a prefetched batch, made
/// by the producer and freed by the training loop, left 1 GiB cached on the loop's thread after
/// 4000 batches of 64 Fashion-MNIST images, while the producer asked the system for every batch.
class shared_host_pool {
 public:
  static constexpr std::size_t max_cached_bytes = std::size_t{1} << 30;

  static shared_host_pool& instance() {
    static shared_host_pool* p = new shared_host_pool;  // never destroyed: threads may outlive statics
    return *p;
  }

  void* take(int idx, std::size_t actual) noexcept;

  /// Keeps the buffer, unless that would pass max_cached_bytes.
  bool give(void* p, int idx, std::size_t actual) noexcept;

  void release_all() noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    for (auto& list : m_free) {
      for (void* p : list) ::operator delete(p, std::align_val_t{buffer_alignment});
      list.clear();
    }
    m_cached.store(0, std::memory_order_relaxed);
  }

  std::int64_t cached_bytes() const noexcept { return m_cached.load(std::memory_order_relaxed); }

 private:
  std::mutex m_mutex;
  std::vector<void*> m_free[n_size_classes];
  std::atomic<std::int64_t> m_cached{0};
};

#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE void* shared_host_pool::take(int idx, std::size_t actual) noexcept {
  std::lock_guard<std::mutex> lk(m_mutex);
  auto& list = m_free[static_cast<std::size_t>(idx)];
  if (list.empty()) return nullptr;
  void* p = list.back();
  list.pop_back();
  m_cached.store(m_cached.load(std::memory_order_relaxed) - static_cast<std::int64_t>(actual), std::memory_order_relaxed);
  return p;
}

FLUXION_CORE_INLINE bool shared_host_pool::give(void* p, int idx, std::size_t actual) noexcept {
  std::lock_guard<std::mutex> lk(m_mutex);
  const auto cached = m_cached.load(std::memory_order_relaxed);
  if (static_cast<std::size_t>(cached) + actual > max_cached_bytes) return false;
  try {
    m_free[static_cast<std::size_t>(idx)].push_back(p);
  } catch (...) {
    return false;
  }
  m_cached.store(cached + static_cast<std::int64_t>(actual), std::memory_order_relaxed);
  return true;
}
#endif  // FLUXION_CORE_DEFINITIONS

struct counter_registry {
  std::mutex mutex;
  std::vector<thread_counters*> live;
  memory::statistics retired;

  static counter_registry& instance() {
    static counter_registry* r = new counter_registry;  // never destroyed: threads may outlive statics
    return *r;
  }
  memory::statistics sum();
};

#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE memory::statistics counter_registry::sum() {
  std::lock_guard<std::mutex> lk(mutex);
  memory::statistics s = retired;
  s.cached_bytes += shared_host_pool::instance().cached_bytes();
  for (auto* c : live) {
    s.allocations += c->allocations.load(std::memory_order_relaxed);
    s.system_allocations += c->system_allocations.load(std::memory_order_relaxed);
    s.bytes_in_use += c->bytes_in_use.load(std::memory_order_relaxed);
    s.buffers_in_use += c->buffers_in_use.load(std::memory_order_relaxed);
    s.cached_bytes += c->cached_bytes.load(std::memory_order_relaxed);
  }
  return s;
}
#endif  // FLUXION_CORE_DEFINITIONS

/// The process-wide bytes in use and their peak, kept from the first reset_peak() on. Per-thread
/// counters cannot give a peak (a buffer freed on another thread than the one that made it), so
/// these are shared atomics; until a program asks for a peak, the hot path pays one relaxed load
/// instead of two locked adds per statement (+9 ns on a 16-element statement, measured).
struct peak_tracker {
  static inline std::atomic<bool> tracking{false};
  static inline std::atomic<std::int64_t> in_use{0};
  static inline std::atomic<std::int64_t> peak{0};
  static void allocated(std::int64_t bytes) noexcept {
    if (!tracking.load(std::memory_order_relaxed)) return;
    const std::int64_t now = in_use.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::int64_t p = peak.load(std::memory_order_relaxed);
    while (now > p && !peak.compare_exchange_weak(p, now, std::memory_order_relaxed)) {
    }
  }
  static void freed(std::int64_t bytes) noexcept {
    if (tracking.load(std::memory_order_relaxed)) in_use.fetch_sub(bytes, std::memory_order_relaxed);
  }
  /// Starts (or restarts) the peak from `current`, the bytes in use now.
  static void reset(std::int64_t current) noexcept {
    if (!tracking.load(std::memory_order_relaxed)) {
      in_use.store(current, std::memory_order_relaxed);
      tracking.store(true, std::memory_order_relaxed);
    }
    peak.store(in_use.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
};

/// A per-thread cache of free host buffers, bounded so idle threads do not hoard memory: at most
/// local_buffers_per_class buffers of a size class and max_cached_bytes in all; the rest goes to
/// the shared pool, and a miss looks there before it asks the system.
class host_cache {
 public:
  static constexpr std::size_t max_cached_bytes = std::size_t{1} << 30;
  static constexpr std::size_t local_buffers_per_class = 64;

  void* allocate(std::size_t bytes, std::size_t& actual);

  void deallocate(void* p, std::size_t actual) noexcept;

  void release_all() noexcept {
    for (int i = 0; i < n_size_classes; ++i) {
      for (void* p : m_free[static_cast<std::size_t>(i)]) ::operator delete(p, std::align_val_t{buffer_alignment});
      m_free[static_cast<std::size_t>(i)].clear();
    }
    thread_counters::bump(m_counters.cached_bytes, -static_cast<std::int64_t>(m_cached));
    m_cached = 0;
  }

  /// This thread's cache, or nullptr once it has been destroyed (a tensor freed by a static
  /// destructor at exit goes straight back to the system).
  static host_cache* local() {
    if (host_cache* c = t_current) return c;  // one TLS load on the hot path
    return first_local();
  }

  host_cache();
  ~host_cache();

 private:
  /// local() on this thread's first call, and after its cache is destroyed.
  static host_cache* first_local();

  static inline thread_local bool t_destroyed = false;  // trivially destructible: safe at exit
  static inline thread_local host_cache* t_current = nullptr;
  std::vector<void*> m_free[n_size_classes];
  std::size_t m_cached = 0;
  thread_counters m_counters;
};

#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE void* host_cache::allocate(std::size_t bytes, std::size_t& actual) {
  int idx;
  actual = size_class(bytes, idx);
  thread_counters::bump(m_counters.allocations, 1);
  thread_counters::bump(m_counters.bytes_in_use, static_cast<std::int64_t>(actual));
  thread_counters::bump(m_counters.buffers_in_use, 1);
  peak_tracker::allocated(static_cast<std::int64_t>(actual));
  auto& list = m_free[static_cast<std::size_t>(idx)];
  if (!list.empty()) {
    void* p = list.back();
    list.pop_back();
    m_cached -= actual;
    thread_counters::bump(m_counters.cached_bytes, -static_cast<std::int64_t>(actual));
    return p;
  }
  if (void* p = shared_host_pool::instance().take(idx, actual)) return p;
  thread_counters::bump(m_counters.system_allocations, 1);
  void* p = ::operator new(actual, std::align_val_t{buffer_alignment}, std::nothrow);
  if (!p) {  // out of memory: give back what this thread and the shared pool cache, and try again
    release_all();
    shared_host_pool::instance().release_all();
    p = ::operator new(actual, std::align_val_t{buffer_alignment}, std::nothrow);
    if (!p) {
      thread_counters::bump(m_counters.bytes_in_use, -static_cast<std::int64_t>(actual));
      thread_counters::bump(m_counters.buffers_in_use, -1);
      peak_tracker::freed(static_cast<std::int64_t>(actual));
      throw std::bad_alloc();
    }
  }
  return p;
}

FLUXION_CORE_INLINE void host_cache::deallocate(void* p, std::size_t actual) noexcept {
  int idx;
  size_class(actual, idx);
  thread_counters::bump(m_counters.bytes_in_use, -static_cast<std::int64_t>(actual));
  thread_counters::bump(m_counters.buffers_in_use, -1);
  peak_tracker::freed(static_cast<std::int64_t>(actual));
  auto& list = m_free[static_cast<std::size_t>(idx)];
  if (m_cached + actual > max_cached_bytes || list.size() >= local_buffers_per_class) {
    if (!shared_host_pool::instance().give(p, idx, actual)) ::operator delete(p, std::align_val_t{buffer_alignment});
    return;
  }
  try {
    list.push_back(p);
  } catch (...) {
    ::operator delete(p, std::align_val_t{buffer_alignment});
    return;
  }
  m_cached += actual;
  thread_counters::bump(m_counters.cached_bytes, static_cast<std::int64_t>(actual));
}

FLUXION_CORE_INLINE host_cache::host_cache() {
  auto& reg = counter_registry::instance();
  std::lock_guard<std::mutex> lk(reg.mutex);
  reg.live.push_back(&m_counters);
}

FLUXION_CORE_INLINE host_cache::~host_cache() {
  t_destroyed = true;
  t_current = nullptr;
  release_all();
  auto& reg = counter_registry::instance();
  std::lock_guard<std::mutex> lk(reg.mutex);
  reg.retired.allocations += m_counters.allocations.load();
  reg.retired.system_allocations += m_counters.system_allocations.load();
  reg.retired.bytes_in_use += m_counters.bytes_in_use.load();
  reg.retired.buffers_in_use += m_counters.buffers_in_use.load();
  std::erase(reg.live, &m_counters);
}

FLUXION_CORE_INLINE host_cache* host_cache::first_local() {
  if (t_destroyed) return nullptr;
  static thread_local host_cache cache;
  t_current = &cache;
  return &cache;
}
#endif  // FLUXION_CORE_DEFINITIONS

/// Host memory that kernels keep between calls outside the allocator (a convolution's Winograd
/// filter transforms, kept for inference): each such cache registers how to empty itself once,
/// and fx::memory::empty_cache<cpu>() empties them all.
class kept_host_memory {
 public:
  static kept_host_memory& instance() {
    static kept_host_memory registry;
    return registry;
  }
  void add(void (*release)()) {
    const std::lock_guard lock(m_mutex);
    m_release.push_back(release);
  }
  void release_all() {
    std::vector<void (*)()> release;
    {
      const std::lock_guard lock(m_mutex);
      release = m_release;
    }
    for (auto* f : release) f();
  }

 private:
  std::mutex m_mutex;
  std::vector<void (*)()> m_release;
};

/// Device allocators. The cpu one is the host cache; the cuda one lives in backend/cuda.
template <class Device>
struct device_allocator;

template <>
struct device_allocator<cpu> {
  static void* allocate(std::size_t bytes, std::size_t& actual) {
    if (auto* c = host_cache::local()) return c->allocate(bytes, actual);
    int idx;
    actual = size_class(bytes, idx);
    void* p = ::operator new(actual, std::align_val_t{buffer_alignment});
    peak_tracker::allocated(static_cast<std::int64_t>(actual));
    return p;
  }
  static void deallocate(void* p, std::size_t actual) noexcept {
    if (auto* c = host_cache::local()) {
      c->deallocate(p, actual);
    } else {
      peak_tracker::freed(static_cast<std::int64_t>(actual));
      ::operator delete(p, std::align_val_t{buffer_alignment});
    }
  }
  static memory::statistics stats() {
    memory::statistics s = counter_registry::instance().sum();
    s.peak_bytes_in_use = peak_tracker::tracking.load(std::memory_order_relaxed)
                              ? std::max(peak_tracker::peak.load(std::memory_order_relaxed), s.bytes_in_use)
                              : s.bytes_in_use;
    return s;
  }
  static void reset_peak() { peak_tracker::reset(counter_registry::instance().sum().bytes_in_use); }
  static void empty_cache() noexcept {
    if (auto* c = host_cache::local()) c->release_all();
    shared_host_pool::instance().release_all();
    kept_host_memory::instance().release_all();
  }
};

}  // namespace detail

namespace memory {

/// Allocation statistics of a device, summed over all threads.
template <class Device = cpu>
statistics stats() {
  return detail::device_allocator<Device>::stats();
}

/// Returns this thread's cached buffers, and those the threads' caches share, to the system; on the
/// cpu also what kernels keep between calls (inference's Winograd filter transforms).
template <class Device = cpu>
void empty_cache() {
  detail::device_allocator<Device>::empty_cache();
}

/// Restarts the device's peak_bytes_in_use from its current bytes_in_use.
template <class Device = cpu>
void reset_peak() {
  detail::device_allocator<Device>::reset_peak();
}

}  // namespace memory

/// The device's allocation statistics: bytes and buffers in use, their peak, the cache, requests.
template <class Device = cpu>
memory::statistics memory_stats() {
  return memory::stats<Device>();
}
}  // namespace fluxion
