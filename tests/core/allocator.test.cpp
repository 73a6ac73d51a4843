#include <doctest/doctest.h>

#include <thread>

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
