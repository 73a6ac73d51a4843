// The thread count both libraries of a model benchmark get (nn.bench.cpp, epoch.bench.cpp), and
// the argument list that runs each case at 1 and 2 threads.
#pragma once

#include <benchmark/benchmark.h>

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
