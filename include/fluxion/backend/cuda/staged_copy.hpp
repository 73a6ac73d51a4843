// Large host <-> device copies in pieces, through staging blocks, with the host's side of each piece
// copied by the thread pool.
//
// A copy between pageable host memory and the device goes through pinned memory either way: the
// driver stages it itself (cudaMemcpy from a pageable buffer), or fluxion does (memory.hpp's
// pinned_staging, so that an upload does not wait for the kernels queued before it). One thread
// copying 64 MB into one pinned block and only then queueing the device's copy moved 4.8 GB/s on an
// H200's host (stop 48: fx::to<fx::cuda> of 16M floats in 13.9 ms, 1.21-1.32x cudaMemcpy's time).
// Here a copy of more than staging_piece_bytes() goes in pieces: the device copies piece i while
// the host fills piece i + 1, and the host's memcpy of a piece is split over the pool's workers
// (parallel_memcpy). Downloads do the same the other way: the device's copies of the next pieces
// are queued before the host empties the first.
//
// The schedules below take the device's operations as callables, so that the same code runs on a
// GPU (memory.hpp: cudaMemcpyAsync, events) and, in CI, through Thrust's OpenMP backend, where the
// "device" is host memory and the tests make the pieces small.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>

#include "../../core/config.hpp"
#include "../cpu/thread_pool.hpp"

namespace fluxion::detail {

/// The size of a staged copy's pieces; copies up to this size go in one. Process-wide, 4 MiB by
/// default: about 80 us of an H100's or H200's host link, long enough that a piece's launch and
/// event cost little, short enough that the first piece's wait is short. The tests set it small.
inline std::size_t& staging_piece_bytes() noexcept {
  static std::size_t bytes = std::size_t{4} << 20;
  return bytes;
}

/// The staging blocks a download cycles through: the device fills one while the host empties the other.
inline constexpr std::size_t staging_ring = 2;

/// Host copies of at least this many bytes are split over the thread pool's workers.
inline constexpr std::size_t parallel_memcpy_min_bytes = std::size_t{1} << 20;

/// std::memcpy, split into parts of at least 512 KiB (64-byte aligned) run by the thread pool where
/// `bytes` is at least parallel_memcpy_min_bytes. A call from a pool task, or while another thread
/// owns the pool, copies on the calling thread alone (thread_pool.hpp).
inline void parallel_memcpy(void* dst, const void* src, std::size_t bytes) {
  const std::size_t threads = static_cast<std::size_t>(std::max(1, thread_pool::instance().num_threads()));
  const std::size_t parts = std::min(threads, bytes / (std::size_t{512} << 10));
  if (bytes < parallel_memcpy_min_bytes || parts <= 1) {
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return;
  }
  const std::size_t step = ((bytes + parts - 1) / parts + 63) / 64 * 64;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  thread_pool::instance().parallel_for(static_cast<index_t>(parts), [&](index_t part) {
    const std::size_t begin = static_cast<std::size_t>(part) * step;
    if (begin < bytes) std::memcpy(d + begin, s + begin, std::min(step, bytes - begin));
  });
}

/// The number of pieces of a copy of `bytes` in pieces of at most `piece` bytes.
inline std::size_t staged_pieces(std::size_t bytes, std::size_t piece) noexcept {
  piece = std::max<std::size_t>(piece, 1);
  return (bytes + piece - 1) / piece;
}

/// An upload of `bytes` in pieces of at most `piece` bytes: send(offset, length) for each piece in
/// order; each call fills a staging block and queues its copy to the device without waiting, so
/// the device copies one piece while the host fills the next.
template <class Send>
void staged_upload(std::size_t bytes, std::size_t piece, Send&& send) {
  const std::size_t n = staged_pieces(bytes, piece);
  piece = std::max<std::size_t>(piece, 1);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t offset = i * piece;
    send(offset, std::min(piece, bytes - offset));
  }
}

/// A download of `bytes` in pieces of at most `piece` bytes through `ring` staging blocks:
/// queue(offset, length, slot) queues the device's copy of a piece into block `slot`, wait(slot)
/// waits for the copy queued there last, and drain(offset, length, slot) copies the piece out of
/// the block. The first `ring` pieces are queued at once; a block is queued again only after the
/// piece in it was drained, so the device copies the next pieces while the host drains this one.
template <class Queue, class Wait, class Drain>
void staged_download(std::size_t bytes, std::size_t piece, std::size_t ring, Queue&& queue, Wait&& wait, Drain&& drain) {
  const std::size_t n = staged_pieces(bytes, piece);
  piece = std::max<std::size_t>(piece, 1);
  ring = std::max<std::size_t>(ring, 1);
  auto length = [&](std::size_t i) { return std::min(piece, bytes - i * piece); };
  for (std::size_t i = 0; i < std::min(n, ring); ++i) queue(i * piece, length(i), i);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slot = i % ring;
    wait(slot);
    drain(i * piece, length(i), slot);
    if (i + ring < n) queue((i + ring) * piece, length(i + ring), slot);
  }
}

}  // namespace fluxion::detail
