// Streams for fx::cuda: one per host thread.
//
// Every host thread that queues work on the GPU gets a CUDA stream of its own, made on its first
// use and destroyed when the thread ends. That thread's kernels, cuBLAS and cuDNN calls and copies
// all queue on it, so one thread's work stays in the order it was queued, while two threads' work
// runs side by side: a prefetching thread's upload of the next batch beside the training step.
// They are blocking streams: CUDA's legacy default stream (stream 0, where a kernel of the
// program's own goes unless it names a stream) waits for them and they wait for it, so work outside
// fluxion stays ordered with fluxion's.
//
// A device tensor made on one thread and read on another must be finished first: the thread that
// made it calls fx::synchronize<fx::cuda>() before it hands the tensor over (dataset::prefetch and
// prefetch_to do this for the elements they hand to the consumer). Reading values back (item,
// to<cpu>, printing) waits for this thread's stream only.
//
// The caching allocator (memory.hpp) remembers the stream on which each free block may still be
// used, and orders reuse on another stream after that work with a CUDA event (no host wait). Under
// Thrust's OpenMP system (the tests without a GPU) there are no streams: each thread still gets a
// stream id, so that this bookkeeping runs, and is tested, as on a GPU; the waits only count.
#pragma once

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <thrust/detail/config.h>
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
#include <cuda_runtime.h>
#define FLUXION_CUDA_STREAMS 1
#else
#define FLUXION_CUDA_STREAMS 0
#endif

namespace fluxion::detail {

#if FLUXION_CUDA_STREAMS
using stream_handle = cudaStream_t;
using stream_event = cudaEvent_t;
#else
using stream_handle = std::uintptr_t;  // no streams: the id stands for one
using stream_event = std::uintptr_t;
#endif

/// The live threads' streams by id (ids start at 1 and are never reused; 0 is the legacy default
/// stream). A stream leaves it, finished, before it is destroyed, so one that is found here may be
/// used while the lock is held.
class stream_registry {
 public:
  static stream_registry& instance() {
    static stream_registry* r = new stream_registry;  // never destroyed: threads may end after main
    return *r;
  }

  std::uint32_t add(stream_handle h) {
    std::lock_guard<std::mutex> lk(m_mutex);
    const std::uint32_t id = m_next++;
    m_live.emplace_back(id, h);
    return id;
  }

  void remove(std::uint32_t id) noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    for (auto& entry : m_live)
      if (entry.first == id) {
        entry = m_live.back();
        m_live.pop_back();
        return;
      }
  }

  /// Records `e` on stream `id`, after everything queued there so far. False when that stream has
  /// ended (and so has all its work): there is nothing to wait for.
  bool record(std::uint32_t id, stream_event e) noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    for (const auto& entry : m_live)
      if (entry.first == id) {
#if FLUXION_CUDA_STREAMS
        return cudaEventRecord(e, entry.second) == cudaSuccess;
#else
        (void)e;
        return true;
#endif
      }
    return false;
  }

  bool alive(std::uint32_t id) noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    for (const auto& entry : m_live)
      if (entry.first == id) return true;
    return false;
  }

 private:
  stream_registry() = default;
  std::mutex m_mutex;
  std::vector<std::pair<std::uint32_t, stream_handle>> m_live;
  std::uint32_t m_next = 1;
};

/// This thread's stream id (0 before its first use and once the thread has begun to end), and
/// whether it has ended. Trivially destructible, so that they can be read while the thread's other
/// thread_local objects are destroyed.
inline thread_local std::uint32_t t_stream_id = 0;
inline thread_local bool t_stream_ended = false;

/// A thread's stream: made on its first use; when the thread ends, its work is waited for, it
/// leaves the registry and is destroyed.
struct thread_stream {
  stream_handle handle{};

  thread_stream() {
#if FLUXION_CUDA_STREAMS
    if (cudaError_t e = cudaStreamCreateWithFlags(&handle, cudaStreamDefault); e != cudaSuccess)
      throw std::runtime_error(std::string("fx::cuda: cudaStreamCreate failed for this thread's stream: ") +
                               cudaGetErrorString(e));
    t_stream_id = stream_registry::instance().add(handle);
#else
    t_stream_id = stream_registry::instance().add(0);
    handle = t_stream_id;
#endif
  }

  ~thread_stream() {
#if FLUXION_CUDA_STREAMS
    cudaStreamSynchronize(handle);  // errors ignored: the process may be tearing CUDA down
#endif
    stream_registry::instance().remove(t_stream_id);
    t_stream_id = 0;
    t_stream_ended = true;
#if FLUXION_CUDA_STREAMS
    cudaStreamDestroy(handle);
#endif
  }

  thread_stream(const thread_stream&) = delete;
  thread_stream& operator=(const thread_stream&) = delete;
};

/// The stream this thread queues its device work on. Once the thread's stream is gone (a
/// thread_local destructor that runs after it), the legacy default stream, which is ordered with
/// every stream.
inline stream_handle current_stream() {
  if (t_stream_ended) return stream_handle{};
  thread_local thread_stream s;
  return s.handle;
}

/// This thread's stream id, making the stream if the thread has none yet (0 once it has ended).
inline std::uint32_t current_stream_id() {
  current_stream();
  return t_stream_id;
}

}  // namespace fluxion::detail
