// Streams for fx::cuda: one shared stream by default, and a stream of its own for any host thread
// that asks for one.
//
// By default every thread queues its device work (kernels, cuBLAS, cuDNN, copies) on CUDA's legacy
// default stream, as PyTorch's threads share their device's default stream: work is ordered as the
// host issued it, so a tensor handed from one thread to another (under a mutex, through a queue)
// is safe to use at once, and a kernel of the program's own on stream 0 stays ordered with
// fluxion's.
//
// A thread that wants its work to run beside other threads' opens a scope:
//
//   {
//     fx::own_stream mine;                        // this thread's stream, made on first use
//     auto y = net(fx::to<fx::cuda>(batch));      // queued on it, beside the other threads' work
//   }                                             // later work on the shared stream waits for it
//
// Entering orders the thread's stream after the work queued on the shared stream so far, and
// leaving orders the shared stream after the thread's stream, both with CUDA events (the host does
// not wait). While a scope is open, a device tensor passed between its thread and another thread
// (either way) must first be finished by the thread that made it: fx::synchronize<fx::cuda>()
// waits for that thread's current stream. Likewise a tensor that the thread reads on its own stream
// while another thread holds it (a model's weights) must not be freed or updated in place by that
// other thread before the reader has synchronized or left its scope: readers are not tracked per
// buffer (PyTorch's record_stream case).
// dataset::prefetch and prefetch_to make their elements this way, on the producing thread's own
// stream (the upload of the next batch runs beside the training step), and wait for it before
// handing an element over. A thread's stream is destroyed, finished, when the thread ends.
//
// The caching allocator (memory.hpp) remembers the stream on which each free block may still be
// used, and orders reuse on another stream after that work with a CUDA event (no host wait). Under
// Thrust's OpenMP system (the tests without a GPU) there are no streams: the shared stream and each
// thread's stream still have ids, so that this bookkeeping runs, and is tested, as on a GPU; the
// waits only count.
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
inline stream_handle shared_stream_handle() noexcept { return cudaStreamLegacy; }
#else
using stream_handle = std::uintptr_t;  // no streams: the id stands for one
using stream_event = std::uintptr_t;
inline stream_handle shared_stream_handle() noexcept { return 1; }
#endif

/// Stream ids: 1 is the shared stream, then the threads' own.
inline constexpr std::uint32_t shared_stream_id = 1;

/// The live streams by id (ids are never reused). A thread's stream leaves it, finished, before it
/// is destroyed, so one that is found here may be used while the lock is held.
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
  stream_registry() : m_live{{shared_stream_id, shared_stream_handle()}} {}
  std::mutex m_mutex;
  std::vector<std::pair<std::uint32_t, stream_handle>> m_live;
  std::uint32_t m_next = shared_stream_id + 1;
};

/// Makes stream `waiter` wait, on the device, for everything queued on `first` so far.
inline void stream_wait(stream_handle waiter, stream_handle first, stream_event e) {
#if FLUXION_CUDA_STREAMS
  cudaError_t err = cudaEventRecord(e, first);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(waiter, e, 0);
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("fx::own_stream: ordering two streams failed: ") + cudaGetErrorString(err));
#else
  (void)waiter, (void)first, (void)e;
#endif
}

/// A thread's own stream (non-blocking: the shared stream is ordered with it only through the
/// events of fx::own_stream), made on its first use; when the thread ends, its work is waited
/// for, it leaves the registry and is destroyed.
struct thread_stream {
  stream_handle handle{};
  stream_event event{};  // for ordering it with the shared stream
  std::uint32_t id = 0;

  thread_stream() {
#if FLUXION_CUDA_STREAMS
    if (cudaError_t e = cudaStreamCreateWithFlags(&handle, cudaStreamNonBlocking); e != cudaSuccess)
      throw std::runtime_error(std::string("fx::own_stream: cudaStreamCreate failed: ") + cudaGetErrorString(e));
    if (cudaError_t e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming); e != cudaSuccess) {
      cudaStreamDestroy(handle);
      throw std::runtime_error(std::string("fx::own_stream: cudaEventCreate failed: ") + cudaGetErrorString(e));
    }
    id = stream_registry::instance().add(handle);
#else
    id = stream_registry::instance().add(0);
    handle = id;
#endif
  }

  ~thread_stream() {
#if FLUXION_CUDA_STREAMS
    cudaStreamSynchronize(handle);  // errors ignored: the process may be tearing CUDA down
#endif
    stream_registry::instance().remove(id);
#if FLUXION_CUDA_STREAMS
    cudaEventDestroy(event);
    cudaStreamDestroy(handle);
#endif
  }

  thread_stream(const thread_stream&) = delete;
  thread_stream& operator=(const thread_stream&) = delete;
};

/// How many fx::own_stream scopes this thread has open, and its stream while it lives (null before
/// its first scope and once the thread has begun to end). Trivially destructible, so that they can
/// be read while the thread's other thread_local objects are destroyed.
inline thread_local int t_own_depth = 0;
inline thread_local thread_stream* t_own = nullptr;

/// This thread's own stream, made on first use.
inline thread_stream& own_thread_stream() {
  struct holder {
    thread_stream s;
    holder() { t_own = &s; }
    ~holder() { t_own = nullptr; }
  };
  thread_local holder h;
  return h.s;
}

/// The stream this thread queues its device work on now: its own inside an fx::own_stream scope
/// (while the thread's stream lives), otherwise the shared one.
inline stream_handle current_stream() noexcept {
  return t_own_depth > 0 && t_own ? t_own->handle : shared_stream_handle();
}

/// The id of current_stream().
inline std::uint32_t current_stream_id() noexcept { return t_own_depth > 0 && t_own ? t_own->id : shared_stream_id; }

}  // namespace fluxion::detail

namespace fluxion {

/// While it lives, this thread queues its fx::cuda work on a stream of its own, beside other
/// threads' work (backend/cuda/stream.hpp). Scopes nest; the outermost orders the thread's stream
/// after the shared stream on entry and the shared stream after the thread's stream on exit.
class own_stream {
 public:
  own_stream() {
    detail::thread_stream& s = detail::own_thread_stream();
    if (detail::t_own_depth == 0) detail::stream_wait(s.handle, detail::shared_stream_handle(), s.event);
    ++detail::t_own_depth;
  }
  ~own_stream() {
    if (--detail::t_own_depth > 0 || !detail::t_own) return;
    try {
      detail::stream_wait(detail::shared_stream_handle(), detail::t_own->handle, detail::t_own->event);
    } catch (...) {  // a destructor must not throw: wait on the host instead
#if FLUXION_CUDA_STREAMS
      cudaStreamSynchronize(detail::t_own->handle);
#endif
    }
  }
  own_stream(const own_stream&) = delete;
  own_stream& operator=(const own_stream&) = delete;
};

}  // namespace fluxion
