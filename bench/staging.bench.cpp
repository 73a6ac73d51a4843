// The host's side of fx::cuda's large copies (backend/cuda/staged_copy.hpp), on the CPU alone:
// 64 MiB copied from memory into pinned staging blocks and back, as stop 48 did it (one std::memcpy
// into one block of the whole size, on the calling thread) and as stop 51 does (4 MiB pieces into
// two blocks, each piece split over the thread pool). On a GPU the device's copy of a piece overlaps
// the host's copy of the next, so these host times bound the transfers; bench/cuda/kernels.bench.cu
// times the whole transfers on a GPU.
//   build/bench/staging --benchmark_filter=staging
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include <fluxion/backend/cuda/staged_copy.hpp>

namespace {

namespace fx = fluxion;

constexpr std::size_t staging_total = std::size_t{64} << 20;

/// Stop 48's upload: one memcpy of the whole tensor into one block, on the calling thread.
void staging_whole_block(benchmark::State& state) {
  std::vector<unsigned char> src(staging_total, 1), block(staging_total, 0);
  for (auto _ : state) {
    std::memcpy(block.data(), src.data(), staging_total);
    benchmark::DoNotOptimize(block.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * staging_total));
}

/// Stop 51's upload (Down = false) or download (Down = true): 4 MiB pieces through two blocks,
/// each piece copied by parallel_memcpy on state.range(0) threads.
template <bool Down>
void staging_pieces(benchmark::State& state) {
  const int threads_before = fx::get_num_threads();
  fx::set_num_threads(static_cast<int>(state.range(0)));
  const std::size_t piece = fx::detail::staging_piece_bytes();
  std::vector<unsigned char> host(staging_total, 1), blocks[2] = {std::vector<unsigned char>(piece, 2),
                                                                  std::vector<unsigned char>(piece, 3)};
  for (auto _ : state) {
    fx::detail::staged_upload(staging_total, piece, [&](std::size_t offset, std::size_t length) {
      unsigned char* block = blocks[(offset / piece) % 2].data();
      if constexpr (Down) fx::detail::parallel_memcpy(host.data() + offset, block, length);
      else fx::detail::parallel_memcpy(block, host.data() + offset, length);
    });
    benchmark::DoNotOptimize(host.data());
    benchmark::DoNotOptimize(blocks[0].data());
  }
  fx::set_num_threads(threads_before);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * staging_total));
}

}  // namespace

BENCHMARK(staging_whole_block)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(staging_pieces, false)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
BENCHMARK_TEMPLATE(staging_pieces, true)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);
