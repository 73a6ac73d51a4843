// Shared by bench/cuda/*.bench.cu: CUDA error checks, per-iteration timing with CUDA events, and
// the report of cuDNN's routes.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#include <fluxion/backend/cuda/cudnn.hpp>
#include <fluxion/backend/cuda/stream.hpp>

namespace {

/// Prints the routes cuDNN's planner chose (detail::cudnn::report()) once, when the program ends.
/// Printed after each benchmark that used cuDNN, they cut into Google Benchmark's result lines on
/// the same terminal, and stop 48's log lost some medians that way.
void report_cudnn_routes_at_exit() {
#if FLUXION_HAVE_CUDNN
  static const bool registered = [] {
    std::atexit([] { std::fprintf(stderr, "cuDNN routes:\n%s", fluxion::detail::cudnn::report().c_str()); });
    return true;
  }();
  (void)registered;
#endif
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// Times one iteration of f with CUDA events on this thread's stream, where fluxion queues its work
/// (a kernel of the benchmark's own on the legacy default stream is ordered with it).
struct event_timer {
  cudaEvent_t start, stop;
  event_timer() {
    check(cudaEventCreate(&start), "cudaEventCreate");
    check(cudaEventCreate(&stop), "cudaEventCreate");
  }
  ~event_timer() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  template <class F>
  void run(benchmark::State& state, F&& f) {
    f();  // warm-up: module load, cache fill
    check(cudaDeviceSynchronize(), "warm-up");
    for (auto _ : state) {
      cudaEventRecord(start, fluxion::detail::current_stream());
      f();
      cudaEventRecord(stop, fluxion::detail::current_stream());
      check(cudaEventSynchronize(stop), "iteration");
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      state.SetIterationTime(ms * 1e-3);
    }
  }
};

}  // namespace
