// Tests of the CPU thread pool: every task runs exactly once, results do not depend on the thread
// count, exceptions come back to the caller, and the oversubscription policy (nested regions and
// concurrent user threads run inline) holds without deadlock.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fluxion/backend/cpu/thread_pool.hpp"

namespace fx = fluxion;
using fx::index_t;

namespace {

constexpr int thread_counts[] = {1, 2, 3, 4};

// Restores the default thread count when a test case ends, so test cases do not depend on order.
struct thread_count_guard {
  int saved = fx::get_num_threads();
  ~thread_count_guard() { fx::set_num_threads(saved); }
};

// A float sum whose value depends on the order of additions: a fixed chunk per task, partial sums
// combined in task order. Any difference in *what* a task computes would change the bits.
float chunked_sum(const std::vector<float>& values, index_t chunk) {
  const index_t n = static_cast<index_t>(values.size());
  const index_t n_tasks = (n + chunk - 1) / chunk;
  std::vector<float> partial(static_cast<std::size_t>(n_tasks), 0.f);
  fx::detail::parallel_for(n_tasks, [&](index_t task) {
    float s = 0.f;
    for (index_t i = task * chunk; i < std::min(n, (task + 1) * chunk); ++i) s += values[static_cast<std::size_t>(i)];
    partial[static_cast<std::size_t>(task)] = s;
  });
  float total = 0.f;
  for (float p : partial) total += p;
  return total;
}

}  // namespace

TEST_CASE("thread_pool: every task runs exactly once") {
  thread_count_guard guard;
  for (int threads : thread_counts) {
    CAPTURE(threads);
    fx::set_num_threads(threads);
    CHECK(fx::get_num_threads() == threads);
    for (index_t n_tasks : {index_t{1}, index_t{2}, index_t{7}, index_t{1000}}) {
      CAPTURE(n_tasks);
      std::vector<std::atomic<int>> runs(static_cast<std::size_t>(n_tasks));
      fx::detail::parallel_for(n_tasks, [&](index_t t) { runs[static_cast<std::size_t>(t)].fetch_add(1); });
      int wrong = 0;
      for (auto& r : runs) wrong += r.load() != 1;
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("thread_pool: an empty or negative task count runs nothing") {
  thread_count_guard guard;
  fx::set_num_threads(2);
  std::atomic<int> runs{0};
  fx::detail::parallel_for(0, [&](index_t) { ++runs; });
  fx::detail::parallel_for(-3, [&](index_t) { ++runs; });
  CHECK(runs.load() == 0);
}

TEST_CASE("thread_pool: results are bitwise identical for 1, 2, 3 and 4 threads") {
  thread_count_guard guard;
  std::vector<float> values(100003);
  std::uint32_t state = 12345;
  for (float& v : values) {  // values of mixed magnitude, so the summation order matters
    state = state * 1664525u + 1013904223u;
    v = static_cast<float>(state >> 8) * (state & 1 ? 1e-3f : 1e3f);
  }
  // The reference runs the same chunking without the pool.
  const index_t chunk = 1000;
  float reference = 0.f;
  for (std::size_t begin = 0; begin < values.size(); begin += chunk) {
    float s = 0.f;
    for (std::size_t i = begin; i < std::min(values.size(), begin + chunk); ++i) s += values[i];
    reference += s;
  }
  for (int threads : thread_counts) {
    CAPTURE(threads);
    fx::set_num_threads(threads);
    for (int repeat = 0; repeat < 3; ++repeat) CHECK(chunked_sum(values, chunk) == reference);
  }
}

TEST_CASE("thread_pool: an exception in a task is rethrown, and the pool stays usable") {
  thread_count_guard guard;
  for (int threads : thread_counts) {
    CAPTURE(threads);
    fx::set_num_threads(threads);
    for (int round = 0; round < 3; ++round) {
      CHECK_THROWS_WITH_AS(fx::detail::parallel_for(64,
                                                    [&](index_t t) {
                                                      if (t == 17) throw std::runtime_error("task 17 failed");
                                                    }),
                           "task 17 failed", std::runtime_error);
      std::vector<std::atomic<int>> runs(100);
      fx::detail::parallel_for(100, [&](index_t t) { runs[static_cast<std::size_t>(t)].fetch_add(1); });
      int wrong = 0;
      for (auto& r : runs) wrong += r.load() != 1;
      CHECK(wrong == 0);
    }
  }
}

// thread_pool.hpp promises that after an exception "the remaining tasks still finish". The pooled
// path keeps that promise; the inline path (1 thread, nested or contended regions) stops at the
TEST_CASE("thread_pool: after an exception the remaining tasks still finish") {
  thread_count_guard guard;
  for (int threads : thread_counts) {
    CAPTURE(threads);
    fx::set_num_threads(threads);
    std::atomic<int> runs{0};
    CHECK_THROWS_AS(fx::detail::parallel_for(64,
                                             [&](index_t t) {
                                               ++runs;
                                               if (t == 5) throw std::runtime_error("task 5 failed");
                                             }),
                    std::runtime_error);
    CHECK(runs.load() == 64);
  }
}

TEST_CASE("thread_pool: a nested parallel_for runs inline on the task's thread") {
  thread_count_guard guard;
  for (int threads : thread_counts) {
    CAPTURE(threads);
    fx::set_num_threads(threads);
    const index_t outer = 16, inner = 32;
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(outer * inner));
    std::atomic<int> off_thread{0};
    fx::detail::parallel_for(outer, [&](index_t o) {
      const auto owner = std::this_thread::get_id();
      fx::detail::parallel_for(inner, [&](index_t i) {
        off_thread += std::this_thread::get_id() != owner;
        runs[static_cast<std::size_t>(o * inner + i)].fetch_add(1);
      });
    });
    int wrong = 0;
    for (auto& r : runs) wrong += r.load() != 1;
    CHECK(wrong == 0);
    CHECK(off_thread.load() == 0);
  }
}

TEST_CASE("thread_pool: concurrent user threads both complete with correct results") {
  thread_count_guard guard;
  fx::set_num_threads(4);
  std::vector<float> values(20000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 97) * 0.5f;
  const float expected = [&] {
    fx::set_num_threads(1);
    float e = chunked_sum(values, 100);
    fx::set_num_threads(4);
    return e;
  }();

  std::atomic<int> busy{0}, max_busy{0};
  auto user = [&](int& mismatches) {
    for (int round = 0; round < 50; ++round) {
      if (chunked_sum(values, 100) != expected) ++mismatches;
      fx::detail::parallel_for(8, [&](index_t) {
        int now = ++busy;
        int seen = max_busy.load();
        while (now > seen && !max_busy.compare_exchange_weak(seen, now)) {
        }
        --busy;
      });
    }
  };
  int mismatches_a = 0, mismatches_b = 0;
  std::thread a(user, std::ref(mismatches_a)), b(user, std::ref(mismatches_b));
  a.join();
  b.join();
  CHECK(mismatches_a == 0);
  CHECK(mismatches_b == 0);
  // The pool's threads (4, the owner included) plus the other user thread running inline.
  CHECK(max_busy.load() <= 4 + 1);
}

TEST_CASE("thread_pool: a user thread that finds the pool busy runs its region inline") {
  thread_count_guard guard;
  fx::set_num_threads(3);
  std::mutex m;
  std::condition_variable cv;
  bool region_started = false, other_done = false, owner_timed_out = false;
  std::atomic<int> other_off_thread{0}, other_runs{0};

  std::thread owner([&] {
    fx::detail::parallel_for(4, [&](index_t t) {
      if (t != 0) return;
      // Keep the region open until the other user thread's parallel_for has finished. If that
      // call waited for the pool instead of running inline, this wait times out.
      std::unique_lock<std::mutex> lk(m);
      region_started = true;
      cv.notify_all();
      owner_timed_out = !cv.wait_for(lk, std::chrono::seconds(10), [&] { return other_done; });
    });
  });
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return region_started; });
  }
  const auto me = std::this_thread::get_id();
  fx::detail::parallel_for(16, [&](index_t) {
    ++other_runs;
    other_off_thread += std::this_thread::get_id() != me;
  });
  {
    std::lock_guard<std::mutex> lk(m);
    other_done = true;
  }
  cv.notify_all();
  owner.join();
  CHECK_FALSE(owner_timed_out);
  CHECK(other_runs.load() == 16);
  CHECK(other_off_thread.load() == 0);
}

TEST_CASE("thread_pool: set_num_threads rejects counts below 1") {
  thread_count_guard guard;
  fx::set_num_threads(2);
  CHECK_THROWS_AS(fx::set_num_threads(0), fx::invalid_argument);
  CHECK_THROWS_WITH(fx::set_num_threads(-1), doctest::Contains("set_num_threads"));
  CHECK_THROWS_AS(fx::set_num_threads(-1), fx::error);
  CHECK(fx::get_num_threads() == 2);
}

TEST_CASE("thread_pool: set_num_threads inside a task is an error, not a deadlock") {
  fluxion::set_num_threads(2);
  CHECK_THROWS_AS(fluxion::detail::parallel_for(2, [](fluxion::index_t) { fluxion::set_num_threads(1); }),
                  fluxion::invalid_argument);
  CHECK(fluxion::get_num_threads() == 2);
}

TEST_CASE("thread_pool: the spin time is settable, checked, and any value gives the same results") {
  thread_count_guard guard;
  const auto saved = fx::get_thread_spin_time();
  CHECK(saved == std::chrono::milliseconds(2));
  auto message = [](std::chrono::microseconds t) {
    try {
      fx::set_thread_spin_time(t);
    } catch (const fx::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  CHECK(message(std::chrono::microseconds(-1)) == "set_thread_spin_time: -1 us is not in [0, 1000000] us");
  CHECK(message(std::chrono::seconds(2)) == "set_thread_spin_time: 2000000 us is not in [0, 1000000] us");
  CHECK(fx::get_thread_spin_time() == saved);  // a rejected value changes nothing
  std::vector<float> values(100003);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = 1.f / static_cast<float>(i + 1);
  fx::set_num_threads(1);
  const float reference = chunked_sum(values, 1000);
  fx::set_num_threads(2);
  for (auto t : {std::chrono::microseconds(0), std::chrono::microseconds(100), std::chrono::microseconds(5000)}) {
    fx::set_thread_spin_time(t);
    CHECK(fx::get_thread_spin_time() == t);
    for (int region = 0; region < 20; ++region) {  // back-to-back regions, and regions after a pause
      if (region % 5 == 4) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      CHECK(chunked_sum(values, 1000) == reference);
    }
  }
  fx::set_thread_spin_time(saved);
}

namespace {

/// An idle task that counts its runs, notes the threads that ran it, and can be made to take a while.
struct counting_idle_task final : fx::detail::thread_pool::idle_task {
  std::atomic<int> runs{0}, inside{0}, nested_inline{0};
  std::atomic<bool> slow{false};
  std::mutex mutex;
  std::vector<std::thread::id> threads;
  bool run_once() noexcept override {
    ++inside;
    {
      std::lock_guard lk(mutex);
      threads.push_back(std::this_thread::get_id());
    }
    // A parallel_for inside idle work runs inline on this thread, as inside a task.
    std::thread::id ran_on;
    fx::detail::parallel_for(2, [&](index_t) { ran_on = std::this_thread::get_id(); });
    if (ran_on == std::this_thread::get_id()) ++nested_inline;
    if (slow) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    --inside;
    return ++runs % 3 != 0;  // "did work" two times in three
  }
};

}  // namespace

TEST_CASE("thread_pool: idle workers run registered idle tasks between regions, never the caller") {
  thread_count_guard guard;
  fx::set_num_threads(2);
  std::vector<float> values(100003, 1.f);
  const float reference = chunked_sum(values, 1000);
  counting_idle_task task;
  auto& pool = fx::detail::thread_pool::instance();
  pool.add_idle_task(&task);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (task.runs < 20 && std::chrono::steady_clock::now() < deadline) {
    CHECK(chunked_sum(values, 1000) == reference);  // regions still run, with the same results
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the worker spins meanwhile
  }
  CHECK(task.runs >= 20);
  {
    std::lock_guard lk(task.mutex);
    CHECK(std::find(task.threads.begin(), task.threads.end(), std::this_thread::get_id()) == task.threads.end());
  }
  CHECK(task.nested_inline == task.runs);

  // remove_idle_task returns only once no worker is inside run_once.
  task.slow = true;
  const int before = task.runs;
  while (task.inside == 0 && task.runs == before && std::chrono::steady_clock::now() < deadline + std::chrono::seconds(5)) {
    chunked_sum(values, 1000);
    std::this_thread::yield();
  }
  pool.remove_idle_task(&task);
  CHECK(task.inside == 0);
  const int after = task.runs;
  for (int i = 0; i < 5; ++i) {
    chunked_sum(values, 1000);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  CHECK(task.runs == after);  // never run again once removed
}

TEST_CASE("thread_pool: with one thread, or no spin time, idle tasks are not run") {
  thread_count_guard guard;
  const auto saved = fx::get_thread_spin_time();
  std::vector<float> values(100003, 1.f);
  counting_idle_task task;
  auto& pool = fx::detail::thread_pool::instance();
  fx::set_num_threads(1);
  pool.add_idle_task(&task);
  for (int i = 0; i < 20; ++i) chunked_sum(values, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(task.runs == 0);
  fx::set_num_threads(2);
  fx::set_thread_spin_time(std::chrono::microseconds(0));
  for (int i = 0; i < 20; ++i) chunked_sum(values, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(task.runs == 0);
  pool.remove_idle_task(&task);
  fx::set_thread_spin_time(saved);
}
