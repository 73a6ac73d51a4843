// Reversible blocks and gradient checkpointing against ordinary backpropagation (issue 13), one run:
//
//   revnet_step/blocks:3|9/reversible:0|1/fixed_point:0|16
//                                           the RevNet of examples/revnet_model.hpp (RevNet-38-like
//                                           and RevNet-110-like), batch 32, 32x32x3: forward, sparse
//                                           softmax cross-entropy, the gradients of every variable;
//                                           fixed_point:16 runs the couplings on a grid of 2^-16
//                                           (set_fixed_point: exact reconstruction), both paths
//   deep_mlp_step/segments:0|8               64 dense layers of 128 units with relu at batch 512:
//                                           stored (0), or 8 nn::recompute segments of 8 layers
//
// Time is the wall time of a step; the counter activation_MiB is the peak of fluxion's tensor
// memory during the step minus what was live before it (the weights: no optimizer here), from
// fx::memory_stats(). Each case first checks its gradients against the ordinary path's (the same
// model with set_reversible(false), or the stored network with the same weights) and reports the
// worst relative difference (|a - b|_2 / |b|_2 per variable) as grad_rel_err; beyond 5e-2 (RevNet,
// float: the reconstruction's rounding error, amplified by batch norms whose channels vary little,
// reaches 1e-2 in the first stage's first block; 1e-4 on the fixed-point grid, the bound) or
// 1e-5 (recompute, the same arithmetic) the case
// fails (SkipWithError), so the fast path cannot be a wrong one. docs/benchmarks.md's figures come from `build/bench/revnet --benchmark_repetitions=3`.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include <fluxion/fluxion.hpp>

#include "../examples/revnet_model.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

template <class Net, class Labels>
std::vector<fx::tensor<float>> step(Net& net, const fx::tensor<float>& x, const Labels& y) {
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
  return tape.gradient(loss, net.trainable_variables());
}

/// The largest |a - b|_2 / |b|_2 over the variables whose gradient does not vanish.
double worst_relative(const std::vector<fx::tensor<float>>& a, const std::vector<fx::tensor<float>>& b) {
  double largest = 0, worst = 0;
  std::vector<double> norms;
  for (const auto& g : b) norms.push_back(fx::tensor<float>(fx::sqrt(fx::reduce_sum(fx::square(g)))).item());
  for (double n : norms) largest = std::max(largest, n);
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (norms[i] < 1e-4 * largest) continue;
    worst = std::max(worst, fx::tensor<float>(fx::sqrt(fx::reduce_sum(fx::square(a[i] - b[i])))).item() / norms[i]);
  }
  return worst;
}

template <class Net, class Labels>
void measure(benchmark::State& state, Net& net, const fx::tensor<float>& x, const Labels& y) {
  double peak = 0;
  for (auto _ : state) {
    fx::memory::reset_peak();
    const auto before = fx::memory_stats().bytes_in_use;
    benchmark::DoNotOptimize(step(net, x, y));
    peak = std::max(peak, static_cast<double>(fx::memory_stats().peak_bytes_in_use - before));
  }
  state.counters["activation_MiB"] = peak / (1 << 20);
}

template <int N>
void revnet_step(benchmark::State& state) {
  fx::random::generator gen{38};
  revnet_model::revnet<N> net;
  net.initialize(gen);
  const fx::tensor<float> x = fx::random::uniform<float>({32, 32, 32, 3}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({32}, gen, 0, 10);
  const int bits = static_cast<int>(state.range(2));
  revnet_model::set_fixed_point(net, bits);
  revnet_model::set_reversible(net, false);
  const auto reference = step(net, x, y);
  revnet_model::set_reversible(net, state.range(1) != 0);
  const double err = worst_relative(step(net, x, y), reference);
  state.counters["grad_rel_err"] = err;
  // On the grid the reconstruction is exact, and the float bound (1e-4) must hold.
  if (!(err <= (bits > 0 ? 1e-4 : 5e-2))) state.SkipWithError("reversible gradients differ from ordinary backpropagation's");
  if (bits > 0 && !revnet_model::reconstruction_exact(net)) state.SkipWithError("the couplings left the grid's exact range");
  measure(state, net, x, y);
}

using eight = nn::sequential_t<nn::input<128>, nn::dense<128>, nn::relu, nn::dense<128>, nn::relu, nn::dense<128>,
                               nn::relu, nn::dense<128>, nn::relu, nn::dense<128>, nn::relu, nn::dense<128>, nn::relu,
                               nn::dense<128>, nn::relu, nn::dense<128>, nn::relu>;
using seg = nn::recompute<eight>;

void deep_mlp_step(benchmark::State& state) {
  fx::random::generator gen{64};
  auto plain = nn::sequential(gen, nn::input<128>{}, eight{}, eight{}, eight{}, eight{}, eight{}, eight{}, eight{},
                              eight{}, nn::dense<10>{});
  auto checkpointed = nn::sequential(gen, nn::input<128>{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{}, seg{},
                                     nn::dense<10>{});
  auto a = plain.variables(), b = checkpointed.variables();
  for (std::size_t i = 0; i < a.size(); ++i) b[i]->assign(a[i]->peek());
  const fx::tensor<float> x = fx::random::normal<float>({512, 128}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({512}, gen, 0, 10);
  const auto reference = step(plain, x, y);
  if (state.range(0) == 0) {
    measure(state, plain, x, y);
    return;
  }
  const double err = worst_relative(step(checkpointed, x, y), reference);
  state.counters["grad_rel_err"] = err;
  if (!(err <= 1e-5)) state.SkipWithError("recomputed gradients differ from the stored network's");
  measure(state, checkpointed, x, y);
}

}  // namespace

BENCHMARK(revnet_step<3>)->ArgNames({"blocks", "reversible", "fixed_point"})->Args({3, 0, 0})->Args({3, 1, 0})->Args({3, 0, 16})->Args({3, 1, 16})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(revnet_step<9>)->ArgNames({"blocks", "reversible", "fixed_point"})->Args({9, 0, 0})->Args({9, 1, 0})->Args({9, 0, 16})->Args({9, 1, 16})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(deep_mlp_step)->ArgNames({"segments"})->Arg(0)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();
