// fluxion's header-only sgemm against OpenBLAS (cblas_sgemm) and LibTorch (at::mm_out), in the same
// run, with 1 and 2 threads, at square sizes and at the shapes of a dense network and its backprop.
// Peers run next to each other so that they see the same load on a shared machine.
//
// Shapes read M x K x N for the forward product Y(M x N) = X(M x K) * W(K x N); "dW" is X^T * dY
// (A^T * B) and "dX" is dY * W^T (A * B^T). Counters:
//   GFLOPS  achieved 2*M*N*K / time
//   peak    fraction of this machine's peak = threads * FMA floats per cycle * 2 * clock,
//           the clock measured with a chain of dependent adds (printed at start, next to the
//           base clock /proc/cpuinfo reports)
//
// sgemm/paired/... alternates fluxion and OpenBLAS and reports the median ratio of their times (see
// run_paired): the figure to read on a shared machine.
//
//   ./gemm.bench --benchmark_filter='/512x' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
//   ./gemm.bench --benchmark_filter=paired
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fluxion/backend/cpu/gemm.hpp>

#if FLUXION_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace cpu = fluxion::detail::kernels;
using fluxion::index_t;

namespace {

double cpuinfo_mhz() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("cpu MHz", 0) == 0) return std::stod(line.substr(line.find(':') + 1));
  return 0;
}

// The running clock: a chain of dependent integer adds retires one per cycle, timed in thread CPU
// time so that a busy machine preempting us does not count. A VM's "cpu MHz" is the base clock,
// and cores boost above it.
double measured_mhz() {
#if defined(__x86_64__)
  auto cpu_seconds = [] {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  double best = 1e30;
  const long iterations = 20'000'000;
  for (int rep = 0; rep < 5; ++rep) {
    long x = 0, n = iterations;
    const double t0 = cpu_seconds();
    asm volatile(
        "1:\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
        "dec %1\n\tjnz 1b"
        : "+r"(x), "+r"(n));
    best = std::min(best, cpu_seconds() - t0);
  }
  return 10.0 * static_cast<double>(iterations) / best * 1e-6;
#else
  return cpuinfo_mhz();
#endif
}

// FMA lanes per cycle per core: two 256-bit FMA pipes on Zen 2/3/4 and on Intel cores since Haswell,
// that is 16 floats, whether the code issues AVX2 (two 8-wide FMAs a cycle) or AVX-512 (Zen 4 splits
// each 16-wide FMA over both pipes, one a cycle). Intel server cores with a second 512-bit FMA unit
// do 32; set FLUXION_BENCH_FMA_FLOATS to override.
#ifndef FLUXION_BENCH_FMA_FLOATS
#define FLUXION_BENCH_FMA_FLOATS 16
#endif
constexpr int fma_floats_per_cycle = FLUXION_BENCH_FMA_FLOATS;

double peak_flops(int threads) {
  static const double mhz = measured_mhz();
  return threads * static_cast<double>(fma_floats_per_cycle) * 2 * mhz * 1e6;
}

struct shape {
  const char* name;
  index_t m, n, k;
  bool ta, tb;
};

struct operands {
  std::vector<float> a, b, c;
  operands(const shape& s)
      : a(static_cast<std::size_t>(s.m * s.k)),
        b(static_cast<std::size_t>(s.k * s.n)),
        c(static_cast<std::size_t>(s.m * s.n)) {
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (auto& x : a) x = dist(rng);
    for (auto& x : b) x = dist(rng);
  }
};

void set_counters(benchmark::State& state, const shape& s, int threads) {
  const double flops = 2.0 * s.m * s.n * s.k;
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak"] =
      benchmark::Counter(flops / peak_flops(threads), benchmark::Counter::kIsIterationInvariantRate);
}

// OpenBLAS's idle workers spin for a while (about 0.1 s) after each call and would take the second
// core from the next benchmark; let them go to sleep first.
void let_peers_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

// One product C = op(A) op(B) of shape s, as stored by `operands`, by each peer.
void call_fluxion(const shape& s, operands& o) {
  const index_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  cpu::gemm<float>(s.ta ? cpu::transpose::yes : cpu::transpose::no, s.tb ? cpu::transpose::yes : cpu::transpose::no,
                   s.m, s.n, s.k, 1.f, o.a.data(), lda, o.b.data(), ldb, 0.f, o.c.data(), s.n);
  benchmark::DoNotOptimize(o.c.data());
  benchmark::ClobberMemory();
}

#if FLUXION_BENCH_HAVE_OPENBLAS
void call_openblas(const shape& s, operands& o) {
  const index_t lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
  cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k), 1.f, o.a.data(),
              static_cast<int>(lda), o.b.data(), static_cast<int>(ldb), 0.f, o.c.data(), static_cast<int>(s.n));
  benchmark::DoNotOptimize(o.c.data());
  benchmark::ClobberMemory();
}
#endif

void run_fluxion(benchmark::State& state, shape s, int threads) {
  fluxion::set_num_threads(threads);
  let_peers_settle();
  operands o(s);
  for (auto _ : state) call_fluxion(s, o);
  set_counters(state, s, threads);
}

#if FLUXION_BENCH_HAVE_OPENBLAS
void run_openblas(benchmark::State& state, shape s, int threads) {
  openblas_set_num_threads(threads);
  operands o(s);
  for (auto _ : state) call_openblas(s, o);
  set_counters(state, s, threads);
}
#endif

#if FLUXION_BENCH_HAVE_OPENBLAS
// Paired: on a shared machine the speed drifts over seconds, so peers timed one after the other can
// differ by 20% for no reason of their own. Here fluxion and OpenBLAS alternate, a batch of calls
// (about 20 ms) each, 21 times, and the counter `ratio` is the median over the 21 pairs of
// OpenBLAS's time / fluxion's time: fluxion's speed as a fraction of OpenBLAS's (above 1: faster).
// `ratio_q25` and `ratio_q75` give the spread. With 2 threads each batch is followed by 150 ms of
// sleep, so that the peer's spinning workers have gone to sleep before the other one runs, and
// starts with one untimed call: waking a sleeping worker on a VM can take milliseconds, which a
// program calling GEMM in a loop pays once, not per call.
void run_paired(benchmark::State& state, shape s, int threads) {
  fluxion::set_num_threads(threads);
  openblas_set_num_threads(threads);
  operands o(s);
  auto fluxion_once = [&] { call_fluxion(s, o); };
  auto openblas_once = [&] { call_openblas(s, o); };
  using clock = std::chrono::steady_clock;
  const auto pause = std::chrono::milliseconds(threads > 1 ? 150 : 5);
  auto batch = [&](auto& call, int calls) {
    call();  // after the pause: wakes the peer's threads, untimed
    const auto t0 = clock::now();
    for (int i = 0; i < calls; ++i) call();
    const double seconds = std::chrono::duration<double>(clock::now() - t0).count() / calls;
    std::this_thread::sleep_for(pause);
    return seconds;
  };
  constexpr int pairs = 21;
  for (auto _ : state) {
    // Warm both up, and size a batch to about 20 ms.
    fluxion_once();
    openblas_once();
    std::this_thread::sleep_for(pause);
    const double once = batch(fluxion_once, 3);
    const int calls = std::max(1, static_cast<int>(0.02 / once));
    std::vector<double> ratios, fluxion_times, openblas_times;
    double total = 0;
    for (int pair = 0; pair < pairs; ++pair) {
      const double f = batch(fluxion_once, calls), b = batch(openblas_once, calls);
      ratios.push_back(b / f);
      fluxion_times.push_back(f);
      openblas_times.push_back(b);
      total += f;
    }
    std::sort(ratios.begin(), ratios.end());
    std::sort(fluxion_times.begin(), fluxion_times.end());
    std::sort(openblas_times.begin(), openblas_times.end());
    const double flops = 2.0 * s.m * s.n * s.k;
    state.counters["ratio"] = ratios[pairs / 2];
    state.counters["ratio_q25"] = ratios[pairs / 4];
    state.counters["ratio_q75"] = ratios[3 * pairs / 4];
    state.counters["fluxion_GFLOPS"] = flops / fluxion_times[pairs / 2] * 1e-9;
    state.counters["openblas_GFLOPS"] = flops / openblas_times[pairs / 2] * 1e-9;
    state.counters["fluxion_peak"] = flops / fluxion_times[pairs / 2] / peak_flops(threads);
    state.SetIterationTime(total / pairs);
  }
}
#endif

#if FLUXION_BENCH_HAVE_TORCH
void run_torch(benchmark::State& state, shape s, int threads) {
  at::set_num_threads(threads);
#if FLUXION_BENCH_HAVE_OPENBLAS
  openblas_set_num_threads(threads);  // Debian's LibTorch runs mm on OpenBLAS, which at:: does not size
#endif
  torch::manual_seed(1);
  // Stored as the BLAS call above stores them; transposes are views, as autograd produces them.
  torch::Tensor a = s.ta ? torch::rand({s.k, s.m}).t() : torch::rand({s.m, s.k});
  torch::Tensor b = s.tb ? torch::rand({s.n, s.k}).t() : torch::rand({s.k, s.n});
  torch::Tensor c = torch::empty({s.m, s.n});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    at::mm_out(c, a, b);
    benchmark::DoNotOptimize(c.data_ptr());
    benchmark::ClobberMemory();
  }
  set_counters(state, s, threads);
}
#endif

const shape shapes[] = {
    {"32x32x32", 32, 32, 32, false, false},
    {"64x64x64", 64, 64, 64, false, false},
    {"128x128x128", 128, 128, 128, false, false},
    {"256x256x256", 256, 256, 256, false, false},
    {"512x512x512", 512, 512, 512, false, false},
    {"1024x1024x1024", 1024, 1024, 1024, false, false},
    {"2048x2048x2048", 2048, 2048, 2048, false, false},
    {"64x784x256", 64, 256, 784, false, false},
    {"64x784x256/dW", 784, 256, 64, true, false},
    {"64x784x256/dX", 64, 784, 256, false, true},
    {"64x256x10", 64, 10, 256, false, false},
    {"64x256x10/dW", 256, 10, 64, true, false},
    {"64x256x10/dX", 64, 256, 10, false, true},
    {"64x3136x1024", 64, 1024, 3136, false, false},
    {"64x3136x1024/dW", 3136, 1024, 64, true, false},
    {"64x3136x1024/dX", 64, 3136, 1024, false, true},
    {"1x784x256", 1, 256, 784, false, false},      // batch-1 inference: a matrix-vector product
    {"1x3136x1024", 1, 1024, 3136, false, false},
};

const int registered = [] {
  std::printf(
      "peak per thread: %d FMA floats a cycle x 2 flops x %.0f MHz (measured; /proc/cpuinfo says %.0f)"
      " = %.1f GFLOP/s; fluxion's vectors hold %d floats\n",
      fma_floats_per_cycle, measured_mhz(), cpuinfo_mhz(), peak_flops(1) * 1e-9,
      static_cast<int>(cpu::simd_ops<float>::width));
  std::fflush(stdout);
  for (const shape& s : shapes)
    for (int threads : {1, 2}) {
      const std::string suffix = std::string("/") + s.name + "/threads:" + std::to_string(threads);
      const double seconds = 2.0 * s.m * s.n * s.k > 1e9 ? 1.0 : 0.3;
      benchmark::RegisterBenchmark(("sgemm/fluxion" + suffix).c_str(), run_fluxion, s, threads)
          ->UseRealTime()
          ->MinTime(seconds);
#if FLUXION_BENCH_HAVE_OPENBLAS
      benchmark::RegisterBenchmark(("sgemm/openblas" + suffix).c_str(), run_openblas, s, threads)
          ->UseRealTime()
          ->MinTime(seconds);
#endif
#if FLUXION_BENCH_HAVE_TORCH
      benchmark::RegisterBenchmark(("sgemm/torch" + suffix).c_str(), run_torch, s, threads)
          ->UseRealTime()
          ->MinTime(seconds);
#endif
#if FLUXION_BENCH_HAVE_OPENBLAS
      benchmark::RegisterBenchmark(("sgemm/paired" + suffix).c_str(), run_paired, s, threads)
          ->UseManualTime()
          ->Iterations(1);
#endif
    }
  return 0;
}();

}  // namespace
