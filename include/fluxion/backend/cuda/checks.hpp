// Index checks on fx::cuda that do not wait for the device.
//
// On the cpu, gather, take_along_axis, unsorted_segment_sum, nn::embedding and the sparse losses
// read their indices to check them before they compute. On a GPU that read is a wait: the host
// stops queueing until the device has caught up (stop 50: a fit step spent more time waiting than
// the bare step took). Here the check is a kernel instead, queued after the indices are made:
//
//   auto loss = fx::losses::sparse_softmax_cross_entropy(logits, labels);  // queues the check
//   opt.apply_gradients(tape.gradient(loss, vars), vars);  // skipped on the device if it failed
//   loss.item();  // throws "sparse_softmax_cross_entropy: labels[5] = 10 is not in [0, 10) (...)"
//
// Each thread that queues checks owns a flag in device memory, which a failing check sets. The
// next read from the device on that thread (item, to<cpu>, printing, fx::synchronize) queues the
// flag's copy to pinned host memory before it waits, so it costs no second wait; if the flag is
// set, that read throws the first failing check's own message (the cpu's, with where it was
// found), after reading that check's indices again. Until then:
// - the op reads a clamped index, never memory outside its operand (TensorFlow's GPU gather gives
//   zeros; fluxion's result is not seen, since the read that would show it throws);
// - the optimizers' device update (update.hpp) leaves every variable and slot as it was, so a
//   training loop that never reads keeps its last good weights.
// A thread with more than max_pending checks unread waits once, as a read would, so that the
// indices the checks keep alive do not pile up.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <thrust/device_malloc.h>
#include <thrust/device_ptr.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>

#include "../../core/config.hpp"
#include "stream.hpp"

namespace fluxion::detail {

/// The flags of the threads that queue checks, made at the first check: one 32-bit word each in
/// device memory, and its mirror in pinned host memory. Never freed: threads may end after main.
class check_flags {
 public:
  static constexpr int capacity = 1024;

  static check_flags& instance() {
    static check_flags* f = new check_flags;
    return *f;
  }
  /// A free slot, or -1 when every slot is taken (the caller then checks on the host).
  int take() {
    std::lock_guard<std::mutex> lk(m_mutex);
    if (m_free.empty()) return -1;
    const int s = m_free.back();
    m_free.pop_back();
    return s;
  }
  void give_back(int slot) noexcept {
    std::lock_guard<std::mutex> lk(m_mutex);
    m_free.push_back(slot);  // cannot throw: reserved for every slot
  }
  std::int32_t* device(int slot) const noexcept { return m_device + slot; }
  volatile std::int32_t* mirror(int slot) const noexcept { return m_mirror + slot; }

 private:
  check_flags() {
    m_device = thrust::device_malloc<std::int32_t>(capacity).get();
    thrust::fill_n(thrust::device, thrust::device_pointer_cast(m_device), capacity, 0);
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    void* pinned = nullptr;
    if (cudaError_t e = cudaMallocHost(&pinned, capacity * sizeof(std::int32_t)); e != cudaSuccess)
      throw std::runtime_error(std::string("fx::cuda index checks: cudaMallocHost failed: ") + cudaGetErrorString(e));
    m_mirror = static_cast<std::int32_t*>(pinned);
#else
    m_mirror = new std::int32_t[capacity];
#endif
    for (int s = 0; s < capacity; ++s) m_mirror[s] = 0;
    m_free.reserve(capacity);
    for (int s = capacity; s-- > 0;) m_free.push_back(s);
  }

  std::mutex m_mutex;
  std::vector<int> m_free;
  std::int32_t* m_device = nullptr;
  volatile std::int32_t* m_mirror = nullptr;
};

/// This thread's checks queued since its last read from the device.
class pending_checks {
 public:
  /// More unread checks than this make the thread wait once, as a read would.
  static constexpr std::size_t max_pending = 64;

  static pending_checks& mine() {
    thread_local pending_checks p;
    return p;
  }

  /// This thread's flag on the device, or nullptr when every slot is taken.
  std::int32_t* flag() {
    if (m_slot == -1) m_slot = check_flags::instance().take();
    if (m_slot == -1) m_slot = -2;  // none left: this thread checks on the host
    return m_slot >= 0 ? check_flags::instance().device(m_slot) : nullptr;
  }
  /// The flag for a kernel that must see whether a check before it failed, or nullptr when none
  /// is pending (then none has failed).
  const std::int32_t* flag_if_pending() const noexcept {
    return m_failures.empty() ? nullptr : check_flags::instance().device(m_slot);
  }

  /// A check was queued on the device (it sets flag() if it fails); `explain` throws its message.
  void add(std::function<void()> explain) { m_failures.push_back(std::move(explain)); }
  /// The checks queued since this thread's last read.
  std::size_t size() const noexcept { return m_failures.size(); }

  /// Before this thread waits for its stream: the flag's copy to its mirror, queued (no wait).
  void before_wait() noexcept {
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    if (m_failures.empty()) return;
    const auto& f = check_flags::instance();
    m_copied = cudaMemcpyAsync(const_cast<std::int32_t*>(f.mirror(m_slot)), f.device(m_slot), sizeof(std::int32_t),
                               cudaMemcpyDeviceToHost, current_stream()) == cudaSuccess;
#endif
  }

  /// After the wait: nothing if every pending check passed; otherwise the flag is cleared and the
  /// first failing check throws its message.
  void after_wait() {
    if (m_failures.empty()) return;
    const auto& f = check_flags::instance();
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
    std::int32_t failed = 1;  // a flag that could not be copied: ask every check
    if (m_copied) failed = *f.mirror(m_slot);
    m_copied = false;
#else
    const std::int32_t failed = *f.device(m_slot);  // Thrust's OpenMP backend: device memory is the host's
#endif
    std::vector<std::function<void()>> failures;
    failures.swap(m_failures);  // explaining reads the device again: nothing may be pending then
    if (!failed) return;
    thrust::fill_n(thrust::device, thrust::device_pointer_cast(f.device(m_slot)), 1, 0);
    for (auto& explain : failures) explain();  // the first failing check throws
    throw std::logic_error("fx::cuda: a device index check failed, but no check found the index again");
  }

  /// A thread that ends with checks unread drops them (nothing can throw now) and keeps its slot,
  /// whose flag may be set; a thread with none gives its clear slot back.
  ~pending_checks() {
    if (m_slot >= 0 && m_failures.empty()) check_flags::instance().give_back(m_slot);
  }

 private:
  pending_checks() = default;
  int m_slot = -1;  // -1: none taken yet; -2: none was free
#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA
  bool m_copied = false;  // before_wait queued the flag's copy
#endif
  std::vector<std::function<void()>> m_failures;
};

namespace cuda_kernel {
/// Sets *flag where an index is not in [0, hi). Every thread that finds one writes the same 1.
template <class I>
struct flag_out_of_range {
  const I* index;
  index_t hi;
  std::int32_t* flag;
  FLUXION_HOST_DEVICE void operator()(index_t i) const {
    const I v = index[i];
    if (v < 0 || static_cast<index_t>(v) >= hi) {
#if defined(__CUDA_ARCH__)
      *flag = 1;
#else
      __atomic_store_n(flag, 1, __ATOMIC_RELAXED);  // Thrust's OpenMP backend: threads of the host
#endif
    }
  }
};
}  // namespace cuda_kernel

}  // namespace fluxion::detail
