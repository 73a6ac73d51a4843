// The CPU thread pool: header-only, started on first use, sized by fx::set_num_threads.
//
//   fx::set_num_threads(2);
//   fx::detail::parallel_for(n_tasks, [&](index_t task) { ... });
//
// Callers split work into tasks whose boundaries never depend on the thread count, so results are
// bitwise identical for any number of threads: threads only decide *who* runs a task, never *what*
// a task computes or the order partial results are combined in.
//
// Oversubscription policy: the pool runs one parallel region at a time. A parallel_for issued from
// inside a pool task, or from a user thread while another user thread owns the pool, runs its tasks
// inline on the calling thread. The machine therefore never has more busy fluxion threads than
// set_num_threads allows plus the user's own threads.
//
// Waiting policy: after a region, workers spin for fx::get_thread_spin_time() (2 ms by default),
// yielding the core to any other runnable thread after the first 50 us, before they block. Waking a
// blocked thread costs 50 us on bare metal and milliseconds on a busy VM, where a worker that went to
// sleep between back-to-back GEMMs could join the next one late or not at all (64 x 3136 x 1024 on
// 2 vCPUs: 0.63-0.82 of OpenBLAS's speed with a 100 us spin, 1.0 with 2 ms). OpenBLAS and OpenMP
// runtimes spin the same way. fx::set_thread_spin_time(0us) makes idle workers block at once.
//
// Idle work: while it spins between regions, a worker runs registered idle tasks instead (a
// dataset's prefetch registers its producer). A spinning worker holds a core that the scheduler
// will not hand to another thread of the process in time: with every core computing, a prefetch
// thread of its own got to build the next batch only once the training step blocked waiting for it
// (0.2 ms a step on 2 cores). The worker that would have spun builds it between the step's regions.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../../core/config.hpp"
#include "../../core/error.hpp"
#include "../../core/function_ref.hpp"
#include "../../core/prebuilt.hpp"
#include "detail/isa_notice.hpp"

namespace fluxion {
namespace detail {

class thread_pool {
 public:
  static thread_pool& instance();

  int num_threads() const noexcept { return m_num_threads.load(std::memory_order_relaxed); }

  std::chrono::microseconds spin_time() const noexcept {
    return std::chrono::microseconds(m_spin_microseconds.load(std::memory_order_relaxed));
  }

  void set_spin_time(std::chrono::microseconds t);

  void set_num_threads(int n);

  /// A task body, type-erased: one pointer and one call. The pool's machinery below is then
  /// compiled once per program instead of once per loop body (every fused statement has its own).
  using task_ref = function_ref<void(index_t)>;

  /// Runs body(task) for every task in [0, n_tasks). Exceptions thrown by a task are rethrown here
  /// (the first one wins); the remaining tasks still finish, so no work is left half-done.
  template <class Body>
  void parallel_for(index_t n_tasks, Body&& body) {
    if (n_tasks <= 0) return;
    if (n_tasks == 1) {
      body(index_t(0));
      return;
    }
    run(n_tasks, task_ref(body));
  }

  void run(index_t n_tasks, task_ref body);

  /// Work that idle workers run between parallel regions instead of spinning (see the file's
  /// comment). run_once() makes one bounded piece of progress and says whether it did anything; it
  /// must not throw, and runs with nested parallel_for calls inline, as a task does.
  struct idle_task {
    virtual bool run_once() noexcept = 0;

   protected:
    ~idle_task() = default;
  };

  void add_idle_task(idle_task* t);

  /// Unregisters `t`, and returns once no worker runs it any more.
  void remove_idle_task(idle_task* t);

  ~thread_pool();

 private:
  thread_pool();

  /// Marks this thread as running pool work: parallel_for calls on it run inline.
  struct inside_task_guard {
    inside_task_guard() { t_inside_task = true; }
    ~inside_task_guard() { t_inside_task = false; }
  };

  static void run_inline(index_t n_tasks, task_ref body);

  void work(task_ref job, index_t n);

  /// Spins for up to the spin time until done() holds; the caller then takes the lock and checks
  /// again, so spinning only saves the wake-up of a sleeping thread, never decides anything. After
  /// the first 50 us it yields the core now and then, so that a spinning worker never delays another
  /// runnable thread by more than a scheduler round. Every 64 rounds it offers the time to idle(); a
  /// round that did idle work starts the spin time again.
  template <class Done, class Idle>
  void spin_until(Done&& done, Idle&& idle) const {
    using clock = std::chrono::steady_clock;
    auto start = clock::now(), deadline = start + spin_time();
    constexpr auto polite_after = std::chrono::microseconds(50);
    for (int i = 1;; ++i) {
      if (done()) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      if (i % 64 == 0) {
        const auto now = clock::now();
        if (now >= deadline) return;
        if (idle()) {
          start = clock::now();
          deadline = start + spin_time();
          continue;
        }
        if (now - start > polite_after) std::this_thread::yield();
      }
    }
  }

  /// Runs one registered idle task's run_once() on this worker, one worker at a time, taking the
  /// tasks in turn. Whether it did anything.
  bool run_idle_task();

  void worker_loop();

  void start_workers(int n);

  void stop_workers();

  static inline thread_local bool t_inside_task = false;

  std::atomic<int> m_num_threads{1};
  std::atomic<std::int64_t> m_spin_microseconds{2000};
  std::mutex m_region;  // held by the user thread that owns the current parallel region
  std::mutex m_mutex;
  std::condition_variable m_wake, m_done;
  std::vector<std::thread> m_workers;
  task_ref m_job{};  // empty: no region is running
  index_t m_n_tasks = 0;
  std::atomic<index_t> m_next{0};
  std::atomic<index_t> m_remaining{0};
  std::exception_ptr m_error;
  std::atomic<std::uint64_t> m_generation{0};  // written under m_mutex; read without it while spinning
  std::atomic<int> m_active{0};
  std::atomic<bool> m_stop{false};
  std::mutex m_idle_mutex;
  std::condition_variable m_idle_done;
  std::vector<idle_task*> m_idle_tasks;
  std::atomic<std::size_t> m_idle_count{0};
  idle_task* m_idle_running = nullptr;  // the task a worker runs now, if any
  std::size_t m_idle_turn = 0;
};

#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE thread_pool& thread_pool::instance() {
  static thread_pool pool;
  return pool;
}

FLUXION_CORE_INLINE void thread_pool::set_spin_time(std::chrono::microseconds t) {
  if (t.count() < 0 || t > std::chrono::seconds(1))
    throw invalid_argument("set_thread_spin_time: " + std::to_string(t.count()) +
                           " us is not in [0, 1000000] us");
  m_spin_microseconds.store(t.count(), std::memory_order_relaxed);
}

FLUXION_CORE_INLINE void thread_pool::set_num_threads(int n) {
  if (n < 1) throw invalid_argument("set_num_threads: n = " + std::to_string(n) + " must be at least 1");
  if (t_inside_task)
    throw invalid_argument("set_num_threads: called from inside a parallel task; call it between parallel regions");
  std::lock_guard<std::mutex> region(m_region);  // wait until no region is running
  stop_workers();
  m_num_threads.store(n, std::memory_order_relaxed);
}

FLUXION_CORE_INLINE void thread_pool::run(index_t n_tasks, task_ref body) {
  int threads = num_threads();
  if (threads == 1 || t_inside_task) {
    run_inline(n_tasks, body);
    return;
  }
  std::unique_lock<std::mutex> region(m_region, std::try_to_lock);
  if (!region.owns_lock()) {  // another user thread owns the pool: do not oversubscribe
    run_inline(n_tasks, body);
    return;
  }
  start_workers(threads - 1);
  {
    std::lock_guard<std::mutex> lk(m_mutex);
    m_job = body;
    m_n_tasks = n_tasks;
    m_next.store(0, std::memory_order_relaxed);
    m_remaining.store(n_tasks, std::memory_order_relaxed);
    m_error = nullptr;
    ++m_generation;
  }
  m_wake.notify_all();
  work(body, n_tasks);
  spin_until([&] { return m_remaining.load(std::memory_order_acquire) == 0 && m_active.load(std::memory_order_acquire) == 0; },
             [] { return false; });
  {
    std::unique_lock<std::mutex> lk(m_mutex);
    // Wait for every task, and for every worker that joined to leave work(): `body` dies with our caller.
    m_done.wait(lk, [&] { return m_remaining.load(std::memory_order_acquire) == 0 && m_active == 0; });
    m_job = {};
  }
  if (m_error) std::rethrow_exception(m_error);
}

FLUXION_CORE_INLINE void thread_pool::add_idle_task(idle_task* t) {
  std::lock_guard<std::mutex> lk(m_idle_mutex);
  m_idle_tasks.push_back(t);
  m_idle_count.store(m_idle_tasks.size(), std::memory_order_release);
}

FLUXION_CORE_INLINE void thread_pool::remove_idle_task(idle_task* t) {
  std::unique_lock<std::mutex> lk(m_idle_mutex);
  std::erase(m_idle_tasks, t);
  m_idle_count.store(m_idle_tasks.size(), std::memory_order_release);
  m_idle_done.wait(lk, [&] { return m_idle_running != t; });
}

FLUXION_CORE_INLINE thread_pool::~thread_pool() { stop_workers(); }

FLUXION_CORE_INLINE thread_pool::thread_pool() {
  print_isa_notice_once();  // a program built without -march=native on a CPU with AVX2 or AVX-512
  unsigned hc = std::thread::hardware_concurrency();
  m_num_threads.store(hc == 0 ? 1 : static_cast<int>(hc));
}

FLUXION_CORE_INLINE void thread_pool::run_inline(index_t n_tasks, task_ref body) {
  std::exception_ptr first;
  for (index_t t = 0; t < n_tasks; ++t) {
    try {
      body(t);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

FLUXION_CORE_INLINE void thread_pool::work(task_ref job, index_t n) {
  inside_task_guard guard;
  for (;;) {
    index_t t = m_next.fetch_add(1, std::memory_order_relaxed);
    if (t >= n) break;
    try {
      job(t);
    } catch (...) {
      std::lock_guard<std::mutex> lk(m_mutex);
      if (!m_error) m_error = std::current_exception();
    }
    if (m_remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(m_mutex);
      m_done.notify_all();
    }
  }
}

FLUXION_CORE_INLINE bool thread_pool::run_idle_task() {
  if (m_idle_count.load(std::memory_order_acquire) == 0) return false;
  idle_task* t;
  {
    std::lock_guard<std::mutex> lk(m_idle_mutex);
    if (m_idle_running || m_idle_tasks.empty()) return false;
    t = m_idle_tasks[m_idle_turn++ % m_idle_tasks.size()];
    m_idle_running = t;
  }
  bool did;
  {
    inside_task_guard guard;
    did = t->run_once();
  }
  {
    std::lock_guard<std::mutex> lk(m_idle_mutex);
    m_idle_running = nullptr;
  }
  m_idle_done.notify_all();
  return did;
}

FLUXION_CORE_INLINE void thread_pool::worker_loop() {
  std::uint64_t seen = 0;
  for (;;) {
    task_ref job;
    index_t n;
    spin_until([&] { return m_stop.load(std::memory_order_relaxed) || m_generation.load(std::memory_order_acquire) != seen; },
               [&] { return run_idle_task(); });
    {
      std::unique_lock<std::mutex> lk(m_mutex);
      m_wake.wait(lk, [&] { return m_stop || (m_generation != seen && static_cast<bool>(m_job)); });
      if (m_stop) return;
      seen = m_generation;
      job = m_job;
      n = m_n_tasks;
      ++m_active;
    }
    work(job, n);
    {
      std::lock_guard<std::mutex> lk(m_mutex);
      --m_active;
    }
    m_done.notify_all();
  }
}

FLUXION_CORE_INLINE void thread_pool::start_workers(int n) {
  if (static_cast<int>(m_workers.size()) == n) return;
  stop_workers();
  m_stop = false;
  for (int i = 0; i < n; ++i) m_workers.emplace_back([this] { worker_loop(); });
}

FLUXION_CORE_INLINE void thread_pool::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(m_mutex);
    m_stop = true;
  }
  m_wake.notify_all();
  for (auto& w : m_workers) w.join();
  m_workers.clear();
  m_stop = false;
}
#endif  // FLUXION_CORE_DEFINITIONS

template <class Body>
void parallel_for(index_t n_tasks, Body&& body) {
  thread_pool::instance().parallel_for(n_tasks, std::forward<Body>(body));
}

}  // namespace detail

/// Sets how many threads fluxion's CPU kernels use (the calling thread included). Default: all cores.
inline void set_num_threads(int n) { detail::thread_pool::instance().set_num_threads(n); }
inline int get_num_threads() noexcept { return detail::thread_pool::instance().num_threads(); }

/// How long idle workers (and a caller waiting for a region's last tasks) spin before they block:
/// 2 ms by default, at most 1 s. Longer keeps back-to-back kernels from paying a thread wake-up
/// each (milliseconds on a busy VM); 0 frees the cores at once for programs that interleave fluxion
/// with other parallel work. Spinning yields the core to other runnable threads after 50 us.
inline void set_thread_spin_time(std::chrono::microseconds t) { detail::thread_pool::instance().set_spin_time(t); }
inline std::chrono::microseconds get_thread_spin_time() noexcept {
  return detail::thread_pool::instance().spin_time();
}

}  // namespace fluxion
