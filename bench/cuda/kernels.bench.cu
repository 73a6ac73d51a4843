// fx::cuda on a real GPU against the device's own ceilings, in one run (scripts/run-gpu-benchmarks.sh):
//   copy      cudaMemcpy device to device: the measured memory bandwidth (bytes read + written)
//   chain     r = a*b + c*d - sin(e), as in bench/elementwise.bench.cpp: fluxion's fused Thrust
//             kernel against a hand-written CUDA kernel, in GB/s of the 6 arrays it must move
//   sum       fx::reduce_sum of one array
//   sgemm     fx::matmul on float against cublasSgemm called directly, on the same buffers
//   conv      the 2-conv CNN's second convolution (x (batch, 14, 14, 32), filters 5x5x32x64, same
//             padding) forward, and forward with both gradients through the tape (given dy), in
//             TFLOP/s of the products; PyTorch's cuDNN does the same in bench/cuda/torch_peer.py;
//             the second argument picks the path: 1 cuDNN (where the build has it), 0 im2col +
//             cuBLAS (fx::allow_cudnn(false)); conv_products the three matrix products alone, on
//             the im2col matrix's shape
//   depthwise fx::depthwise_conv2d of MobileNet's and ConvNeXt's layers at batch 32: forward, and with
//             the input or the filter gradient (PyTorch's grouped convolution in torch_peer.py)
// Every case is timed with CUDA events around each iteration (manual time), after a warm-up, so
// module loading and handle creation stay out of the figures. Inputs are uniform in [-1, 1).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <fluxion/cuda.hpp>
#include <fluxion/tensor/random.hpp>

#include "timer.hpp"

namespace fx = fluxion;

namespace {

fx::tensor<float, fx::cuda> uniform(const fx::shape& s, std::uint64_t seed) {
  fx::random::generator gen{seed};
  return fx::to<fx::cuda>(fx::random::uniform<float>(s, gen, -1.f, 1.f));
}

fx::tensor<float, fx::cuda> uniform(fx::index_t n, std::uint64_t seed) { return uniform(fx::shape{n}, seed); }

void copy_d2d(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  auto a = uniform(n, 1);
  fx::tensor<float, fx::cuda> r(fx::shape{n});
  event_timer t;
  t.run(state, [&] {
    check(cudaMemcpyAsync(r.mutable_data(), a.data(), n * sizeof(float), cudaMemcpyDeviceToDevice), "copy");
  });
  state.SetBytesProcessed(state.iterations() * n * 2 * static_cast<std::int64_t>(sizeof(float)));
}

void chain_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  auto a = uniform(n, 1), b = uniform(n, 2), c = uniform(n, 3), d = uniform(n, 4), e = uniform(n, 5);
  event_timer t;
  t.run(state, [&] {
    fx::tensor<float, fx::cuda> r = a * b + c * d - fx::sin(e);
    benchmark::DoNotOptimize(r.data());
  });
  state.SetBytesProcessed(state.iterations() * n * 6 * static_cast<std::int64_t>(sizeof(float)));
}

__global__ void chain_kernel(const float* __restrict__ a, const float* __restrict__ b, const float* __restrict__ c,
                             const float* __restrict__ d, const float* __restrict__ e, float* __restrict__ r,
                             long long n) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < n) r[i] = a[i] * b[i] + c[i] * d[i] - sinf(e[i]);
}

void chain_handwritten(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  auto a = uniform(n, 1), b = uniform(n, 2), c = uniform(n, 3), d = uniform(n, 4), e = uniform(n, 5);
  fx::tensor<float, fx::cuda> r(fx::shape{n});
  event_timer t;
  t.run(state, [&] {
    chain_kernel<<<static_cast<unsigned>((n + 255) / 256), 256>>>(a.data(), b.data(), c.data(), d.data(), e.data(),
                                                                  r.mutable_data(), n);
    check(cudaGetLastError(), "chain_kernel");
  });
  // The same values as fluxion's statement, up to the last bit of sin.
  fx::tensor<float, fx::cuda> f = a * b + c * d - fx::sin(e);
  const fx::tensor<float, fx::cuda> diff_max = fx::reduce_max(fx::abs(f - r));
  const double diff = diff_max.item();
  if (diff > 1e-5) state.SkipWithError("hand-written kernel disagrees with fluxion");
  state.SetBytesProcessed(state.iterations() * n * 6 * static_cast<std::int64_t>(sizeof(float)));
}

void sum_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  auto a = uniform(n, 1);
  event_timer t;
  t.run(state, [&] {
    fx::tensor<float, fx::cuda> s = fx::reduce_sum(a);
    benchmark::DoNotOptimize(s.data());
  });
  state.SetBytesProcessed(state.iterations() * n * static_cast<std::int64_t>(sizeof(float)));
}

void sgemm_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  fx::tensor<float, fx::cuda> a(uniform({n, n}, 1)), b(uniform({n, n}, 2));
  event_timer t;
  t.run(state, [&] {
    fx::tensor<float, fx::cuda> c = fx::matmul(a, b);
    benchmark::DoNotOptimize(c.data());
  });
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations() * 1e-12,
                                                 benchmark::Counter::kIsRate);
}

void sgemm_cublas(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  fx::tensor<float, fx::cuda> a(uniform({n, n}, 1)), b(uniform({n, n}, 2));
  fx::tensor<float, fx::cuda> c(fx::shape{n, n});
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    state.SkipWithError("cublasCreate failed");
    return;
  }
  const float one = 1.f, zero = 0.f;
  const int in = static_cast<int>(n);
  event_timer t;
  t.run(state, [&] {  // row-major C = A B is column-major C^T = B^T A^T
    cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, in, in, in, &one, b.data(), in, a.data(), in, &zero, c.mutable_data(), in);
  });
  cublasDestroy(h);
  state.counters["TFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations() * 1e-12,
                                                 benchmark::Counter::kIsRate);
}

/// fx::conv2d on the CNN's second convolution at batch state.range(0): the forward pass alone
/// (Backward false), or the forward pass and the input and filter gradients for a given dy through
/// the tape (three products of the same size). state.range(1): 0 through im2col; 1 the library's
/// choice per pass (the fastest of im2col and cuDNN's two layouts, timed on the first call, so
/// cuDNN may run only some passes); 2 every pass through cuDNN in NHWC, 3 in NCHW (its fastest
/// deterministic algorithm, untimed against the others).
template <bool Backward>
void conv_fluxion(benchmark::State& state) {
  const fx::index_t batch = state.range(0), hw = 14, ci = 32, co = 64, k = 5;
  if (state.range(1) && !fx::cudnn_built) {
    state.SkipWithError("built without cuDNN (FLUXION_USE_CUDNN)");
    return;
  }
  fx::allow_cudnn(state.range(1) != 0);
  const bool forced = state.range(1) >= 2;
  fx::detail::cudnn_always() = forced;
  fx::detail::cudnn_layouts() = forced ? int(state.range(1) - 1) : 0;
  const long passes = fx::detail::cudnn_passes().load(), nchw = fx::detail::cudnn_nchw_passes().load();
  const auto mallocs = fx::memory::stats<fx::cuda>().system_allocations;
  fx::tensor<float, fx::cuda> x(uniform({batch, hw, hw, ci}, 1));
  fx::tensor<float, fx::cuda> w(uniform({k, k, ci, co}, 2));
  fx::tensor<float, fx::cuda> dy(uniform({batch, hw, hw, co}, 3));
  event_timer t;
  t.run(state, [&] {
    if constexpr (Backward) {
      fx::gradient_tape tape;
      tape.watch(x);
      tape.watch(w);
      fx::tensor<float, fx::cuda> y = fx::conv2d(x, w, 1, fx::padding::same);
      auto g = tape.gradient(y, {std::cref(x), std::cref(w)}, dy);
      benchmark::DoNotOptimize(g[1].data());
    } else {
      fx::tensor<float, fx::cuda> y = fx::conv2d(x, w, 1, fx::padding::same);
      benchmark::DoNotOptimize(y.data());
    }
  });
  // The path measured is the path named: cuDNN ran every pass, or none.
  if (state.range(1) && fx::detail::cudnn_passes().load() == passes) state.SkipWithError("cuDNN was not used");
  if (!state.range(1) && fx::detail::cudnn_passes().load() != passes) state.SkipWithError("cuDNN was used");
  if (state.range(1) == 3 && fx::detail::cudnn_nchw_passes().load() == nchw) state.SkipWithError("NCHW was not used");
  if (state.range(1) == 2 && fx::detail::cudnn_nchw_passes().load() != nchw) state.SkipWithError("NCHW was used");
  fx::allow_cudnn(true);
  fx::detail::cudnn_always() = false;
  fx::detail::cudnn_layouts() = 0;
  if (state.range(1)) report_cudnn_routes_at_exit();
  // Device allocations that missed the cache: in steady state there should be none.
  state.counters["cudaMalloc"] = double(fx::memory::stats<fx::cuda>().system_allocations - mallocs);
  const double flops = 2.0 * batch * hw * hw * co * (k * k * ci) * (Backward ? 3 : 1);
  state.counters["TFLOP/s"] = benchmark::Counter(flops * state.iterations() * 1e-12, benchmark::Counter::kIsRate);
}

/// The three products conv_fluxion<true> makes, alone, on buffers of the im2col matrix's shape
/// (P = batch 14 14 rows, K = 5 5 32 columns): col w, dy w^T and col^T dy. conv_fluxion's time
/// over this is what building the im2col matrix and gathering it back costs.
void conv_products_fluxion(benchmark::State& state) {
  const fx::index_t p = state.range(0) * 14 * 14, k = 5 * 5 * 32, co = 64;
  fx::tensor<float, fx::cuda> col(uniform({p, k}, 1)), w(uniform({k, co}, 2)), dy(uniform({p, co}, 3));
  event_timer t;
  t.run(state, [&] {
    fx::tensor<float, fx::cuda> y = fx::matmul(col, w);
    fx::tensor<float, fx::cuda> dcol = fx::matmul(dy, w, fx::transpose_b);
    fx::tensor<float, fx::cuda> dw = fx::matmul(col, dy, fx::transpose_a);
    benchmark::DoNotOptimize(dw.data());
  });
  state.counters["TFLOP/s"] = benchmark::Counter(3 * 2.0 * p * k * co * state.iterations() * 1e-12,
                                                 benchmark::Counter::kIsRate);
}

/// fx::depthwise_conv2d on fx::cuda (the library's own kernels, backend/cuda/window.hpp) at batch
/// 32 on bench/depthwise_conv.bench.cpp's layers (state.range(0): MobileNet v1's 56x56x128 3x3 at
/// stride 1 and 2, its 14x14x512 3x3, ConvNeXt's 14x14x384 7x7; same padding). state.range(1): 0
/// the forward pass, 1 the forward pass and the input gradient for a given dy through the tape, 2
/// the forward pass and the filter gradient. torch_peer.py times PyTorch's grouped convolution
/// (groups = channels) the same three ways, in NCHW and channels_last.
void depthwise_fluxion(benchmark::State& state) {
  struct layer { fx::index_t hw, channels, kernel, stride; };
  constexpr layer layers[] = {{56, 128, 3, 1}, {56, 128, 3, 2}, {14, 512, 3, 1}, {14, 384, 7, 1}};
  const layer l = layers[state.range(0)];
  const fx::index_t batch = 32, out = (l.hw + l.stride - 1) / l.stride;
  fx::tensor<float, fx::cuda> x(uniform({batch, l.hw, l.hw, l.channels}, 1));
  fx::tensor<float, fx::cuda> w(uniform({l.kernel, l.kernel, l.channels, 1}, 2));
  fx::tensor<float, fx::cuda> dy(uniform({batch, out, out, l.channels}, 3));
  const int mode = static_cast<int>(state.range(1));
  event_timer t;
  t.run(state, [&] {
    if (mode == 0) {
      fx::tensor<float, fx::cuda> y = fx::depthwise_conv2d(x, w, l.stride, fx::padding::same);
      benchmark::DoNotOptimize(y.data());
    } else {
      fx::gradient_tape tape;
      tape.watch(mode == 1 ? x : w);
      fx::tensor<float, fx::cuda> y = fx::depthwise_conv2d(x, w, l.stride, fx::padding::same);
      auto g = tape.gradient(y, mode == 1 ? x : w, dy);
      benchmark::DoNotOptimize(g.data());
    }
  });
  // Bytes the pass must move at least: its operands and result once each.
  const double x_bytes = 4.0 * batch * l.hw * l.hw * l.channels, y_bytes = 4.0 * batch * out * out * l.channels;
  const double bytes = x_bytes + y_bytes + (mode ? (mode == 1 ? x_bytes + y_bytes : y_bytes) : 0);
  state.counters["GB/s"] = benchmark::Counter(bytes * state.iterations(), benchmark::Counter::kIsRate);
}

/// Times `once` (a copy of n floats that returns when it is done) on the host, after one warm-up.
template <class Once>
void time_copies(benchmark::State& state, Once& once, fx::index_t n) {
  once();
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.SetBytesProcessed(state.iterations() * n * static_cast<std::int64_t>(sizeof(float)));
}

/// Host to device, 16M floats, timed on the host until the copy is done: fx::to<fx::cuda> (pinned
/// staging in 4 MiB pieces filled by the thread pool since stop 51, copies queued) against cudaMemcpy from the same pageable buffer and cudaMemcpyAsync from
/// pinned memory (the link's ceiling).
enum class upload { fluxion, pageable, pinned };

template <upload How>
void upload_16m(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  fx::random::generator gen{1};
  fx::tensor<float> host = fx::random::uniform<float>({n}, gen, -1.f, 1.f);
  fx::tensor<float, fx::cuda> dev(fx::shape{n});
  float* pinned = nullptr;
  if (How == upload::pinned) {
    check(cudaMallocHost(&pinned, n * sizeof(float)), "cudaMallocHost");
    std::memcpy(pinned, host.data(), n * sizeof(float));
  }
  auto once = [&] {
    if constexpr (How == upload::fluxion) {
      fx::tensor<float, fx::cuda> d = fx::to<fx::cuda>(host);
      benchmark::DoNotOptimize(d.data());
      check(cudaDeviceSynchronize(), "sync");
    } else if constexpr (How == upload::pageable) {
      check(cudaMemcpy(dev.mutable_data(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    } else {
      check(cudaMemcpyAsync(dev.mutable_data(), pinned, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpyAsync");
      check(cudaDeviceSynchronize(), "sync");
    }
  };
  time_copies(state, once, n);
  if (pinned) cudaFreeHost(pinned);
}

/// Device to host, 16M floats: fx::to<fx::cpu> (pieces through two pinned blocks, emptied by the
/// thread pool, since stop 51) against cudaMemcpy into the same pageable buffer and into pinned
/// memory (the link's ceiling).
template <upload How>
void download_16m(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  fx::random::generator gen{1};
  fx::tensor<float, fx::cuda> dev = fx::to<fx::cuda>(fx::random::uniform<float>({n}, gen, -1.f, 1.f));
  fx::tensor<float> host(fx::shape{n});
  float* pinned = nullptr;
  if (How == upload::pinned) check(cudaMallocHost(&pinned, n * sizeof(float)), "cudaMallocHost");
  check(cudaDeviceSynchronize(), "sync");
  auto once = [&] {
    if constexpr (How == upload::fluxion) {
      fx::tensor<float> h = fx::to<fx::cpu>(dev);
      benchmark::DoNotOptimize(h.data());
    } else {
      check(cudaMemcpy(How == upload::pinned ? pinned : host.mutable_data(), dev.data(), n * sizeof(float),
                       cudaMemcpyDeviceToHost),
            "cudaMemcpy");
    }
  };
  time_copies(state, once, n);
  if (pinned) cudaFreeHost(pinned);
}

constexpr fx::index_t m16 = fx::index_t{1} << 24;

}  // namespace

BENCHMARK_TEMPLATE(upload_16m, upload::fluxion)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(upload_16m, upload::pageable)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(upload_16m, upload::pinned)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(download_16m, upload::fluxion)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(download_16m, upload::pageable)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(download_16m, upload::pinned)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(copy_d2d)->Arg(m16)->Arg(4 * m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(chain_fluxion)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(chain_handwritten)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(sum_fluxion)->Arg(m16)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(sgemm_fluxion)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(sgemm_cublas)->Arg(1024)->Arg(4096)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(conv_fluxion, false)->ArgsProduct({{64, 256}, {1, 0, 2, 3}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(conv_fluxion, true)->ArgsProduct({{64, 256}, {1, 0, 2, 3}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(conv_products_fluxion)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(depthwise_fluxion)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}})->UseManualTime()->Unit(benchmark::kMicrosecond);
