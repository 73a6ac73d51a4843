// The thread count both libraries of a benchmark get (nn.bench.cpp, epoch.bench.cpp, ...), and
// add_at_both_thread_counts, which registers a case at 1 and 2 threads (ordering.bench.cpp,
// optim.bench.cpp).
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <fluxion/fluxion.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#endif

inline void set_threads(int n) {
  fluxion::set_num_threads(n);
#if FLUXION_BENCH_HAVE_TORCH
  at::set_num_threads(n);
#endif
}

/// Registers `make`'s work as name/peer at 1 and 2 threads; peers are registered next to each other,
/// so that both see the same load on a shared machine. `make` builds the inputs; the work it
/// returns is timed.
inline void add_at_both_thread_counts(const std::string& name, const std::string& peer,
                                      std::function<std::function<void()>()> make) {
  for (int threads : {1, 2})
    benchmark::RegisterBenchmark((name + "/" + peer + "/threads:" + std::to_string(threads)).c_str(),
                                 [make, threads](benchmark::State& state) {
                                   set_threads(threads);
                                   auto work = make();
                                   std::this_thread::sleep_for(std::chrono::milliseconds(300));
                                   for (auto _ : state) work();
                                 })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond)
        ->MinTime(0.3);
}
