// Fused elementwise statements against the peers a user would otherwise pick, in one run:
//   chain: r = a*b + c*d - sin(e)        add: r = a + b
//   dot:   s = sum(a*b)                  colsum: s = sum over rows of where(y > 0, g, 0), (rows, 256)
//          (a relu's bias gradient: a reduction of an expression over every axis but the last)
//   masked: r = where(keep && x > y, x * y, 0) with keep a random bool tensor (a user's mask)
//   count:  s = sum(cast<float>(x > y))  (an accuracy's count of hits)
//   rowmax: reduce_max(x, -1) and softmax: softmax(x, -1) over 1M floats in rows of `cols` (classes)
//   softmax_grad: the gradient of sum(softmax(x, -1) * w) with respect to x, the forward pass
//           included (an attention's or a classifier's softmax in a training step)
//   xent:   sparse softmax cross entropy of 1M logits in rows of `cols` and its gradient with respect
//           to the logits (a classifier's loss step): a tape, LibTorch's autograd
// Peers: xtensor (with xsimd), a hand-written scalar loop, a hand-written xsimd loop and, when
// found, LibTorch. Every case has the same inputs and writes a fresh result each iteration.
// Threads: fluxion and LibTorch run with the thread count in the benchmark's name; the hand
// loops and xtensor are single-threaded, so compare them at threads:1.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#define XTENSOR_USE_XSIMD 1
#include <xsimd/xsimd.hpp>
#include <xtensor/xadapt.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xnoalias.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xtensor.hpp>

#include <fluxion/fluxion.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace fx = fluxion;

namespace {

struct inputs {
  std::vector<fx::tensor<float>> t;
  explicit inputs(fx::index_t n) {
    fx::random::generator gen{7};
    for (int i = 0; i < 5; ++i) t.push_back(fx::random::uniform<float>({n}, gen, -1.f, 1.f));
  }
};

void set_threads(int n) {
  fx::set_num_threads(n);
#if FLUXION_BENCH_HAVE_TORCH
  at::set_num_threads(n);
#endif
}

void report(benchmark::State& state, fx::index_t n, int arrays) {
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * static_cast<std::int64_t>(sizeof(float)) * arrays);
}

/// rowmax and softmax: this many floats in rows of `cols`.
constexpr fx::index_t rows_total = 1 << 20;

// ---- chain: a*b + c*d - sin(e) ----

void chain_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  inputs in(n);
  const auto &a = in.t[0], &b = in.t[1], &c = in.t[2], &d = in.t[3], &e = in.t[4];
  for (auto _ : state) {
    fx::tensor<float> r = a * b + c * d - fx::sin(e);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 6);
}

void chain_xtensor(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  inputs in(static_cast<fx::index_t>(n));
  std::vector<xt::xtensor<float, 1>> x;
  for (auto& t : in.t) x.push_back(xt::adapt(t.to_vector(), std::vector<std::size_t>{n}));
  xt::xtensor<float, 1> r = xt::zeros<float>({n});
  for (auto _ : state) {
    xt::noalias(r) = x[0] * x[1] + x[2] * x[3] - xt::sin(x[4]);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, static_cast<fx::index_t>(n), 6);
}

void chain_loop(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  inputs in(n);
  std::vector<std::vector<float>> v;
  for (auto& t : in.t) v.push_back(t.to_vector());
  std::vector<float> r(static_cast<std::size_t>(n));
  for (auto _ : state) {
    const float *a = v[0].data(), *b = v[1].data(), *c = v[2].data(), *d = v[3].data(), *e = v[4].data();
    float* o = r.data();
    for (fx::index_t i = 0; i < n; ++i) o[i] = a[i] * b[i] + c[i] * d[i] - std::sin(e[i]);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 6);
}

void chain_xsimd_loop(benchmark::State& state) {
  using B = xsimd::batch<float>;
  const fx::index_t n = state.range(0);
  inputs in(n);
  std::vector<std::vector<float>> v;
  for (auto& t : in.t) v.push_back(t.to_vector());
  std::vector<float> r(static_cast<std::size_t>(n));
  for (auto _ : state) {
    const float *a = v[0].data(), *b = v[1].data(), *c = v[2].data(), *d = v[3].data(), *e = v[4].data();
    float* o = r.data();
    fx::index_t i = 0;
    constexpr fx::index_t W = B::size;
    for (; i + W <= n; i += W) {
      B x = B::load_unaligned(a + i) * B::load_unaligned(b + i) + B::load_unaligned(c + i) * B::load_unaligned(d + i) -
            xsimd::sin(B::load_unaligned(e + i));
      x.store_unaligned(o + i);
    }
    for (; i < n; ++i) o[i] = a[i] * b[i] + c[i] * d[i] - std::sin(e[i]);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 6);
}

#if FLUXION_BENCH_HAVE_TORCH
void chain_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  std::vector<torch::Tensor> t;
  for (int i = 0; i < 5; ++i) t.push_back(torch::rand({n}) * 2 - 1);
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = t[0] * t[1] + t[2] * t[3] - torch::sin(t[4]);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, n, 6);
}
#endif

// ---- add: a + b ----

void add_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  inputs in(n);
  for (auto _ : state) {
    fx::tensor<float> r = in.t[0] + in.t[1];
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 3);
}

void add_xtensor(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  inputs in(static_cast<fx::index_t>(n));
  xt::xtensor<float, 1> a = xt::adapt(in.t[0].to_vector(), std::vector<std::size_t>{n});
  xt::xtensor<float, 1> b = xt::adapt(in.t[1].to_vector(), std::vector<std::size_t>{n});
  xt::xtensor<float, 1> r = xt::zeros<float>({n});
  for (auto _ : state) {
    xt::noalias(r) = a + b;
    benchmark::DoNotOptimize(r.data());
  }
  report(state, static_cast<fx::index_t>(n), 3);
}

void add_loop(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  inputs in(n);
  auto a = in.t[0].to_vector(), b = in.t[1].to_vector();
  std::vector<float> r(static_cast<std::size_t>(n));
  for (auto _ : state) {
    for (fx::index_t i = 0; i < n; ++i) r[static_cast<std::size_t>(i)] = a[static_cast<std::size_t>(i)] + b[static_cast<std::size_t>(i)];
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 3);
}

#if FLUXION_BENCH_HAVE_TORCH
void add_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto a = torch::rand({n}), b = torch::rand({n});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = a + b;
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, n, 3);
}
#endif

// ---- dot: sum(a * b), and colsum: a relu's bias gradient ----

void dot_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  inputs in(n);
  for (auto _ : state) {
    fx::tensor<float> r = fx::reduce_sum(in.t[0] * in.t[1]);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 2);
}

void dot_xtensor(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  inputs in(static_cast<fx::index_t>(n));
  xt::xtensor<float, 1> a = xt::adapt(in.t[0].to_vector(), std::vector<std::size_t>{n});
  xt::xtensor<float, 1> b = xt::adapt(in.t[1].to_vector(), std::vector<std::size_t>{n});
  for (auto _ : state) {
    xt::xtensor<float, 0> r = xt::sum(a * b);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, static_cast<fx::index_t>(n), 2);
}

void dot_loop(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  inputs in(n);
  auto a = in.t[0].to_vector(), b = in.t[1].to_vector();
  for (auto _ : state) {
    float s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    benchmark::DoNotOptimize(s);
  }
  report(state, n, 2);
}

constexpr fx::index_t colsum_cols = 256;

void colsum_fluxion(benchmark::State& state) {
  const fx::index_t rows = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  fx::random::generator gen{8};
  const auto g = fx::random::uniform<float>({rows, colsum_cols}, gen, -1.f, 1.f);
  const auto y = fx::random::uniform<float>({rows, colsum_cols}, gen, -1.f, 1.f);
  for (auto _ : state) {
    fx::tensor<float> r = fx::reduce_sum(fx::where(y > 0.f, g, 0.f), 0);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, rows * colsum_cols, 2);
}

void colsum_xtensor(benchmark::State& state) {
  const std::size_t rows = static_cast<std::size_t>(state.range(0)), cols = colsum_cols;
  fx::random::generator gen{8};
  const auto gt = fx::random::uniform<float>({static_cast<fx::index_t>(rows), colsum_cols}, gen, -1.f, 1.f);
  const auto yt = fx::random::uniform<float>({static_cast<fx::index_t>(rows), colsum_cols}, gen, -1.f, 1.f);
  xt::xtensor<float, 2> g = xt::adapt(gt.to_vector(), std::vector<std::size_t>{rows, cols});
  xt::xtensor<float, 2> y = xt::adapt(yt.to_vector(), std::vector<std::size_t>{rows, cols});
  for (auto _ : state) {
    xt::xtensor<float, 1> r = xt::sum(xt::where(y > 0.f, g, 0.f), {0});
    benchmark::DoNotOptimize(r.data());
  }
  report(state, static_cast<fx::index_t>(rows * cols), 2);
}

void colsum_loop(benchmark::State& state) {
  const fx::index_t rows = state.range(0);
  fx::random::generator gen{8};
  const auto g = fx::random::uniform<float>({rows, colsum_cols}, gen, -1.f, 1.f).to_vector();
  const auto y = fx::random::uniform<float>({rows, colsum_cols}, gen, -1.f, 1.f).to_vector();
  std::vector<float> r(static_cast<std::size_t>(colsum_cols));
  for (auto _ : state) {
    std::fill(r.begin(), r.end(), 0.f);
    for (fx::index_t i = 0; i < rows; ++i)
      for (fx::index_t j = 0; j < colsum_cols; ++j) {
        const std::size_t k = static_cast<std::size_t>(i * colsum_cols + j);
        r[static_cast<std::size_t>(j)] += y[k] > 0.f ? g[k] : 0.f;
      }
    benchmark::DoNotOptimize(r.data());
  }
  report(state, rows * colsum_cols, 2);
}

// ---- masked: where(keep && x > y, x * y, 0); count: sum(cast<float>(x > y)) ----

struct mask_inputs {
  fx::tensor<float> x, y;
  fx::tensor<bool> keep;
  explicit mask_inputs(fx::index_t n) {
    fx::random::generator gen{9};
    x = fx::random::uniform<float>({n}, gen, -1.f, 1.f);
    y = fx::random::uniform<float>({n}, gen, -1.f, 1.f);
    keep = fx::random::uniform<float>({n}, gen) < 0.5f;  // random: a branch on it mispredicts half the time
  }
};

void masked_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  const mask_inputs in(n);
  for (auto _ : state) {
    fx::tensor<float> r = fx::where(in.keep && (in.x > in.y), in.x * in.y, 0.f);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 3);
}

void masked_xtensor(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  const mask_inputs in(n);
  const std::vector<std::size_t> s{static_cast<std::size_t>(n)};
  xt::xtensor<float, 1> x = xt::adapt(in.x.to_vector(), s), y = xt::adapt(in.y.to_vector(), s);
  xt::xtensor<bool, 1> keep = xt::adapt(in.keep.to_vector(), s);
  for (auto _ : state) {
    xt::xtensor<float, 1> r = xt::where(keep && (x > y), x * y, 0.f);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 3);
}

void masked_loop(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  const mask_inputs in(n);
  const auto x = in.x.to_vector(), y = in.y.to_vector();
  const auto keep = in.keep.to_vector();
  std::vector<float> r(x.size());
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i) r[i] = keep[i] && x[i] > y[i] ? x[i] * y[i] : 0.f;
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 3);
}

void count_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  const mask_inputs in(n);
  for (auto _ : state) {
    fx::tensor<float> s = fx::reduce_sum(fx::cast<float>(in.x > in.y));
    benchmark::DoNotOptimize(s.data());
  }
  report(state, n, 2);
}

void count_xtensor(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  const mask_inputs in(n);
  const std::vector<std::size_t> s{static_cast<std::size_t>(n)};
  xt::xtensor<float, 1> x = xt::adapt(in.x.to_vector(), s), y = xt::adapt(in.y.to_vector(), s);
  for (auto _ : state) {
    xt::xtensor<float, 0> r = xt::sum(xt::cast<float>(x > y));
    benchmark::DoNotOptimize(r.data());
  }
  report(state, n, 2);
}

void count_loop(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  const mask_inputs in(n);
  const auto x = in.x.to_vector(), y = in.y.to_vector();
  for (auto _ : state) {
    float s = 0.f;
    for (std::size_t i = 0; i < x.size(); ++i) s += static_cast<float>(x[i] > y[i]);
    benchmark::DoNotOptimize(s);
  }
  report(state, n, 2);
}

#if FLUXION_BENCH_HAVE_TORCH
void rowmax_torch(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto x = torch::rand({rows_total / cols, cols}) * 2 - 1;
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = std::get<0>(x.max(-1));
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, rows_total, 1);
}

void softmax_torch(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto x = torch::rand({rows_total / cols, cols}) * 2 - 1;
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = torch::softmax(x, -1);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, rows_total, 2);
}

void softmax_grad_torch(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto x = (torch::rand({rows_total / cols, cols}) * 2 - 1).requires_grad_(true);
  auto w = torch::rand({rows_total / cols, cols});
  for (auto _ : state) {
    auto loss = (torch::softmax(x, -1) * w).sum();
    auto g = torch::autograd::grad({loss}, {x})[0];
    benchmark::DoNotOptimize(g.data_ptr());
  }
  report(state, rows_total, 4);
}

void xent_torch(benchmark::State& state) {
  const fx::index_t cols = state.range(0), rows = rows_total / cols;
  set_threads(static_cast<int>(state.range(1)));
  auto x = (torch::rand({rows, cols}) * 2 - 1).requires_grad_(true);
  auto labels = torch::randint(cols, {rows}, torch::kLong);
  for (auto _ : state) {
    auto loss = torch::nn::functional::cross_entropy(x, labels);
    auto g = torch::autograd::grad({loss}, {x})[0];
    benchmark::DoNotOptimize(g.data_ptr());
  }
  report(state, rows_total, 2);
}

void masked_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto x = torch::rand({n}) * 2 - 1, y = torch::rand({n}) * 2 - 1, keep = torch::rand({n}) < 0.5;
  auto zero = torch::zeros({}, torch::kFloat);
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = torch::where(keep & (x > y), x * y, zero);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, n, 3);
}

void count_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto x = torch::rand({n}) * 2 - 1, y = torch::rand({n}) * 2 - 1;
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = (x > y).to(torch::kFloat).sum();
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, n, 2);
}
#endif

// ---- rowmax: reduce_max(x, -1); softmax: softmax(x, -1), 1M floats in rows of `cols` ----

void rowmax_fluxion(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  fx::random::generator gen{10};
  const auto x = fx::random::uniform<float>({rows_total / cols, cols}, gen, -1.f, 1.f);
  for (auto _ : state) {
    fx::tensor<float> r = fx::reduce_max(x, -1);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, x.size(), 1);
}

void softmax_fluxion(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  fx::random::generator gen{10};
  const auto x = fx::random::uniform<float>({rows_total / cols, cols}, gen, -1.f, 1.f);
  for (auto _ : state) {
    fx::tensor<float> r = fx::softmax(x);
    benchmark::DoNotOptimize(r.data());
  }
  report(state, x.size(), 2);
}

void softmax_grad_fluxion(benchmark::State& state) {
  const fx::index_t cols = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  fx::random::generator gen{10};
  const auto x = fx::random::uniform<float>({rows_total / cols, cols}, gen, -1.f, 1.f);
  const auto w = fx::random::uniform<float>({rows_total / cols, cols}, gen, 0.f, 1.f);
  auto pass = [&] {
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<float> loss = fx::reduce_sum(fx::softmax(x) * w);
    return tape.gradient(loss, x);
  };
  // Each row of the gradient sums to zero (softmax's gradients are): the pass is real.
  if (!fx::all(fx::abs(fx::reduce_sum(pass(), -1)) < 1e-5f)) state.SkipWithError("fluxion: the gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().data());
  report(state, rows_total, 4);
}

void xent_fluxion(benchmark::State& state) {
  const fx::index_t cols = state.range(0), rows = rows_total / cols;
  set_threads(static_cast<int>(state.range(1)));
  fx::random::generator gen{10};
  const auto x = fx::random::uniform<float>({rows, cols}, gen, -1.f, 1.f);
  const fx::tensor<std::int32_t> labels = fx::cast<std::int32_t>(fx::random::uniform<float>({rows}, gen, 0.f, float(cols) - 0.5f));
  auto pass = [&] {
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(x, labels);
    return tape.gradient(loss, x);
  };
  // Each row of the gradient sums to zero (softmax minus one-hot, over rows): the pass is real.
  if (!fx::all(fx::abs(fx::reduce_sum(pass(), -1)) < 1e-6f)) state.SkipWithError("fluxion: the gradient is wrong");
  for (auto _ : state) benchmark::DoNotOptimize(pass().data());
  report(state, rows_total, 2);
}

void rowmax_loop(benchmark::State& state) {
  const fx::index_t cols = state.range(0), rows = rows_total / cols;
  fx::random::generator gen{10};
  const auto x = fx::random::uniform<float>({rows, cols}, gen, -1.f, 1.f).to_vector();
  std::vector<float> r(static_cast<std::size_t>(rows));
  for (auto _ : state) {
    for (std::size_t i = 0; i < r.size(); ++i) {
      const float* p = x.data() + i * static_cast<std::size_t>(cols);
      float m = p[0];
      for (fx::index_t j = 1; j < cols; ++j) m = std::max(m, p[j]);
      r[i] = m;
    }
    benchmark::DoNotOptimize(r.data());
  }
  report(state, rows * cols, 1);
}

#if FLUXION_BENCH_HAVE_TORCH
void dot_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto a = torch::rand({n}), b = torch::rand({n});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = (a * b).sum();
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, n, 2);
}

void colsum_torch(benchmark::State& state) {
  const fx::index_t rows = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  auto g = torch::rand({rows, colsum_cols}) * 2 - 1, y = torch::rand({rows, colsum_cols}) * 2 - 1;
  auto zero = torch::zeros({}, torch::kFloat);
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto r = torch::where(y > 0, g, zero).sum(0);
    benchmark::DoNotOptimize(r.data_ptr());
  }
  report(state, rows * colsum_cols, 2);
}
#endif

void sizes_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (int th : {1, 2})
    for (std::int64_t n : {16, 1 << 10, 1 << 16, 1 << 20, 1 << 24}) b->Args({n, th});
}
void sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (std::int64_t n : {16, 1 << 10, 1 << 16, 1 << 20, 1 << 24}) b->Args({n, 1});
}
void mask_sizes_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (int th : {1, 2})
    for (std::int64_t n : {1 << 10, 1 << 16, 1 << 20}) b->Args({n, th});
}
void mask_sizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (std::int64_t n : {1 << 10, 1 << 16, 1 << 20}) b->Args({n, 1});
}
void classes_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"cols", "threads"});
  for (int th : {1, 2})
    for (std::int64_t cols : {10, 16, 32, 64, 128, 1000}) b->Args({cols, th});
}
void classes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"cols", "threads"});
  for (std::int64_t cols : {10, 16, 64, 1000}) b->Args({cols, 1});
}
void rows_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "threads"});
  for (int th : {1, 2})
    for (std::int64_t rows : {64, 1024, 16384}) b->Args({rows, th});
}
void rows_only(benchmark::internal::Benchmark* b) {
  b->ArgNames({"rows", "threads"});
  for (std::int64_t rows : {64, 1024, 16384}) b->Args({rows, 1});
}

}  // namespace

BENCHMARK(chain_fluxion)->Apply(sizes_threads);
BENCHMARK(chain_xtensor)->Apply(sizes);
BENCHMARK(chain_loop)->Apply(sizes);
BENCHMARK(chain_xsimd_loop)->Apply(sizes);
BENCHMARK(add_fluxion)->Apply(sizes_threads);
BENCHMARK(add_xtensor)->Apply(sizes);
BENCHMARK(add_loop)->Apply(sizes);
BENCHMARK(dot_fluxion)->Apply(sizes_threads);
BENCHMARK(dot_xtensor)->Apply(sizes);
BENCHMARK(dot_loop)->Apply(sizes);
BENCHMARK(colsum_fluxion)->Apply(rows_threads);
BENCHMARK(colsum_xtensor)->Apply(rows_only);
BENCHMARK(colsum_loop)->Apply(rows_only);
BENCHMARK(masked_fluxion)->Apply(mask_sizes_threads);
BENCHMARK(masked_xtensor)->Apply(mask_sizes);
BENCHMARK(masked_loop)->Apply(mask_sizes);
BENCHMARK(count_fluxion)->Apply(mask_sizes_threads);
BENCHMARK(count_xtensor)->Apply(mask_sizes);
BENCHMARK(count_loop)->Apply(mask_sizes);
BENCHMARK(rowmax_fluxion)->Apply(classes_threads);
BENCHMARK(rowmax_loop)->Apply(classes);
BENCHMARK(softmax_fluxion)->Apply(classes_threads);
BENCHMARK(softmax_grad_fluxion)->Apply(classes_threads);
BENCHMARK(xent_fluxion)->Apply(classes_threads);
#if FLUXION_BENCH_HAVE_TORCH
BENCHMARK(chain_torch)->Apply(sizes_threads);
BENCHMARK(add_torch)->Apply(sizes_threads);
BENCHMARK(dot_torch)->Apply(sizes_threads);
BENCHMARK(colsum_torch)->Apply(rows_threads);
BENCHMARK(masked_torch)->Apply(mask_sizes_threads);
BENCHMARK(count_torch)->Apply(mask_sizes_threads);
BENCHMARK(rowmax_torch)->Apply(classes_threads);
BENCHMARK(softmax_torch)->Apply(classes_threads);
BENCHMARK(softmax_grad_torch)->Apply(classes_threads);
BENCHMARK(xent_torch)->Apply(classes_threads);
#endif
