// Device memory for fx::cuda: a caching allocator, tensor buffers, and host <-> device copies.
//
// A cuda tensor keeps its reference count in a small header on the host (from the host cache) and
// its elements on the device, from a size-class cache shared by all threads, so a training loop in
// steady state never calls cudaMalloc. fx::memory::stats<fx::cuda>() counts requests and bytes:
//
//   auto before = fx::memory::stats<fx::cuda>();
//   fx::tensor<float, fx::cuda> r = a * b + c;    // one buffer, reused from the cache if possible
//   assert(fx::memory::stats<fx::cuda>().allocations == before.allocations + 1);
//
// fx::memory::empty_cache<fx::cuda>() frees the whole process's cached device buffers (the cpu
// cache is per thread). Threads queue on the shared stream or, in an fx::own_stream scope, on a
// stream of their own (stream.hpp): a cached block remembers the stream whose work may still use
// it, and another stream that reuses it first waits for that work through a CUDA event (counted in
// stats().stream_waits). Everything goes through Thrust (thrust::device_malloc, thrust::copy), so
// under nvcc it is CUDA memory, and under a host compiler with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP it is host memory: the same code is tested on
// machines without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <algorithm>
#include <atomic>
#include <new>
#include <vector>

#include <thrust/copy.h>
#include <thrust/device_free.h>
#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#include <cuda_runtime.h>
#include <thrust/system/cuda/execution_policy.h>
#endif

#include "../../core/allocator.hpp"
#include "../../core/config.hpp"
#include "../../core/device.hpp"
#include "../../tensor/buffer.hpp"
#include "../../tensor/tensor.hpp"
#include "checks.hpp"
#include "staged_copy.hpp"
#include "stream.hpp"

namespace fluxion::detail {

/// The execution policy of every fx::cuda kernel. On a GPU, kernels are queued on this thread's
/// current stream (stream.hpp: the shared one, or its own) without waiting for them
/// (thrust::cuda::par_nosync), as in PyTorch: the host goes on building the next statement while
/// the device computes. Reading values back (item, to<cpu>, printing) waits for the stream. Buffers released while kernels that use them are still
/// queued go back to the cache tagged with the stream, and a kernel on another stream gets them only
/// after that work (device_cache::allocate), so reuse is safe. Define FLUXION_CUDA_SYNC to wait
/// after every kernel instead, so that a failing kernel is reported by the statement that launched
/// it (as CUDA_LAUNCH_BLOCKING=1 does for PyTorch).
inline auto kernel_policy() {
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA && !defined(FLUXION_CUDA_SYNC)
  return thrust::cuda::par_nosync.on(current_stream());
#elif THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
  return thrust::cuda::par.on(current_stream());
#else
  return thrust::device;
#endif
}

/// The process-wide cache of free device buffers, keyed by size class (core/allocator.hpp). One
/// cache for all threads, behind a mutex: device memory is scarce, so one thread's freed buffers
/// must serve every other thread, and device allocations are rare enough that the lock is cheap.
///
/// Streams. A free block is tagged with the stream its thread queued on when it freed it, whose
/// queued work may still use it (work on a thread's own stream is finished, or ordered before the
/// shared stream, before another thread gets its tensors: stream.hpp). The same stream, or any
/// stream for a block of an ended thread's stream, reuses it at once: the stream's order does the
/// rest. Another stream first waits for that work: for a block freed on another stream than the
/// one it was made on (a prefetched batch, made on the producer's stream and freed by the training
/// loop), the freeing thread recorded an event on its stream when it freed the block, so the wait
/// ends with the block's last use; otherwise an event is recorded on the tagged stream when the
/// block is taken. Either way the wait is queued on the device, and the host goes on.
class device_cache {
 public:
  /// The most bytes cached; beyond it the blocks cached longest ago go back to the device.
  static constexpr std::size_t max_cached_bytes = std::size_t{1} << 30;

  static device_cache& instance() {
    static device_cache* c = new device_cache;  // never destroyed: the CUDA context may be gone at exit
    return *c;
  }

  void* allocate(std::size_t bytes, std::size_t& actual) {
    int idx;
    actual = size_class(bytes, idx);
    const std::uint32_t stream = current_stream_id();
    std::lock_guard<std::mutex> lk(m_mutex);
    auto& list = m_free[static_cast<std::size_t>(idx)];
    void* p;
    if (!list.empty()) {
      const std::size_t at = pick_locked(list, stream);
      cached_block b = list[at];
      list.erase(list.begin() + static_cast<std::ptrdiff_t>(at));
      m_cached -= actual;
      p = b.data;
      order_after_locked(b, stream);
    } else {
      p = system_allocate(actual);
      if (!p) {  // out of device memory: give the cache back and try once more
        release_all_locked();
        p = system_allocate(actual);
        if (!p) throw std::bad_alloc();
      }
      ++m_stats.system_allocations;
    }
    ++m_stats.allocations;
    ++m_stats.buffers_in_use;
    m_stats.bytes_in_use += static_cast<std::int64_t>(actual);
    m_stats.peak_bytes_in_use = std::max(m_stats.peak_bytes_in_use, m_stats.bytes_in_use);
    return p;
  }

  /// Returns a block made on stream `made_on` (its thread's current_stream_id() when it was
  /// allocated) from this thread.
  void deallocate(void* p, std::size_t actual, std::uint32_t made_on) noexcept {
    int idx;
    size_class(actual, idx);
    const std::uint32_t stream = current_stream_id();
    std::lock_guard<std::mutex> lk(m_mutex);
    --m_stats.buffers_in_use;
    m_stats.bytes_in_use -= static_cast<std::int64_t>(actual);
    if (actual > max_cached_bytes) {
      system_free(p);
      return;
    }
    // Make room by freeing the blocks cached longest ago: a working set that changed (another
    // batch size, a phase with other shapes) replaces the old one in the cache instead of being
    // refused by it and paying cudaMalloc and a synchronizing cudaFree on every step.
    while (m_cached + actual > max_cached_bytes) evict_oldest_locked();
    cached_block b{p, actual, ++m_clock, stream, stream_event{}, false};
    if (stream != made_on) b.has_event = record_locked(stream, b.event);  // handed over
    try {
      m_free[static_cast<std::size_t>(idx)].push_back(b);
    } catch (...) {
      if (b.has_event) m_events.push_back(b.event);  // cannot throw: reserved when the event was made
      system_free(p);
      return;
    }
    m_cached += actual;
  }

  void release_all() noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    release_all_locked();
  }

  void reset_peak() noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    m_stats.peak_bytes_in_use = m_stats.bytes_in_use;
  }

  memory::statistics stats() {
    std::lock_guard<std::mutex> lk(m_mutex);
    memory::statistics s = m_stats;
    s.cached_bytes = static_cast<std::int64_t>(m_cached);
    s.host_reads = m_host_reads.load(std::memory_order_relaxed);
    return s;
  }

  /// Counts a copy to the host (device_memory<cuda>::to_host), which waits for the device.
  void count_host_read() noexcept { m_host_reads.fetch_add(1, std::memory_order_relaxed); }

 private:
  device_cache() = default;

  static void* system_allocate(std::size_t bytes) noexcept {
    try {
      return thrust::device_malloc<char>(bytes).get();
    } catch (...) {  // thrust reports failure as std::bad_alloc or thrust::system_error
      return nullptr;
    }
  }
  static void system_free(void* p) noexcept {
    try {
      thrust::device_free(thrust::device_pointer_cast(static_cast<char*>(p)));
    } catch (...) {  // a failing free (a torn-down context) must not escape a destructor
    }
  }

  void release_all_locked() noexcept {
    for (auto& list : m_free) {
      for (const cached_block& b : list) drop_locked(b);
      list.clear();
    }
    m_cached = 0;
  }

  struct cached_block {
    void* data;
    std::size_t bytes;
    std::uint64_t freed_at;  // m_clock when it was cached: the smallest is evicted first
    std::uint32_t stream;    // the stream whose queued work may still use it
    stream_event event;      // with has_event: recorded on `stream` when the block was freed
    bool has_event;
  };

  /// Which cached block of a size class a thread on `stream` takes: the latest freed on its stream
  /// (no wait); else the latest with an event (the shortest wait); else the latest.
  static std::size_t pick_locked(const std::vector<cached_block>& list, std::uint32_t stream) noexcept {
    for (std::size_t i = list.size(); i-- > 0;)
      if (list[i].stream == stream) return i;
    for (std::size_t i = list.size(); i-- > 0;)
      if (list[i].has_event) return i;
    return list.size() - 1;
  }

  /// Makes `stream` wait for the work that may still use block b, when that work is on another
  /// stream that has not ended. A failure to queue the wait falls back to waiting on the host.
  void order_after_locked(cached_block& b, std::uint32_t stream) noexcept {
    if (b.stream != stream && stream_registry::instance().alive(b.stream)) {
      bool queued = b.has_event || record_locked(b.stream, b.event);
      b.has_event = b.has_event || queued;
#if FLUXION_CUDA_STREAMS
      if (!queued || cudaStreamWaitEvent(current_stream(), b.event, 0) != cudaSuccess) cudaDeviceSynchronize();
#endif
      ++m_stats.stream_waits;
    }
    if (b.has_event) m_events.push_back(b.event);  // reserved: cannot throw
  }

  /// Records an event from the pool on `stream`, after everything queued there. False when none
  /// could be made (or the stream ended, when there is nothing to wait for).
  bool record_locked(std::uint32_t stream, stream_event& e) noexcept {
    if (m_events.empty()) {
      try {
        m_event_count += 1;
        m_events.reserve(m_event_count);  // every event fits back without allocating
      } catch (...) {
        m_event_count -= 1;
        return false;
      }
#if FLUXION_CUDA_STREAMS
      stream_event made;
      if (cudaEventCreateWithFlags(&made, cudaEventDisableTiming) != cudaSuccess) {
        m_event_count -= 1;
        return false;
      }
      m_events.push_back(made);
#else
      m_events.push_back(m_event_count);
#endif
    }
    e = m_events.back();
    if (!stream_registry::instance().record(stream, e)) return false;
    m_events.pop_back();
    return true;
  }

  void drop_locked(const cached_block& b) noexcept {
    if (b.has_event) m_events.push_back(b.event);
    system_free(b.data);
  }

  /// Frees the cached block freed longest ago (a scan: eviction is rare and the blocks few).
  void evict_oldest_locked() noexcept {
    std::vector<cached_block>* oldest = nullptr;
    std::size_t at = 0;
    for (auto& list : m_free)
      for (std::size_t i = 0; i < list.size(); ++i)
        if (!oldest || list[i].freed_at < (*oldest)[at].freed_at) {
          oldest = &list;
          at = i;
        }
    if (!oldest) {  // nothing cached: m_cached is 0 and the caller's block fits
      m_cached = 0;
      return;
    }
    drop_locked((*oldest)[at]);
    m_cached -= (*oldest)[at].bytes;
    oldest->erase(oldest->begin() + static_cast<std::ptrdiff_t>(at));
  }

  std::mutex m_mutex;
  std::vector<cached_block> m_free[n_size_classes];
  std::vector<stream_event> m_events;  // free events, capacity for all m_event_count made
  std::size_t m_event_count = 0;
  std::size_t m_cached = 0;
  std::uint64_t m_clock = 0;
  memory::statistics m_stats;
  std::atomic<std::int64_t> m_host_reads{0};
};

template <>
struct device_allocator<cuda> {
  static void* allocate(std::size_t bytes, std::size_t& actual) {
    return device_cache::instance().allocate(bytes, actual);
  }
  /// A block freed on the thread that allocated it; buffers freed elsewhere say where they were made.
  static void deallocate(void* p, std::size_t actual) noexcept {
    device_cache::instance().deallocate(p, actual, current_stream_id());
  }
  static memory::statistics stats() { return device_cache::instance().stats(); }
  static void empty_cache() noexcept { device_cache::instance().release_all(); }
  static void reset_peak() noexcept { device_cache::instance().reset_peak(); }
};

/// Temporary device memory for a kernel's partial results, from the same cache as tensors (and
/// counted in the same statistics), returned when the scope ends.
template <class T>
class device_scratch {
 public:
  explicit device_scratch(index_t n)
      : m_data(static_cast<T*>(device_allocator<cuda>::allocate(static_cast<std::size_t>(n) * sizeof(T), m_actual))) {}
  ~device_scratch() { device_allocator<cuda>::deallocate(m_data, m_actual); }
  device_scratch(const device_scratch&) = delete;
  device_scratch& operator=(const device_scratch&) = delete;
  T* data() const noexcept { return m_data; }

 private:
  std::size_t m_actual = 0;
  T* m_data;
};

/// A cuda buffer's host header also remembers the size class of its device block, and the stream
/// of the thread that made it (a buffer may be freed on another thread).
struct device_buffer_header : buffer_header {
  std::size_t device_bytes = 0;
  std::uint32_t made_on = 0;
};

/// CUDA buffers: the header (reference count) on the host, the elements on the device.
template <>
struct buffer_factory<cuda> {
  static buffer_header* make(std::size_t bytes) {
    std::size_t host_actual;
    void* block = device_allocator<cpu>::allocate(sizeof(device_buffer_header), host_actual);
    std::size_t device_actual;
    void* data;
    try {
      data = device_allocator<cuda>::allocate(bytes, device_actual);
    } catch (...) {
      device_allocator<cpu>::deallocate(block, host_actual);
      throw;
    }
    auto* h = new (block) device_buffer_header;
    h->data = data;
    h->actual = host_actual;
    h->device_bytes = device_actual;
    h->made_on = current_stream_id();
    h->release = [](buffer_header* b) noexcept {
      auto* d = static_cast<device_buffer_header*>(b);
      device_cache::instance().deallocate(d->data, d->device_bytes, d->made_on);
      const std::size_t n = d->actual;
      d->~device_buffer_header();
      device_allocator<cpu>::deallocate(d, n);
    };
    return h;
  }
};

#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
/// Host-to-device copies that do not wait. A copy from ordinary (pageable) host memory first waits
/// for everything queued on the stream, which would stall the host behind the kernels it queued. Instead the values are copied into a pinned
/// block, whose copy to the device is queued without waiting; the caller's memory is free again at
/// once. A block returns to the pool when the event recorded after its copy has completed.
class pinned_staging {
 public:
  /// Pinned blocks kept for reuse beyond this many bytes are freed.
  static constexpr std::size_t max_pooled_bytes = std::size_t{256} << 20;

  static pinned_staging& instance() {
    static pinned_staging* s = new pinned_staging;  // never destroyed: the CUDA context may be gone
    return *s;
  }

  /// Queues the copy of `bytes` from host memory to the device: in pieces of staging_piece_bytes()
  /// (staged_copy.hpp), each copied into a pinned block by the thread pool and then queued, so the
  /// device copies a piece while the host fills the next.
  void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    const cudaStream_t stream = current_stream();
    staged_upload(bytes, staging_piece_bytes(), [&](std::size_t offset, std::size_t length) {
      block b = acquire(length);
      parallel_memcpy(b.data, static_cast<const unsigned char*>(src) + offset, length);
      cudaError_t e = cudaMemcpyAsync(static_cast<unsigned char*>(dst) + offset, b.data, length, cudaMemcpyHostToDevice, stream);
      if (e == cudaSuccess) e = cudaEventRecord(b.done, stream);
      settle(b, e == cudaSuccess);  // a failed copy's block waits for the stream before reuse
      check(e, "cudaMemcpyAsync", length);
    });
  }

  /// Copies `bytes` from the device to host memory and waits for them: in pieces of
  /// staging_piece_bytes() through two pinned blocks, so that the device copies the next piece
  /// while the thread pool copies this one out.
  void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    const cudaStream_t stream = current_stream();
    const std::size_t piece = staging_piece_bytes();  // bytes > piece: every block is used
    block blocks[staging_ring];
    std::size_t held = 0;
    // However it ends, the blocks go back behind their last events (an exception may leave a copy
    // into one queued).
    struct give_back {
      pinned_staging& self;
      block* blocks;
      std::size_t& held;
      ~give_back() {
        for (std::size_t i = 0; i < held; ++i) self.settle(blocks[i], true);
      }
    } returned{*this, blocks, held};
    for (; held < staging_ring; ++held) blocks[held] = acquire(piece);
    staged_download(
        bytes, piece, staging_ring,
        [&](std::size_t offset, std::size_t length, std::size_t slot) {
          cudaError_t e = cudaMemcpyAsync(blocks[slot].data, static_cast<const unsigned char*>(src) + offset, length,
                                          cudaMemcpyDeviceToHost, stream);
          if (e == cudaSuccess) e = cudaEventRecord(blocks[slot].done, stream);
          check(e, "cudaMemcpyAsync", length, "copy to host");
        },
        [&](std::size_t slot) {
          check(cudaEventSynchronize(blocks[slot].done), "cudaEventSynchronize", bytes, "copy to host");
        },
        [&](std::size_t offset, std::size_t length, std::size_t slot) {
          parallel_memcpy(static_cast<unsigned char*>(dst) + offset, blocks[slot].data, length);
        });
  }

 private:
  struct block {
    void* data = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t done = nullptr;
  };

  static void check(cudaError_t e, const char* call, std::size_t bytes, const char* what = "copy to cuda") {
    if (e != cudaSuccess)
      throw std::runtime_error(std::string(what) + ": " + call + " failed for " + std::to_string(bytes) +
                               " bytes: " + cudaGetErrorString(e));
  }

  block acquire(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lk(m_mutex);
      // Blocks whose copies have finished go back to the pool.
      for (std::size_t i = 0; i < m_in_flight.size();) {
        if (cudaEventQuery(m_in_flight[i].done) == cudaSuccess) {
          m_pooled += m_in_flight[i].bytes;
          m_free.push_back(m_in_flight[i]);
          m_in_flight[i] = m_in_flight.back();
          m_in_flight.pop_back();
        } else {
          ++i;
        }
      }
      // The smallest free block that fits, not more than twice the size asked.
      std::size_t best = m_free.size();
      for (std::size_t i = 0; i < m_free.size(); ++i)
        if (m_free[i].bytes >= bytes && m_free[i].bytes <= 2 * bytes + 4096 &&
            (best == m_free.size() || m_free[i].bytes < m_free[best].bytes))
          best = i;
      if (best != m_free.size()) {
        block b = m_free[best];
        m_free[best] = m_free.back();
        m_free.pop_back();
        m_pooled -= b.bytes;
        return b;
      }
      while (m_pooled + bytes > max_pooled_bytes && !m_free.empty()) {  // make room, oldest first
        release(m_free.front());
        m_pooled -= m_free.front().bytes;
        m_free.erase(m_free.begin());
      }
    }
    block b;
    b.bytes = std::max<std::size_t>(bytes, 4096);
    check(cudaMallocHost(&b.data, b.bytes), "cudaMallocHost", b.bytes);
    if (cudaError_t e = cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming); e != cudaSuccess) {
      cudaFreeHost(b.data);
      check(e, "cudaEventCreate", bytes);
    }
    return b;
  }

  /// Hands `b` back: to the blocks in flight, reused once its event has completed, or, where its
  /// copy could not be queued (`queued` false), after the stream's work so far.
  void settle(block b, bool queued) noexcept {
    if (!queued) {
      cudaStreamSynchronize(current_stream());
      cudaGetLastError();  // the failure is reported by the caller
    }
    std::lock_guard<std::mutex> lk(m_mutex);
    if (queued) {
      m_in_flight.push_back(b);
    } else {
      m_pooled += b.bytes;
      m_free.push_back(b);
    }
  }

  static void release(const block& b) noexcept {
    cudaEventDestroy(b.done);
    cudaFreeHost(b.data);
  }

  std::mutex m_mutex;
  std::vector<block> m_in_flight, m_free;
  std::size_t m_pooled = 0;
};
#endif

/// Host <-> device copies of n elements (host pointers on one side, device pointers on the other),
/// on this thread's stream. Copies to the device are queued without waiting (through
/// pinned_staging on a GPU); copies to the host wait for the values.
template <>
inline constexpr bool queues_index_checks<cuda> = true;

template <>
struct device_memory<cuda> {
  /// The scope in which a thread that makes elements for another (dataset::prefetch) queues its
  /// work: a stream of its own, beside the consumer's.
  using thread_scope = ::fluxion::own_stream;

  template <class T>
  static void to_device(T* dst, const T* src, index_t n) {
    if (n <= 0) return;
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    pinned_staging::instance().copy_to_device(dst, src, static_cast<std::size_t>(n) * sizeof(T));
#else
    // Thrust's OpenMP backend: device memory is host memory. Copies of more than one piece take
    // the GPU's schedule (staged_copy.hpp), through a host block, so that CI runs it.
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
    if (bytes <= staging_piece_bytes()) {
      thrust::copy(src, src + n, thrust::device_pointer_cast(dst));
      return;
    }
    std::vector<unsigned char> block(staging_piece_bytes());
    staged_upload(bytes, staging_piece_bytes(), [&](std::size_t offset, std::size_t length) {
      parallel_memcpy(block.data(), reinterpret_cast<const unsigned char*>(src) + offset, length);
      std::memcpy(reinterpret_cast<unsigned char*>(dst) + offset, block.data(), length);  // the device's copy
    });
#endif
  }
  /// Copies n elements to the host and waits for them; then, if an index check this thread queued
  /// since its last read failed, throws that check's message (checks.hpp).
  template <class T>
  static void to_host(T* dst, const T* src, index_t n) {
    if (n <= 0) return;
    pending_checks& checks = pending_checks::mine();
    checks.before_wait();
    copy_to_host(dst, src, n);
    checks.after_wait();
  }

  /// Queues a check that the n indices at `index` are in [0, hi), without waiting (checks.hpp);
  /// `explain` throws the error this thread's next read reports if one is not. Where this thread
  /// has no flag (more threads than check_flags::capacity), explain runs at once, on the host.
  template <class I, class Explain>
  static void queue_index_check(const I* index, index_t n, index_t hi, Explain explain) {
    if (n <= 0) return;
    pending_checks& checks = pending_checks::mine();
    std::int32_t* flag = checks.flag();
    if (!flag) {
      explain();
      return;
    }
    thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), n,
                       cuda_kernel::flag_out_of_range<I>{index, hi, flag});
    checks.add(std::move(explain));
    if (checks.size() > pending_checks::max_pending) fence();  // as a read would: the indices kept alive go
  }

 private:
  template <class T>
  static void copy_to_host(T* dst, const T* src, index_t n) {
    device_cache::instance().count_host_read();
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    if (bytes > staging_piece_bytes()) {
      pinned_staging::instance().copy_to_host(dst, src, bytes);
      return;
    }
    const cudaStream_t stream = current_stream();
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (e != cudaSuccess)
      throw std::runtime_error("copy to host: cudaMemcpyAsync of " + std::to_string(bytes) +
                               " bytes failed: " + cudaGetErrorString(e));
#else
    if (bytes <= staging_piece_bytes()) {
      const auto first = thrust::device_pointer_cast(src);
      thrust::copy(first, first + n, dst);
      return;
    }
    std::vector<std::vector<unsigned char>> blocks(staging_ring, std::vector<unsigned char>(staging_piece_bytes()));
    staged_download(
        bytes, staging_piece_bytes(), staging_ring,
        [&](std::size_t offset, std::size_t length, std::size_t slot) {  // the device's copy
          std::memcpy(blocks[slot].data(), reinterpret_cast<const unsigned char*>(src) + offset, length);
        },
        [](std::size_t) {},
        [&](std::size_t offset, std::size_t length, std::size_t slot) {
          parallel_memcpy(reinterpret_cast<unsigned char*>(dst) + offset, blocks[slot].data(), length);
        });
#endif
  }


 public:
  /// Waits until the work queued on this thread's current stream has finished: before a device
  /// tensor made on its own stream is handed to another thread (stream.hpp). Then, as a read,
  /// throws the message of a failed index check (checks.hpp).
  static void fence() {
    pending_checks& checks = pending_checks::mine();
    checks.before_wait();
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    if (cudaError_t e = cudaStreamSynchronize(current_stream()); e != cudaSuccess)
      throw std::runtime_error(std::string("fx::synchronize<fx::cuda>: cudaStreamSynchronize failed: ") +
                               cudaGetErrorString(e));
#endif
    checks.after_wait();
  }
};

}  // namespace fluxion::detail
