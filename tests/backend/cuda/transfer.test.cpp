// Moving tensors between fx::cpu and fx::cuda, reading cuda tensors from the host, and the cuda
// caching allocator's statistics.
#include <doctest/doctest.h>

#include <cstdint>
#include <sstream>
#include <thread>
#include <vector>

#include "fluxion/tensor/creation.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;

}  // namespace

TEST_CASE_TEMPLATE("cuda transfer: to<cpu>(to<cuda>(x)) equals x", T, float, double, std::int32_t, std::int64_t, bool) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{0}, fx::shape{1}, fx::shape{3, 0, 2}, fx::shape{7, 5, 3}, fx::shape{100003}}) {
    CAPTURE(fx::to_string(s));
    auto x = filled<T>(s, 42, -1000, 1000);
    fx::tensor<T, fx::cuda> g = fx::to<fx::cuda>(x);
    CHECK(g.shape() == s);
    CHECK(g.storage_id() != x.storage_id());
    fx::tensor<T> back = fx::to<fx::cpu>(g);
    CHECK(back.shape() == s);
    CHECK(back.to_vector() == x.to_vector());
    CHECK(g.to_vector() == x.to_vector());
  }
}

TEST_CASE_TEMPLATE("cuda transfer: copies longer than a staging piece go in pieces, every element in place", T, float,
                   double, std::int64_t, bool) {
  // Pieces of 1001 bytes split elements between pieces; 4 MiB pieces (the default) make the large
  // tensor 2 pieces and a part (bool's vector<bool> comparisons are too slow for it unoptimized).
  const std::size_t before = fx::detail::staging_piece_bytes();
  for (std::size_t piece : {std::size_t{1001}, std::size_t{4} << 20}) {
    fx::detail::staging_piece_bytes() = piece;
    const fx::index_t large = std::is_same_v<T, bool> ? 5 : static_cast<fx::index_t>((std::size_t{9} << 20) / sizeof(T)) + 3;
    for (fx::index_t n : {fx::index_t(1001 / sizeof(T)), fx::index_t(1001 / sizeof(T) + 1), fx::index_t(100003), large}) {
      CAPTURE(piece);
      CAPTURE(n);
      auto x = filled<T>(fx::shape{n}, 7, -1000, 1000);
      const auto reads = fx::memory::stats<fx::cuda>().host_reads;
      fx::tensor<T, fx::cuda> g = fx::to<fx::cuda>(x);
      const std::vector<T> back = g.to_vector();
      CHECK(fx::memory::stats<fx::cuda>().host_reads == reads + 1);  // one read, whatever the pieces
      CHECK(back == x.to_vector());
      // From an offset into the buffer to one into another: the pieces keep their places.
      if (n > 600) {
        fx::tensor<T> part = filled<T>(fx::shape{n}, 8, -1000, 1000);  // every element set: bool reads need it
        fx::detail::device_memory<fx::cuda>::to_host(part.mutable_data() + 100, g.data() + 300, n - 600);
        const std::vector<T> x_values = x.to_vector(), part_values = part.to_vector();
        const std::vector<T> expected(x_values.begin() + 300, x_values.end() - 300);
        CHECK(std::vector<T>(part_values.begin() + 100, part_values.begin() + 100 + (n - 600)) == expected);
        fx::tensor<T, fx::cuda> up = fx::to<fx::cuda>(filled<T>(fx::shape{n}, 9, -1000, 1000));
        fx::detail::device_memory<fx::cuda>::to_device(up.mutable_data() + 5, x.data() + 300, n - 600);
        const std::vector<T> up_values = up.to_vector();
        CHECK(std::vector<T>(up_values.begin() + 5, up_values.begin() + 5 + (n - 600)) == expected);
      }
    }
  }
  fx::detail::staging_piece_bytes() = before;
}

TEST_CASE("cuda transfer: moving to the device a tensor is on returns that tensor") {
  auto x = filled<float>({4, 4}, 1);
  auto same = fx::to<fx::cpu>(x);
  CHECK(same.storage_id() == x.storage_id());
  auto g = fx::to<fx::cuda>(x);
  const auto before = fx::memory::stats<fx::cuda>().allocations;
  auto g2 = fx::to<fx::cuda>(g);
  CHECK(g2.storage_id() == g.storage_id());
  CHECK(fx::memory::stats<fx::cuda>().allocations == before);
}

TEST_CASE("cuda transfer: expressions are evaluated on their own device, then copied") {
  auto x = fluxion_test::with_values<float>({2, 2}, {1, 2, 3, 4});
  fx::tensor<float, fx::cuda> up = fx::to<fx::cuda>(x * 2.f + 1.f);
  CHECK(up.to_vector() == std::vector<float>{3, 5, 7, 9});
  fx::tensor<float> down = fx::to<fx::cpu>(up * up);
  CHECK(down.to_vector() == std::vector<float>{9, 25, 49, 81});
  fx::tensor<std::int64_t> idx = fx::to<fx::cpu>(fx::argmax(up, 1));
  CHECK(idx.to_vector() == std::vector<std::int64_t>{1, 1});
  fx::tensor<float, fx::cuda> same_device = fx::to<fx::cuda>(up - 3.f);
  CHECK(same_device.to_vector() == std::vector<float>{0, 2, 4, 6});
}

TEST_CASE("cuda transfer: cuda tensors from braces and scalars, read element by element") {
  fx::tensor<float, fx::cuda> g = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  CHECK(g.shape() == fx::shape{2, 3});
  CHECK(g(1, 2) == 6.f);
  CHECK(g(-1, 0) == 4.f);
  CHECK(g.at({0, 1}) == 2.f);
  fx::tensor<bool, fx::cuda> b = {true, false, true};
  CHECK(b.to_vector() == std::vector<bool>{true, false, true});
  CHECK_FALSE(b(1));
  fx::tensor<std::int64_t, fx::cuda> s = std::int64_t{-9};
  CHECK(s.item() == -9);
  CHECK_THROWS_WITH_AS(g.item(), "item: tensor of shape (2, 3) has 6 elements, not 1", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(g(2, 0), "tensor: index 2 is out of range for axis 0 with size 2", fx::out_of_range);
}

TEST_CASE("cuda memory: statistics count requests, and freed buffers are reused from the cache") {
  fx::memory::empty_cache<fx::cuda>();
  const auto start = fx::memory::stats<fx::cuda>();
  CHECK(start.cached_bytes == 0);
  auto x = filled<float>({1000}, 1);
  {
    fx::tensor<float, fx::cuda> g = fx::to<fx::cuda>(x);
    const auto live = fx::memory::stats<fx::cuda>();
    CHECK(live.allocations - start.allocations == 1);
    CHECK(live.system_allocations - start.system_allocations == 1);
    CHECK(live.buffers_in_use - start.buffers_in_use == 1);
    CHECK(live.bytes_in_use - start.bytes_in_use >= 4000);
    CHECK(live.bytes_in_use - start.bytes_in_use <= 4000 + 4000 / 8);  // a size class is at most 12.5% larger
  }
  const auto freed = fx::memory::stats<fx::cuda>();
  CHECK(freed.buffers_in_use == start.buffers_in_use);
  CHECK(freed.bytes_in_use == start.bytes_in_use);
  CHECK(freed.cached_bytes > 0);
  // Steady state: a loop of same-sized temporaries never reaches the system allocator again.
  auto g = fx::to<fx::cuda>(x);
  fx::tensor<float, fx::cuda> acc = g;
  const auto warm = fx::memory::stats<fx::cuda>();
  for (int i = 0; i < 10; ++i) acc = acc * 0.5f + g;
  const auto after = fx::memory::stats<fx::cuda>();
  CHECK(after.allocations - warm.allocations == 10);
  // g stays live, and each new acc is made while the old one lives: two buffers beyond g, after
  // which the loop alternates between them.
  CHECK(after.system_allocations - warm.system_allocations == 2);
  fx::memory::empty_cache<fx::cuda>();
  CHECK(fx::memory::stats<fx::cuda>().cached_bytes == 0);
}

TEST_CASE("cuda memory: the peak of bytes in use, and reset_peak") {
  auto x = filled<float>({1 << 16}, 1);  // 256 KiB, an exact size class
  fx::memory::reset_peak<fx::cuda>();
  const auto start = fx::memory_stats<fx::cuda>();
  CHECK(start.peak_bytes_in_use == start.bytes_in_use);
  {
    auto a = fx::to<fx::cuda>(x);
    auto b = fx::to<fx::cuda>(x);
  }
  CHECK(fx::memory_stats<fx::cuda>().peak_bytes_in_use - start.bytes_in_use == 2 * (1 << 18));
  fx::memory::reset_peak<fx::cuda>();
  { auto a = fx::to<fx::cuda>(x); }
  CHECK(fx::memory_stats<fx::cuda>().peak_bytes_in_use - start.bytes_in_use == 1 << 18);
}

TEST_CASE("cuda memory: the device cache is shared by every thread") {
  fx::memory::empty_cache<fx::cuda>();
  auto x = filled<double>({5000}, 2);
  { auto g = fx::to<fx::cuda>(x); }  // allocated and freed on this thread
  const auto before = fx::memory::stats<fx::cuda>();
  std::vector<double> seen;
  std::thread other([&] {
    auto g = fx::to<fx::cuda>(x);  // the same size class, on another thread: served from the cache
    seen = g.to_vector();
  });
  other.join();
  const auto after = fx::memory::stats<fx::cuda>();
  CHECK(after.allocations - before.allocations == 1);
  CHECK(after.system_allocations == before.system_allocations);
  CHECK(seen == x.to_vector());
}

TEST_CASE("cuda transfer: creation functions and variables on the device") {
  CHECK(fx::zeros<float, fx::cuda>({2, 3}).to_vector() == std::vector<float>(6, 0.f));
  CHECK(fx::full<std::int32_t, fx::cuda>({4}, 7).to_vector() == std::vector<std::int32_t>(4, 7));
  CHECK(fx::eye<double, fx::cuda>(3).to_vector() == fx::eye<double>(3).to_vector());
  CHECK(fx::arange<float, fx::cuda>(0, 5).to_vector() == std::vector<float>{0, 1, 2, 3, 4});
  auto v = fx::from_vector<float, fx::cuda>({1, 2, 3, 4}, {2, 2});
  CHECK(v.shape() == fx::shape{2, 2});
  CHECK(v(1, 0) == 3.f);
  fx::variable<float, fx::cuda> w(fx::to<fx::cuda>(fluxion_test::with_values<float>({2}, {1, 2})), "w");
  w.assign_add(fx::ones<float, fx::cuda>({2}));
  w.assign_sub(fx::full<float, fx::cuda>({2}, 0.5f) * 4.f);
  CHECK(w.version() == 2);
  CHECK(fx::to<fx::cpu>(w).to_vector() == std::vector<float>{0, 1});
}

TEST_CASE("cuda transfer: printing a device tensor copies it back and names the device") {
  fx::tensor<float, fx::cuda> g = {{1.f, 2.f}, {3.f, 4.f}};
  const std::string host = fx::to_string(fx::to<fx::cpu>(g));
  CHECK(host == "tensor([[1., 2.],\n        [3., 4.]], dtype=float32, shape=(2, 2))");
  CHECK(fx::to_string(g) == "tensor([[1., 2.],\n        [3., 4.]], dtype=float32, shape=(2, 2), device=cuda)");
  std::ostringstream os;
  os << g * 2.f;  // an expression on the device: evaluated there, then printed
  CHECK(os.str() == "tensor([[2., 4.],\n        [6., 8.]], dtype=float32, shape=(2, 2), device=cuda)");
}

TEST_CASE("cuda transfer: uploads queued behind kernels keep their values, whatever the caller does next") {
  // On a GPU each upload is staged through a pinned block and queued without waiting; the block
  // is reused only once its copy has finished. The host buffers are overwritten right after each
  // upload, and a long chain of kernels keeps the queue busy meanwhile.
  std::vector<fx::tensor<float, fx::cuda>> uploads;
  fx::tensor<float, fx::cuda> busy = fx::to<fx::cuda>(filled<float>({1 << 16}, 5));
  std::vector<float> host;
  for (int i = 0; i < 48; ++i) {
    const fx::index_t n = 1000 + 517 * i;  // sizes that reuse some blocks and outgrow others
    fx::tensor<float> h(fx::shape{n});
    for (fx::index_t j = 0; j < n; ++j) h.mutable_data()[j] = static_cast<float>(i * 100000 + j);
    uploads.push_back(fx::to<fx::cuda>(h));
    for (fx::index_t j = 0; j < n; ++j) h.mutable_data()[j] = -1.f;  // the caller reuses its buffer
    for (int k = 0; k < 4; ++k) busy = fx::sin(busy) * 0.5f + busy;
  }
  for (int i = 0; i < 48; ++i) {
    CAPTURE(i);
    const std::vector<float> got = uploads[static_cast<std::size_t>(i)].to_vector();
    bool ok = true;
    for (std::size_t j = 0; j < got.size(); ++j) ok = ok && got[j] == static_cast<float>(i * 100000 + static_cast<int>(j));
    CHECK(ok);
  }
  // Scalars and braces take the same path.
  fx::tensor<float, fx::cuda> s = 2.5f;
  CHECK(s.item() == 2.5f);
}

TEST_CASE("cuda memory: a full device cache gives way to the new working set, oldest blocks first") {
  // An old working set fills the cache (four 256 MB blocks: its 1 GB limit); a loop then needs
  // 64 MB blocks. The first is a miss; when it is freed the cache drops the block cached longest
  // ago and keeps it, so the loop's later steps are hits. (Before, the cache refused it, and every
  // step paid a device allocation and a synchronizing free.) The blocks are never written to.
  using allocator = fx::detail::device_allocator<fx::cuda>;
  fx::memory::empty_cache<fx::cuda>();
  const std::size_t big = std::size_t(256) << 20, small = std::size_t(64) << 20;
  std::vector<std::pair<void*, std::size_t>> old_set;
  for (int i = 0; i < 4; ++i) {
    std::size_t actual = 0;
    void* p = allocator::allocate(big, actual);
    old_set.emplace_back(p, actual);
  }
  for (auto [p, actual] : old_set) allocator::deallocate(p, actual);
  CHECK(fx::memory::stats<fx::cuda>().cached_bytes == std::int64_t(4 * big));
  const auto before = fx::memory::stats<fx::cuda>();
  for (int step = 0; step < 3; ++step) {
    std::size_t actual = 0;
    void* p = allocator::allocate(small, actual);
    allocator::deallocate(p, actual);
  }
  const auto after = fx::memory::stats<fx::cuda>();
  CHECK(after.system_allocations - before.system_allocations == 1);
  CHECK(after.cached_bytes == std::int64_t(3 * big + small));  // one old block gave way
  {  // the three old blocks still cached are served without a device allocation
    std::size_t actual = 0;
    void* p = allocator::allocate(big, actual);
    CHECK(fx::memory::stats<fx::cuda>().system_allocations == after.system_allocations);
    allocator::deallocate(p, actual);
  }
  fx::memory::empty_cache<fx::cuda>();
  CHECK(fx::memory::stats<fx::cuda>().cached_bytes == 0);
}
