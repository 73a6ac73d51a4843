// The schedules of large host <-> device copies (backend/cuda/staged_copy.hpp): pieces, the ring of
// staging blocks, and the thread pool's memcpy. transfer.test.cpp moves tensors through them.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "fluxion/backend/cuda/staged_copy.hpp"

namespace {

namespace fx = fluxion;

/// Bytes 0, 1, 2 ... (mod 251, so that no piece repeats the one before it).
std::vector<unsigned char> staged_test_bytes(std::size_t n) {
  std::vector<unsigned char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i % 251);
  return v;
}

}  // namespace

TEST_CASE("staged copy: parallel_memcpy copies every byte, at any alignment, on 1 and 2 threads") {
  const int threads_before = fx::get_num_threads();
  for (int threads : {1, 2}) {
    fx::set_num_threads(threads);
    const std::size_t mib = std::size_t{1} << 20;
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, mib - 1, mib, mib + 1, 3 * mib + 17}) {
      for (std::size_t shift : {std::size_t{0}, std::size_t{3}}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(shift);
        const auto src = staged_test_bytes(n + shift);
        std::vector<unsigned char> dst(n + 2 * shift + 1, 0xAB);
        fx::detail::parallel_memcpy(dst.data() + 2 * shift, src.data() + shift, n);
        CHECK((n == 0 || std::memcmp(dst.data() + 2 * shift, src.data() + shift, n) == 0));
        // Nothing outside the destination's range is written.
        for (std::size_t i = 0; i < 2 * shift; ++i) CHECK(dst[i] == 0xAB);
        CHECK(dst[n + 2 * shift] == 0xAB);
      }
    }
  }
  fx::set_num_threads(threads_before);
}

TEST_CASE("staged copy: an upload sends its pieces in order, covering every byte once") {
  for (std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9}, std::size_t{63}}) {
    CAPTURE(bytes);
    std::vector<std::pair<std::size_t, std::size_t>> sent;
    fx::detail::staged_upload(bytes, 8, [&](std::size_t offset, std::size_t length) { sent.emplace_back(offset, length); });
    CHECK(sent.size() == fx::detail::staged_pieces(bytes, 8));
    std::size_t next = 0;
    for (const auto& [offset, length] : sent) {
      CHECK(offset == next);
      CHECK(length >= 1);
      CHECK(length <= 8);
      next += length;
    }
    CHECK(next == bytes);
  }
}

TEST_CASE("staged copy: a download refills a block only after the piece in it was drained") {
  // A model of the device: queue() records which piece a block holds, wait() and drain() check it.
  for (std::size_t ring : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    for (std::size_t bytes : {std::size_t{1}, std::size_t{10}, std::size_t{11}, std::size_t{25}, std::size_t{100}}) {
      CAPTURE(ring);
      CAPTURE(bytes);
      const std::size_t piece = 10;
      const std::size_t n = fx::detail::staged_pieces(bytes, piece);
      std::vector<std::ptrdiff_t> holds(ring, -1);  // the piece each block holds, drained or not
      std::vector<bool> waited(ring, false), drained_slot(ring, true);
      std::vector<std::size_t> drained;
      std::string log;
      fx::detail::staged_download(
          bytes, piece, ring,
          [&](std::size_t offset, std::size_t length, std::size_t slot) {
            REQUIRE(slot < ring);
            CHECK(drained_slot[slot]);  // the block's last piece is out
            CHECK(offset % piece == 0);
            CHECK(length == std::min(piece, bytes - offset));
            holds[slot] = static_cast<std::ptrdiff_t>(offset / piece);
            drained_slot[slot] = false;
            waited[slot] = false;
            log += "q" + std::to_string(offset / piece);
          },
          [&](std::size_t slot) {
            REQUIRE(slot < ring);
            waited[slot] = true;
          },
          [&](std::size_t offset, std::size_t length, std::size_t slot) {
            REQUIRE(slot < ring);
            CHECK(waited[slot]);
            CHECK(holds[slot] == static_cast<std::ptrdiff_t>(offset / piece));
            CHECK(length == std::min(piece, bytes - offset));
            drained_slot[slot] = true;
            drained.push_back(offset / piece);
            log += "d" + std::to_string(offset / piece);
          });
      std::vector<std::size_t> in_order(n);
      std::iota(in_order.begin(), in_order.end(), std::size_t{0});
      CHECK(drained == in_order);
      // The first `ring` pieces are queued before any is drained.
      std::string first;
      for (std::size_t i = 0; i < std::min(ring, n); ++i) first += "q" + std::to_string(i);
      CHECK(log.substr(0, first.size()) == first);
    }
  }
}

TEST_CASE("staged copy: a download of nothing queues nothing") {
  int calls = 0;
  fx::detail::staged_download(
      0, 16, 2, [&](std::size_t, std::size_t, std::size_t) { ++calls; }, [&](std::size_t) { ++calls; },
      [&](std::size_t, std::size_t, std::size_t) { ++calls; });
  fx::detail::staged_upload(0, 16, [&](std::size_t, std::size_t) { ++calls; });
  CHECK(calls == 0);
}
