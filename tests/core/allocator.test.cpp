#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include <fluxion/tensor.hpp>

namespace fx = fluxion;

TEST_CASE("allocator: size classes waste at most 12.5%") {
  for (std::size_t b : {1ul, 100ul, 129ul, 1000ul, 4097ul, 1ul << 20, (1ul << 20) + 1, 123456789ul}) {
    int idx;
    const std::size_t c = fx::detail::size_class(b, idx);
    CHECK(c >= b);
    CHECK(static_cast<double>(c) <= std::max(128.0, 1.125 * static_cast<double>(b)));
    CHECK(idx >= 0);
    CHECK(idx < fx::detail::n_size_classes);
  }
}

TEST_CASE("allocator: freed buffers are reused, so steady state makes no system allocations") {
  fx::tensor<float> a(fx::shape{1000});
  {
    fx::tensor<float> warm = a * 2.f + 1.f;  // the size class is now in the cache once freed
  }
  const auto before = fx::memory::stats().system_allocations;
  for (int i = 0; i < 100; ++i) {
    fx::tensor<float> t = a * 2.f + 1.f;
  }
  CHECK(fx::memory::stats().system_allocations == before);
}

TEST_CASE("allocator: bytes in use track live tensors, across threads") {
  const auto before = fx::memory::stats();
  {
    fx::tensor<double> t(fx::shape{1 << 16});
    CHECK(fx::memory::stats().bytes_in_use >= before.bytes_in_use + (1 << 16) * 8);
    CHECK(fx::memory::stats().buffers_in_use == before.buffers_in_use + 1);
  }
  CHECK(fx::memory::stats().bytes_in_use == before.bytes_in_use);
  fx::tensor<float> moved;
  std::thread th([&] { moved = fx::tensor<float>(fx::shape{4096}); });
  th.join();
  CHECK(moved.size() == 4096);
  moved = fx::tensor<float>();  // freed on this thread, allocated on another: still balanced
  CHECK(fx::memory::stats().buffers_in_use == before.buffers_in_use);
}

TEST_CASE("allocator: buffers made on one thread and freed on another are reused, not hoarded") {
  // A producer thread makes buffers that this thread frees, as a prefetched batch. This thread's
  // cache keeps 64 of a size class and passes the rest to the shared pool, where the producer's
  // next requests find them: after two rounds, no request reaches the system, and what is cached
  // stays bounded.
  constexpr int rounds = 6, per_round = 100;
  constexpr fx::index_t n = 123457;  // a size class nothing else in this test program uses
  auto produce = [&](std::vector<fx::tensor<float>>& out) {
    std::thread producer([&] {
      for (int i = 0; i < per_round; ++i) out.emplace_back(fx::shape{n});
    });
    producer.join();
  };
  std::vector<std::int64_t> system, cached;
  for (int r = 0; r < rounds; ++r) {
    std::vector<fx::tensor<float>> batch;
    const auto before = fx::memory::stats().system_allocations;
    produce(batch);
    system.push_back(fx::memory::stats().system_allocations - before);
    batch.clear();  // freed here
    cached.push_back(fx::memory::stats().cached_bytes);
  }
  // Round 0 asks the system for all; this thread keeps 64 and shares 36. Round 1 takes the 36 and
  // asks for 64 more; from then on this thread's share is full and every buffer comes back.
  const auto local = static_cast<std::int64_t>(fx::detail::host_cache::local_buffers_per_class);
  CHECK(system[0] == per_round);
  CHECK(system[1] == local);
  for (int r = 2; r < rounds; ++r) {
    CHECK(system[static_cast<std::size_t>(r)] == 0);
    CHECK(cached[static_cast<std::size_t>(r)] == cached[1]);
  }
  fx::memory::empty_cache();  // this thread's cache and the shared pool
  CHECK(fx::memory::stats().cached_bytes <= cached[1] - (per_round + local) * n * 4);
}

/// The bytes a tensor buffer of `bytes` holds: its size class, header included.
std::int64_t held(std::int64_t bytes) {
  int idx;
  return static_cast<std::int64_t>(fx::detail::size_class(static_cast<std::size_t>(bytes) + fx::buffer_alignment, idx));
}

TEST_CASE("memory_stats: the peak of bytes in use, against known allocations, and reset_peak") {
  constexpr std::int64_t mb = 1 << 20;
  fx::memory::reset_peak();
  const auto start = fx::memory_stats();
  CHECK(start.peak_bytes_in_use == start.bytes_in_use);
  {
    fx::tensor<float> a(fx::shape{mb / 4});            // 1 MiB
    fx::tensor<double> b(fx::shape{3 * mb / 2 / 8});   // 1.5 MiB
    CHECK(fx::memory_stats().bytes_in_use - start.bytes_in_use == held(mb) + held(3 * mb / 2));
  }
  const auto after = fx::memory_stats();
  CHECK(after.bytes_in_use == start.bytes_in_use);
  CHECK(after.peak_bytes_in_use - start.bytes_in_use == held(mb) + held(3 * mb / 2));  // both were live at once
  CHECK(after.cached_bytes >= held(mb) + held(3 * mb / 2));                             // and are now cached
  // reset_peak restarts from what is in use now; a smaller pattern then peaks lower.
  fx::memory::reset_peak();
  CHECK(fx::memory_stats().peak_bytes_in_use == after.bytes_in_use);
  for (int i = 0; i < 3; ++i) fx::tensor<float> t(fx::shape{mb / 4});  // one at a time: 1 MiB
  CHECK(fx::memory_stats().peak_bytes_in_use - after.bytes_in_use == held(mb));
  // A buffer made on another thread and freed here counts in the peak and balances out.
  fx::memory::reset_peak();
  fx::tensor<float> moved;
  std::thread th([&] { moved = fx::tensor<float>(fx::shape{mb / 2}); });  // 2 MiB
  th.join();
  CHECK(fx::memory_stats().peak_bytes_in_use - after.bytes_in_use == held(2 * mb));
  moved = fx::tensor<float>();
  CHECK(fx::memory_stats().bytes_in_use == after.bytes_in_use);
}

TEST_CASE("memory_stats: a fused statement's peak is its output; a chain of statements holds its temporaries") {
  constexpr fx::index_t n = 1 << 18;  // 1 MiB of float
  fx::tensor<float> a(fx::shape{n}), b(fx::shape{n});
  fx::memory::reset_peak();
  const auto base = fx::memory_stats().bytes_in_use;
  { fx::tensor<float> r = fx::sin(a) * b + a * 2.f - fx::exp(b); }
  CHECK(fx::memory_stats().peak_bytes_in_use - base == held(n * 4));
  fx::memory::reset_peak();
  {
    fx::tensor<float> t1 = fx::sin(a);
    fx::tensor<float> t2 = t1 * b;
    fx::tensor<float> t3 = t2 + a;
  }
  CHECK(fx::memory_stats().peak_bytes_in_use - base == 3 * held(n * 4));
}
