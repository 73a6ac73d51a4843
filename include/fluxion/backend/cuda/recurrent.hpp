// The recurrent layers' fused cells (nn/lstm_cell.hpp, nn/gru_cell.hpp) on fx::cuda: each step's
// cells are one Thrust kernel, a thread per (b, u); or, with recurrent_persistent(), a whole
// sequence is one cooperative kernel (run_sequence below).
//
// The persistent kernel. A step of a small layer is mostly launches: a GEMM h R (often with a
// split-K reduction beside it) and the cell pass, three kernels of a few microseconds each, 64
// steps forward and 64 back (stop 43's Nsight profile of the CNN+LSTM step: about 200 of its 398
// kernels). run_sequence launches one kernel for all the steps of a pass instead:
//   - block j of the grid owns units j * block .. (j + 1) * block - 1 and copies their columns of
//     the recurrent matrix (forward: R's columns u, u + units, ...; backward: R^T's column u, read
//     from R) into shared memory once;
//   - at each step, each row b of the batch is taken by `lanes` threads of a warp, which read the
//     row of h_t (or dz_{t+1}) from global memory in order and multiply it by those columns, then
//     add their parts with warp shuffles; the row's cells of the block's units then run, with the
//     products from shared memory (staged_product), in the same functors as the per-step kernels;
//   - a grid barrier (cooperative_groups::grid_group::sync) ends the step: the next one reads the
//     states every block wrote.
// The grid has at most one block per multiprocessor's worth of units (block = units / processors,
// rounded up), so a launch that fits (cudaOccupancyMaxActiveBlocksPerMultiprocessor) is
// co-resident, as a grid barrier needs. Layers whose rows need more than sequence_max_columns
// products a block, or whose columns do not fit in shared memory, keep the per-step kernels.
//
// Under Thrust's OpenMP system (the tests without a GPU) run_sequence runs the same plan on the
// host, for a device of sequence_emulated_processors multiprocessors: every block's step before
// any block's next step, a block's rows one after another, each row's lanes one after another.
// Only the warp shuffles and the barrier are the GPU's own.
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../core/device.hpp"
#include "../../nn/recurrent_cell.hpp"
#include "window.hpp"

#if THRUST_DEVICE_SYSTEM == THRUST_DEVICE_SYSTEM_CUDA && defined(__CUDACC__)
#include <cooperative_groups.h>
#define FLUXION_PERSISTENT_RECURRENT 1
#else
#define FLUXION_PERSISTENT_RECURRENT 0
#endif

namespace fluxion::nn::detail {

template <class F>
struct recurrent_cell_thread {
  F f;
  index_t units;
  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    const index_t b = k / units;
    f.template cell<typename F::value_type>(b, k - b * units);
  }
};

/// The most products a row of a persistent block keeps in registers: 4 gates of 4 units.
inline constexpr int sequence_max_columns = 16;

/// How a persistent sequence spreads over a grid: `block` units a thread block, `blocks` blocks,
/// `lanes` threads a row (a power of two, at least block) and `groups` rows at once a block.
/// blocks = 0: the sequence does not fit (the per-step kernels run instead).
struct sequence_grid {
  index_t batch = 0, units = 0, steps = 0, block = 0, blocks = 0;
  int lanes = 1, groups = 1;

  FLUXION_HOST_DEVICE int columns(int count) const { return count * static_cast<int>(block); }
};

/// The units a block of the persistent kernel takes at least (0: as few as the multiprocessors
/// allow, one for a layer of at most 132 units on an H200). Process-wide, for tuning on a GPU: more
/// units a block means fewer blocks reading each step's rows from L2 (at batch 256 the backward
/// pass's 128 blocks of one unit read 64 MB a step), but more products for each block to compute.
inline index_t& recurrent_block_units() noexcept {
  static index_t units = 0;
  return units;
}

/// The grid for a device of `processors` multiprocessors: one block per multiprocessor at most
/// (and at least recurrent_block_units() units a block), and lanes enough that each thread reads
/// about 32 entries of a row of k.
inline sequence_grid plan_sequence(index_t batch, index_t units, index_t steps, index_t k, int count,
                                   index_t processors) {
  sequence_grid g;
  g.batch = batch, g.units = units, g.steps = steps;
  if (processors <= 0 || units <= 0) return g;
  const index_t block = std::min(units, std::max((units + processors - 1) / processors, recurrent_block_units()));
  if (block * count > sequence_max_columns) return g;
  g.block = block;
  g.blocks = (units + block - 1) / block;
  int lanes = 1;
  while (lanes < 32 && (lanes < block || index_t(lanes) * 32 < k)) lanes *= 2;
  g.lanes = lanes;
  const index_t threads = std::clamp<index_t>((batch * lanes + 31) / 32 * 32, 32, 512);
  g.groups = static_cast<int>(threads / lanes);
  return g;
}

/// Entry i of the columns a block copies to shared memory, (k, count * block): row j, column g *
/// block + ul holds m's column u0 + ul + g * stride, or zero past the last unit.
template <class T>
FLUXION_HOST_DEVICE T staged_column(const sequence_products<T>& p, const sequence_grid& g, index_t u0, index_t i) {
  const index_t cols = p.count * g.block, j = i / cols, c = i - j * cols, gate = c / g.block;
  const index_t u = u0 + (c - gate * g.block);
  return u < g.units ? p.m_at(j, u + gate * p.stride) : T(0);
}

/// One lane's part of a row (k entries, global memory) times a block's columns ms (k, cols):
/// acc[c] += row[j] ms[j, c] for j = lane, lane + lanes, ...
template <class T>
FLUXION_HOST_DEVICE void row_partials(const T* row, index_t k, const T* ms, int cols, int lane, int lanes, T* acc) {
  for (index_t j = lane; j < k; j += lanes) {
    const T x = row[j];
    const T* mj = ms + j * cols;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int c = 0; c < sequence_max_columns; ++c)
      if (c < cols) acc[c] += x * mj[c];
  }
}

#if FLUXION_PERSISTENT_RECURRENT
/// A whole pass over a sequence (see the top of this file); launched cooperatively.
template <class T, class Steps>
__global__ void __launch_bounds__(512) recurrent_sequence_kernel(Steps make, sequence_products<T> p, sequence_grid g) {
  extern __shared__ __align__(16) unsigned char sequence_shared[];
  T* ms = reinterpret_cast<T*>(sequence_shared);
  const int cols = g.columns(p.count);
  T* zs = ms + p.k * cols;
  const index_t u0 = static_cast<index_t>(blockIdx.x) * g.block;
  for (index_t i = threadIdx.x; i < p.k * cols; i += blockDim.x) ms[i] = staged_column(p, g, u0, i);
  __syncthreads();
  const int lane = static_cast<int>(threadIdx.x) % g.lanes, group = static_cast<int>(threadIdx.x) / g.lanes;
  const index_t owned = g.units - u0 < g.block ? g.units - u0 : g.block;
  T* z = zs + group * cols;
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  for (index_t s = 0; s < g.steps; ++s) {
    const index_t t = p.reverse ? g.steps - 1 - s : s;
    const bool product = t != p.none;
    const T* a = product ? p.a + (t + p.shift) * p.a_step : nullptr;
    for (index_t row0 = 0; row0 < g.batch; row0 += g.groups) {
      const index_t b = row0 + group;
      if (product) {  // the same in every thread: the shuffles see whole warps
        T acc[sequence_max_columns];
#pragma unroll
        for (int c = 0; c < sequence_max_columns; ++c) acc[c] = T(0);
        if (b < g.batch) row_partials(a + b * p.k, p.k, ms, cols, lane, g.lanes, acc);
        for (int offset = g.lanes / 2; offset > 0; offset /= 2) {
#pragma unroll
          for (int c = 0; c < sequence_max_columns; ++c)
            if (c < cols) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], offset, g.lanes);
        }
        if (lane == 0) {
#pragma unroll
          for (int c = 0; c < sequence_max_columns; ++c)
            if (c < cols) z[c] = acc[c];
        }
        __syncwarp();
      }
      if (b < g.batch && lane < owned)
        make(t, staged_product<T>{product ? z : nullptr, u0, g.block}).template cell<T>(b, u0 + lane);
      __syncwarp();  // the row's products are read before the next row's overwrite them
    }
    grid.sync();
  }
}

/// What run_sequence needs to know of the current device, asked once per device.
struct sequence_device {
  index_t processors = 0;
  bool cooperative = false;
  std::size_t shared_optin = 0;

  static sequence_device current() {
    int id = 0;
    if (cudaGetDevice(&id) != cudaSuccess) return {};
    static std::mutex mutex;
    static std::vector<std::pair<int, sequence_device>> known;
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [d, facts] : known)
      if (d == id) return facts;
    sequence_device f;
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, id) == cudaSuccess) f.processors = v;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrCooperativeLaunch, id) == cudaSuccess) f.cooperative = v != 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, id) == cudaSuccess)
      f.shared_optin = static_cast<std::size_t>(v);
    known.emplace_back(id, f);
    return f;
  }
};
#endif

/// The multiprocessors of the device that run_sequence's host emulation plans for: few, so that
/// a small test layer has blocks of several units and a last block with fewer.
inline constexpr index_t sequence_emulated_processors = 3;

template <>
struct recurrent_cells<cuda> {
  /// Whether a step computes its recurrent products (h R forward, dz R^T backward) inside the cell
  /// kernel, a dot product of length units (or gates * units) per cell, instead of a cuBLAS GEMM
  /// before it: for small layers, where a step's time is its launches (a GEMM, often a split-K
  /// reduction beside it, and the cell: three), not its arithmetic.
  static bool products_inside(index_t batch, index_t units) {
    return units <= recurrent_product_max_units && batch * units <= recurrent_product_limit();
  }

  template <class F>
  static void run(index_t batch, index_t units, const F& f) {
    fluxion::detail::cuda_window::for_each_index(batch * units, recurrent_cell_thread<F>{f, units});
  }

  /// Every step of a sequence, make(t, product).cell(b, u) over (batch, units) in order of t (from
  /// the last with p.reverse), each step's cells reading their `p.count` columns of a_t m, as one
  /// persistent kernel (the top of this file). False, having done nothing, where recurrent_persistent()
  /// is off or the sequence does not fit: the caller runs its steps.
  template <class T, class Steps>
  static bool run_sequence(index_t batch, index_t units, index_t steps, const sequence_products<T>& p,
                           const Steps& make) {
    if (!recurrent_persistent() || batch <= 0 || steps <= 0) return false;
#if FLUXION_PERSISTENT_RECURRENT
    const sequence_device device = sequence_device::current();
    if (!device.cooperative) return false;
    const sequence_grid g = plan_sequence(batch, units, steps, p.k, p.count, device.processors);
    if (g.blocks == 0) return false;
    const int cols = g.columns(p.count), threads = g.groups * g.lanes;
    const std::size_t shared = static_cast<std::size_t>(p.k * cols + g.groups * cols) * sizeof(T);
    if (shared > device.shared_optin) return false;
    auto* kernel = &recurrent_sequence_kernel<T, Steps>;
    if (shared > 48 * 1024 &&
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)) !=
            cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    int per_processor = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_processor, kernel, threads, shared) != cudaSuccess ||
        index_t(per_processor) * device.processors < g.blocks) {
      (void)cudaGetLastError();
      return false;
    }
    Steps m = make;
    sequence_products<T> products = p;
    sequence_grid grid = g;
    void* args[] = {&m, &products, &grid};
    const cudaError_t e = cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(kernel),
                                                      dim3(static_cast<unsigned>(g.blocks)),
                                                      dim3(static_cast<unsigned>(threads)), args, shared,
                                                      fluxion::detail::current_stream());
    cudaError_t done = cudaSuccess;
#if defined(FLUXION_CUDA_SYNC)  // as kernel_policy(): wait, so that a failing kernel is reported here
    if (e == cudaSuccess) done = cudaStreamSynchronize(fluxion::detail::current_stream());
#endif
    if (e != cudaSuccess || done != cudaSuccess)
      throw std::runtime_error(std::string("fx::nn recurrent layer: the persistent sequence kernel (") +
                               std::to_string(g.blocks) + " blocks of " + std::to_string(threads) +
                               " threads, " + std::to_string(shared) + " bytes of shared memory) failed" +
                               (e != cudaSuccess ? " to launch: " : ": ") +
                               cudaGetErrorString(e != cudaSuccess ? e : done));
    return true;
#else
    const sequence_grid g = plan_sequence(batch, units, steps, p.k, p.count, sequence_emulated_processors);
    if (g.blocks == 0) return false;
    const int cols = g.columns(p.count);
    std::vector<std::vector<T>> staged(static_cast<std::size_t>(g.blocks), std::vector<T>(p.k * cols));
    for (index_t j = 0; j < g.blocks; ++j)
      for (index_t i = 0; i < p.k * cols; ++i) staged[j][i] = staged_column(p, g, j * g.block, i);
    T acc[sequence_max_columns];
    for (index_t s = 0; s < steps; ++s) {  // the grid barrier: every block's step t before any t + 1
      const index_t t = p.reverse ? steps - 1 - s : s;
      const bool product = t != p.none;
      const T* a = product ? p.a + (t + p.shift) * p.a_step : nullptr;
      for (index_t j = 0; j < g.blocks; ++j) {
        const index_t u0 = j * g.block, owned = std::min(g.block, units - u0);
        for (index_t b = 0; b < batch; ++b) {
          std::fill(acc, acc + sequence_max_columns, T(0));
          if (product)
            for (int lane = 0; lane < g.lanes; ++lane)
              row_partials(a + b * p.k, p.k, staged[j].data(), cols, lane, g.lanes, acc);
          for (index_t u = u0; u < u0 + owned; ++u)
            make(t, staged_product<T>{product ? acc : nullptr, u0, g.block}).template cell<T>(b, u);
        }
      }
    }
    return true;
#endif
  }
};

}  // namespace fluxion::nn::detail
