// The host allocator out of memory (core/allocator.hpp): before it asks the system again, it gives
// back everything cached, its own thread's buffers and the shared pool's; if the system still
// refuses, std::bad_alloc, and nothing is counted as in use. This program (only) replaces the
// aligned allocation functions with ones that can be told to fail the next requests.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include <fluxion/tensor.hpp>

namespace {
std::atomic<int> failures_left{0};
}  // namespace

void* operator new(std::size_t n, std::align_val_t al, const std::nothrow_t&) noexcept {
  if (failures_left.load() > 0) {
    failures_left.fetch_sub(1);
    return nullptr;
  }
  const auto a = static_cast<std::size_t>(al);
  return std::aligned_alloc(a, (n + a - 1) / a * a);
}
void* operator new(std::size_t n, std::align_val_t al) {
  if (void* p = operator new(n, al, std::nothrow)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

namespace fx = fluxion;

TEST_CASE("allocator: out of memory, it frees this thread's cache and the shared pool, then asks again") {
  constexpr fx::index_t n = 77777;  // a size class of its own
  {  // 100 buffers freed: this thread keeps 64 of the class, the shared pool takes the other 36
    std::vector<fx::tensor<float>> buffers;
    for (int i = 0; i < 100; ++i) buffers.emplace_back(fx::shape{n});
  }
  REQUIRE(fx::detail::shared_host_pool::instance().cached_bytes() > 0);
  const auto before = fx::memory::stats();
  REQUIRE(before.cached_bytes > fx::detail::shared_host_pool::instance().cached_bytes());
  failures_left = 1;  // the next system allocation fails; the retry succeeds
  fx::tensor<float> other(fx::shape{3 * n + 5});  // another size class: a system allocation
  CHECK(failures_left == 0);
  CHECK(other.size() == 3 * n + 5);
  CHECK(fx::detail::shared_host_pool::instance().cached_bytes() == 0);
  CHECK(fx::memory::stats().cached_bytes == 0);
  CHECK(fx::memory::stats().buffers_in_use == before.buffers_in_use + 1);
}

TEST_CASE("allocator: when the retry fails too, std::bad_alloc, and nothing is counted in use") {
  const auto before = fx::memory::stats();
  failures_left = 2;
  CHECK_THROWS_AS(fx::tensor<float>(fx::shape{999983}), std::bad_alloc);
  CHECK(failures_left == 0);
  CHECK(fx::memory::stats().bytes_in_use == before.bytes_in_use);
  CHECK(fx::memory::stats().buffers_in_use == before.buffers_in_use);
  fx::tensor<float> after(fx::shape{999983});  // and the next request is served
  CHECK(after.size() == 999983);
}
