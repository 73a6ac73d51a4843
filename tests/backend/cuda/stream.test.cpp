// Streams on fx::cuda (backend/cuda/stream.hpp): the shared stream, a thread's own stream in an
// fx::own_stream scope, and the caching allocator's bookkeeping of which stream may still use a
// free block. Under Thrust's OpenMP system there are no streams, but each stream has an id and the
// allocator decides and counts its waits exactly as on a GPU, which is what these tests check;
// scripts/run-gpu-tests.sh runs them on one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;

std::int64_t stream_waits() { return fx::memory::stats<fx::cuda>().stream_waits; }
std::int64_t system_allocations() { return fx::memory::stats<fx::cuda>().system_allocations; }

/// Uploads x on this thread's current stream and checks that a cached block served it, with no
/// stream wait.
template <class T>
void check_reused_at_once(const fx::tensor<T>& x) {
  const auto waits = stream_waits();
  const auto mallocs = system_allocations();
  {
    auto g = fx::to<fx::cuda>(x);
    CHECK(g.to_vector() == x.to_vector());
  }
  CHECK(stream_waits() == waits);
  CHECK(system_allocations() == mallocs);
}

/// Whether got equals want within float rounding (the device's sin is not the cpu's SIMD one).
bool close(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-5f * (1.f + std::abs(want[i]))) return false;
  return true;
}

}  // namespace

TEST_CASE("cuda streams: threads share one stream; fx::own_stream gives a thread its own, which ends with the thread") {
  CHECK(fx::detail::current_stream_id() == fx::detail::shared_stream_id);
  std::uint32_t theirs_default = 0, theirs_own = 0, theirs_nested = 0, theirs_after = 0;
  std::thread other([&] {
    theirs_default = fx::detail::current_stream_id();
    {
      fx::own_stream mine;
      theirs_own = fx::detail::current_stream_id();
      {
        fx::own_stream again;  // scopes nest: the same stream
        theirs_nested = fx::detail::current_stream_id();
      }
      CHECK(fx::detail::current_stream_id() == theirs_own);
    }
    theirs_after = fx::detail::current_stream_id();
    CHECK(fx::detail::stream_registry::instance().alive(theirs_own));  // kept until the thread ends
  });
  other.join();
  CHECK(theirs_default == fx::detail::shared_stream_id);
  CHECK(theirs_own != fx::detail::shared_stream_id);
  CHECK(theirs_nested == theirs_own);
  CHECK(theirs_after == fx::detail::shared_stream_id);
  CHECK(!fx::detail::stream_registry::instance().alive(theirs_own));  // gone with its thread
  std::uint32_t second = 0;
  std::thread another([&] {
    fx::own_stream mine;
    second = fx::detail::current_stream_id();
  });
  another.join();
  CHECK(second != theirs_own);  // ids are never reused
  CHECK(fx::detail::stream_registry::instance().alive(fx::detail::shared_stream_id));
}

TEST_CASE("cuda memory: threads on the shared stream reuse each other's blocks at once") {
  fx::memory::empty_cache<fx::cuda>();
  const auto x = filled<float>({2468}, 4);
  { auto g = fx::to<fx::cuda>(x); }
  const auto waits = stream_waits();
  const auto mallocs = system_allocations();
  std::vector<float> seen;
  std::thread other([&] { seen = fx::to<fx::cuda>(x).to_vector(); });
  other.join();
  CHECK(seen == x.to_vector());
  CHECK(stream_waits() == waits);  // one stream: the order the host queued the work in is enough
  CHECK(system_allocations() == mallocs);
}

TEST_CASE("cuda memory: a block is reused at once on the stream that freed it, and after one queued wait on another") {
  fx::memory::empty_cache<fx::cuda>();
  const auto x = filled<float>({12345}, 3);
  { auto g = fx::to<fx::cuda>(x); }  // made and freed on the shared stream
  check_reused_at_once(x);
  const auto waits = stream_waits();
  const auto mallocs = system_allocations();
  std::vector<float> seen;
  std::thread other([&] {
    fx::own_stream mine;
    seen = fx::to<fx::cuda>(x).to_vector();
  });
  other.join();
  CHECK(seen == x.to_vector());
  CHECK(stream_waits() == waits + 1);  // its own stream: waits for the shared stream's work on the block
  CHECK(system_allocations() == mallocs);
}

TEST_CASE("cuda memory: a buffer made on a thread's own stream, handed over and freed on the shared stream") {
  // The maker allocates two buffers on its own stream, finishes its work on them and hands them
  // over, then waits until the receiver has freed them before it allocates again.
  fx::memory::empty_cache<fx::cuda>();
  const auto x = filled<float>({7777}, 5);
  std::promise<std::vector<fx::tensor<float, fx::cuda>>> handed;
  std::promise<void> freed;
  std::int64_t waits_before_maker = 0, waits_after_maker = 0;
  std::vector<float> seen;
  std::thread maker([&] {
    fx::own_stream mine;
    std::vector<fx::tensor<float, fx::cuda>> made{fx::to<fx::cuda>(x), fx::to<fx::cuda>(x * 2.f)};
    fx::synchronize<fx::cuda>();  // finished before another thread uses them
    handed.set_value(std::move(made));
    freed.get_future().wait();
    waits_before_maker = stream_waits();
    seen = fx::to<fx::cuda>(x).to_vector();  // takes a block the receiver freed, after its event
    waits_after_maker = stream_waits();
  });
  auto got = handed.get_future().get();
  CHECK(got[1].to_vector() == fx::tensor<float>(x * 2.f).to_vector());
  const auto mallocs = system_allocations();
  const auto waits = stream_waits();
  got[0] = fx::tensor<float, fx::cuda>();  // freed here, made there: tagged with this stream and an event
  {
    auto mine = fx::to<fx::cuda>(x);  // this stream takes it back at once
    CHECK(mine.to_vector() == x.to_vector());
  }
  CHECK(stream_waits() == waits);
  got.clear();  // the second buffer, freed here too
  freed.set_value();
  maker.join();
  CHECK(seen == x.to_vector());
  CHECK(waits_after_maker == waits_before_maker + 1);  // the maker waited for this stream's event
  CHECK(system_allocations() == mallocs);              // every buffer came from the cache
}

TEST_CASE("cuda memory: the blocks freed on a thread's own stream are reused at once by any stream once the thread has ended") {
  fx::memory::empty_cache<fx::cuda>();
  const auto x = filled<double>({4321}, 9);
  std::thread gone([&] {
    fx::own_stream mine;
    auto g = fx::to<fx::cuda>(x * 3.0);
  });  // its stream finished and ended with it
  gone.join();
  check_reused_at_once(x);
}

TEST_CASE("cuda streams: fx::synchronize waits for this thread's work; on the cpu it has nothing to wait for") {
  auto g = fx::to<fx::cuda>(filled<float>({1000}, 1));
  fx::tensor<float, fx::cuda> h = g * 2.f + 1.f;
  fx::synchronize<fx::cuda>();
  fx::synchronize<fx::cpu>();
  CHECK(h.to_vector() == fx::tensor<float>(fx::to<fx::cpu>(g) * 2.f + 1.f).to_vector());
}

TEST_CASE("cuda streams: threads computing at once, on their own streams and the shared one, get the cpu's results from one cache") {
  // Four threads (two on streams of their own) allocate and free buffers of the same few size
  // classes at once, and hand some results to this thread, which frees them: the cache's
  // bookkeeping under contention.
  fx::memory::empty_cache<fx::cuda>();
  constexpr int threads = 4, rounds = 60;
  const auto mallocs = system_allocations();
  std::mutex handed_mutex;
  std::vector<std::pair<fx::tensor<float, fx::cuda>, std::vector<float>>> handed;
  std::vector<int> wrong(threads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::optional<fx::own_stream> mine;
      if (t % 2) mine.emplace();
      for (int r = 0; r < rounds; ++r) {
        const fx::index_t n = 500 + 250 * ((t + r) % 3);
        const auto a = filled<float>({n}, 100 * t + r), b = filled<float>({n}, 100 * t + r + 1);
        fx::tensor<float, fx::cuda> ga = fx::to<fx::cuda>(a), gb = fx::to<fx::cuda>(b);
        fx::tensor<float, fx::cuda> y = ga * gb + fx::sin(ga);
        const std::vector<float> want = fx::tensor<float>(a * b + fx::sin(a)).to_vector();
        if (!close(y.to_vector(), want)) ++wrong[static_cast<std::size_t>(t)];
        if (r % 5 == 0) {
          fx::synchronize<fx::cuda>();
          std::lock_guard<std::mutex> lk(handed_mutex);
          handed.emplace_back(std::move(y), want);
        }
      }
    });
  for (auto& w : workers) w.join();
  for (int t = 0; t < threads; ++t) CHECK(wrong[static_cast<std::size_t>(t)] == 0);
  REQUIRE(handed.size() == std::size_t(threads * rounds / 5));
  for (const auto& [got, want] : handed) CHECK(close(got.to_vector(), want));
  handed.clear();  // freed here, made on threads that have ended
  // Each thread holds at most three buffers of one class at a time (a, b, y), and the buffers
  // handed over stay live: far fewer system allocations than the 3 * 240 requests.
  CHECK(system_allocations() - mallocs <= 3 * threads * 3 + threads * rounds / 5);
}
