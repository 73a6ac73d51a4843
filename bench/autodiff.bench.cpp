// Reverse-mode autodiff against LibTorch autograd, in one run. Every case computes the value and
// the gradient(s) afresh each iteration (a new tape / a new autograd graph, gradients read back):
//
//   lse      y = logsumexp(x)                                        d/dx
//   normal   y = sum(-0.5 ((x - mu) / sigma)^2 - log sigma - 0.5 log 2pi)   d/dx, d/dmu, d/dsigma
//            (x, mu, sigma all vectors of n)
//   logreg   y = mean(softplus(-t * (X w)))   X (n/16, 16), w (16, 1), t (n/16, 1) in {-1, 1}   d/dw
//   chain    100 scalar statements under a tape, alternating y = sin(y) 0.9 + 0.1 y and
//            y = tanh(y) 0.5 + 0.5 y + 0.1, each materialized on its own; d/dx per whole chain
//   sinsq    y = sum(x sin x + x^2): graph mode fx::grad (no tape), graph fx::value_and_grad,
//            and the tape, against each other and LibTorch
//
// The first three use the gradient tape (what a training step uses); sinsq compares the modes.
// Before timing, each case checks its value and gradients once against a closed form computed in
// double (max |a - b| / max |b| <= 1e-4) and fails with SkipWithError otherwise; since every peer is
// checked against the same closed form, they agree with each other too. Inputs are drawn with
// fx::random and copied into LibTorch, so both peers see the same numbers. LibTorch's .grad is set
// to an undefined tensor after each iteration (`x.grad = None`), so each backward allocates a fresh
// gradient, as fluxion does. Second argument: the thread count given to both libraries.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fluxion/fluxion.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <torch/torch.h>
#endif

namespace fx = fluxion;

namespace {

constexpr double tolerance = 1e-4;
constexpr int chain_steps = 100;
constexpr int features = 16;

void set_threads(int n) {
  fx::set_num_threads(n);
#if FLUXION_BENCH_HAVE_TORCH
  at::set_num_threads(n);
#endif
}

// ---- checking ----------------------------------------------------------------------------------

/// max |got - want| / max |want|; `what` names the quantity in the error message.
bool close(const std::vector<float>& got, const std::vector<double>& want, const char* what, std::string& err) {
  if (got.size() != want.size()) {
    err = std::string(what) + ": size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
    return false;
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      err = std::string(what) + ": non-finite value at " + std::to_string(i);
      return false;
    }
    num = std::max(num, std::abs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  const double rel = den > 0 ? num / den : num;
  if (rel > tolerance) {
    err = std::string(what) + ": relative error " + std::to_string(rel) + " > 1e-4";
    return false;
  }
  return true;
}
bool close(float got, double want, const char* what, std::string& err) {
  return close(std::vector<float>{got}, std::vector<double>{want}, what, err);
}

/// Runs the checks; on failure reports the error and returns false.
template <class F>
bool verified(benchmark::State& state, F&& checks) {
  std::string err;
  if (checks(err)) return true;
  state.SkipWithError(err.c_str());
  return false;
}

void keep(const fx::tensor<float>& t) { benchmark::DoNotOptimize(t.data()); }
void keep(const std::vector<fx::tensor<float>>& ts) {
  for (const auto& t : ts) keep(t);
}

/// Checks run()'s (value, gradients) once with check(value, gradients, err), then times run().
template <class Run, class Check>
void time_checked(benchmark::State& state, std::int64_t items, Run run, Check check) {
  if (!verified(state, [&](std::string& err) {
        auto [y, g] = run();
        return check(y, g, err);
      }))
    return;
  for (auto _ : state) {
    auto [y, g] = run();
    keep(y);
    keep(g);
  }
  state.SetItemsProcessed(state.iterations() * items);
}

std::vector<double> to_double(const fx::tensor<float>& t) {
  auto v = t.to_vector();
  return {v.begin(), v.end()};
}

#if FLUXION_BENCH_HAVE_TORCH
torch::Tensor to_torch(const fx::tensor<float>& t, bool requires_grad = false) {
  std::vector<std::int64_t> sizes;
  for (int d = 0; d < t.shape().rank(); ++d) sizes.push_back(t.shape()[d]);
  auto r = torch::from_blob(const_cast<float*>(t.data()), sizes, torch::kFloat).clone();
  return r.requires_grad_(requires_grad);
}
std::vector<float> to_vector(const torch::Tensor& t) {
  auto c = t.contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}
void drop_grad(torch::Tensor& t) { t.mutable_grad() = torch::Tensor(); }
#endif

// ---- 1. logsumexp ------------------------------------------------------------------------------

struct lse_data {
  fx::tensor<float> x;
  double value = 0;
  std::vector<double> grad;
  explicit lse_data(fx::index_t n) {
    fx::random::generator gen{11};
    x = fx::random::normal<float>({n}, gen, 0.f, 2.f);
    auto v = to_double(x);
    const double m = *std::max_element(v.begin(), v.end());
    double s = 0;
    for (double a : v) s += std::exp(a - m);
    value = m + std::log(s);
    for (double a : v) grad.push_back(std::exp(a - value));
  }
};

void lse_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  lse_data d(n);
  const auto run = [&] {
    fx::gradient_tape tape;
    tape.watch(d.x);
    fx::tensor<float> y = fx::reduce_logsumexp(d.x);
    fx::tensor<float> g = tape.gradient(y, d.x);
    return std::pair{y, g};
  };
  time_checked(state, n, run, [&](const auto& y, const auto& g, std::string& err) {
    return close(y.item(), d.value, "value", err) && close(g.to_vector(), d.grad, "d/dx", err);
  });
}

#if FLUXION_BENCH_HAVE_TORCH
void lse_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  lse_data d(n);
  auto x = to_torch(d.x, true);
  if (!verified(state, [&](std::string& err) {
        auto y = torch::logsumexp(x, {0});
        y.backward();
        const bool ok = close(y.item<float>(), d.value, "value", err) && close(to_vector(x.grad()), d.grad, "d/dx", err);
        drop_grad(x);
        return ok;
      }))
    return;
  for (auto _ : state) {
    auto y = torch::logsumexp(x, {0});
    y.backward();
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(x.grad().data_ptr());
    drop_grad(x);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
#endif

// ---- 2. normal log-density ---------------------------------------------------------------------

constexpr double half_log_2pi = 0.91893853320467274178;

struct normal_data {
  fx::tensor<float> x, mu, sigma;
  double value = 0;
  std::vector<double> dx, dmu, dsigma;
  explicit normal_data(fx::index_t n) {
    fx::random::generator gen{12};
    x = fx::random::normal<float>({n}, gen, 0.f, 1.f);
    mu = fx::random::normal<float>({n}, gen, 0.f, 0.5f);
    sigma = fx::random::uniform<float>({n}, gen, 0.5f, 2.f);
    auto xv = to_double(x), mv = to_double(mu), sv = to_double(sigma);
    for (std::size_t i = 0; i < xv.size(); ++i) {
      const double z = (xv[i] - mv[i]) / sv[i];
      value += -0.5 * z * z - std::log(sv[i]) - half_log_2pi;
      dx.push_back(-z / sv[i]);
      dmu.push_back(z / sv[i]);
      dsigma.push_back(z * z / sv[i] - 1 / sv[i]);
    }
  }
};

void normal_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  normal_data d(n);
  const float c = static_cast<float>(half_log_2pi);
  const auto run = [&] {
    fx::gradient_tape tape;
    tape.watch(d.x);
    tape.watch(d.mu);
    tape.watch(d.sigma);
    fx::tensor<float> y = fx::reduce_sum(-0.5f * fx::square((d.x - d.mu) / d.sigma) - fx::log(d.sigma) - c);
    auto g = tape.gradient(y, std::vector<const fx::tensor<float>*>{&d.x, &d.mu, &d.sigma});
    return std::pair{y, std::move(g)};
  };
  time_checked(state, n, run, [&](const auto& y, const auto& g, std::string& err) {
    return close(y.item(), d.value, "value", err) && close(g[0].to_vector(), d.dx, "d/dx", err) &&
               close(g[1].to_vector(), d.dmu, "d/dmu", err) && close(g[2].to_vector(), d.dsigma, "d/dsigma", err);
  });
}

#if FLUXION_BENCH_HAVE_TORCH
void normal_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  normal_data d(n);
  auto x = to_torch(d.x, true), mu = to_torch(d.mu, true), sigma = to_torch(d.sigma, true);
  const auto forward = [&] { return (-0.5 * ((x - mu) / sigma).square() - sigma.log() - half_log_2pi).sum(); };
  if (!verified(state, [&](std::string& err) {
        auto y = forward();
        y.backward();
        const bool ok = close(y.item<float>(), d.value, "value", err) && close(to_vector(x.grad()), d.dx, "d/dx", err) &&
                        close(to_vector(mu.grad()), d.dmu, "d/dmu", err) &&
                        close(to_vector(sigma.grad()), d.dsigma, "d/dsigma", err);
        drop_grad(x), drop_grad(mu), drop_grad(sigma);
        return ok;
      }))
    return;
  for (auto _ : state) {
    auto y = forward();
    y.backward();
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(x.grad().data_ptr());
    benchmark::DoNotOptimize(mu.grad().data_ptr());
    benchmark::DoNotOptimize(sigma.grad().data_ptr());
    drop_grad(x), drop_grad(mu), drop_grad(sigma);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
#endif

// ---- 3. logistic regression --------------------------------------------------------------------

struct logreg_data {
  fx::tensor<float> X, w, t;
  double value = 0;
  std::vector<double> dw;
  explicit logreg_data(fx::index_t n) {
    const fx::index_t m = n / features;
    fx::random::generator gen{13};
    X = fx::random::normal<float>({m, features}, gen, 0.f, 1.f);
    w = fx::random::normal<float>({features, 1}, gen, 0.f, 0.5f);
    auto u = fx::random::uniform<float>({m, 1}, gen, -1.f, 1.f).to_vector();
    for (auto& v : u) v = v > 0 ? 1.f : -1.f;
    t = fx::from_vector(u, {m, 1});
    auto Xv = to_double(X), wv = to_double(w), tv = to_double(t);
    dw.assign(features, 0.0);
    for (fx::index_t i = 0; i < m; ++i) {
      double z = 0;
      for (int j = 0; j < features; ++j) z += Xv[static_cast<std::size_t>(i * features + j)] * wv[j];
      const double a = -tv[static_cast<std::size_t>(i)] * z;               // loss_i = softplus(a)
      value += a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a));
      const double s = 1 / (1 + std::exp(-a));                              // softplus'(a)
      for (int j = 0; j < features; ++j)
        dw[j] += s * -tv[static_cast<std::size_t>(i)] * Xv[static_cast<std::size_t>(i * features + j)];
    }
    value /= static_cast<double>(m);
    for (auto& g : dw) g /= static_cast<double>(m);
  }
};

void logreg_fluxion(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  logreg_data d(n);
  const auto run = [&] {
    fx::gradient_tape tape;
    tape.watch(d.w);
    fx::tensor<float> y = fx::reduce_mean(fx::softplus(-d.t * fx::matmul(d.X, d.w)));
    fx::tensor<float> g = tape.gradient(y, d.w);
    return std::pair{y, g};
  };
  time_checked(state, n, run, [&](const auto& y, const auto& g, std::string& err) {
    return close(y.item(), d.value, "value", err) && close(g.to_vector(), d.dw, "d/dw", err);
  });
}

#if FLUXION_BENCH_HAVE_TORCH
void logreg_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  logreg_data d(n);
  auto X = to_torch(d.X), w = to_torch(d.w, true), t = to_torch(d.t);
  const auto forward = [&] { return torch::softplus(-t * torch::matmul(X, w)).mean(); };
  if (!verified(state, [&](std::string& err) {
        auto y = forward();
        y.backward();
        const bool ok = close(y.item<float>(), d.value, "value", err) && close(to_vector(w.grad()), d.dw, "d/dw", err);
        drop_grad(w);
        return ok;
      }))
    return;
  for (auto _ : state) {
    auto y = forward();
    y.backward();
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(w.grad().data_ptr());
    drop_grad(w);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
#endif

// ---- 4. a chain of 100 scalar statements -------------------------------------------------------

constexpr float chain_x0 = 0.7f;

/// The chain and its derivative in double.
std::pair<double, double> chain_reference() {
  double y = chain_x0, dy = 1;
  for (int i = 0; i < chain_steps; ++i) {
    if (i % 2 == 0) {
      dy *= std::cos(y) * 0.9 + 0.1;
      y = std::sin(y) * 0.9 + y * 0.1;
    } else {
      const double th = std::tanh(y);
      dy *= (1 - th * th) * 0.5 + 0.5;
      y = th * 0.5 + y * 0.5 + 0.1;
    }
  }
  return {y, dy};
}

void chain_fluxion(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  const fx::tensor<float> x = chain_x0;  // rank 0
  const auto run = [&] {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<float> y = x;
    for (int i = 0; i < chain_steps; ++i) {
      if (i % 2 == 0) y = fx::sin(y) * 0.9f + y * 0.1f;
      else y = fx::tanh(y) * 0.5f + y * 0.5f + 0.1f;
    }
    fx::tensor<float> g = tape.gradient(y, x);
    return std::pair{y, g};
  };
  const auto [value, grad] = chain_reference();
  time_checked(state, chain_steps, run, [&](const auto& y, const auto& g, std::string& err) {
    return close(y.item(), value, "value", err) && close(g.item(), grad, "d/dx", err);
  });
}

#if FLUXION_BENCH_HAVE_TORCH
void chain_torch(benchmark::State& state) {
  set_threads(static_cast<int>(state.range(0)));
  auto x = torch::tensor(chain_x0).requires_grad_(true);  // 0-dim
  const auto forward = [&] {
    torch::Tensor y = x;
    for (int i = 0; i < chain_steps; ++i) {
      if (i % 2 == 0) y = torch::sin(y) * 0.9 + y * 0.1;
      else y = torch::tanh(y) * 0.5 + y * 0.5 + 0.1;
    }
    return y;
  };
  const auto [value, grad] = chain_reference();
  if (!verified(state, [&](std::string& err) {
        auto y = forward();
        y.backward();
        const bool ok = close(y.item<float>(), value, "value", err) && close(x.grad().item<float>(), grad, "d/dx", err);
        drop_grad(x);
        return ok;
      }))
    return;
  for (auto _ : state) {
    auto y = forward();
    y.backward();
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(x.grad().data_ptr());
    drop_grad(x);
  }
  state.SetItemsProcessed(state.iterations() * chain_steps);
}
#endif

// ---- 5. graph mode against tape mode: sum(x sin x + x^2) ---------------------------------------

struct sinsq_data {
  fx::tensor<float> x;
  double value = 0;
  std::vector<double> grad;
  explicit sinsq_data(fx::index_t n) {
    fx::random::generator gen{14};
    x = fx::random::uniform<float>({n}, gen, -2.f, 2.f);
    for (double a : to_double(x)) {
      value += a * std::sin(a) + a * a;
      grad.push_back(std::sin(a) + a * std::cos(a) + 2 * a);
    }
  }
};

const auto sinsq = [](const auto& x) { return fx::reduce_sum(x * fx::sin(x) + fx::square(x)); };

/// Graph mode, gradient only: fx::grad(f)(x), no tape.
void sinsq_graph(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  sinsq_data d(n);
  const auto dfdx = fx::grad(sinsq);
  if (!verified(state, [&](std::string& err) { return close(dfdx(d.x).to_vector(), d.grad, "d/dx", err); })) return;
  for (auto _ : state) {
    fx::tensor<float> g = dfdx(d.x);
    benchmark::DoNotOptimize(g.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

/// Graph mode with the value: fx::value_and_grad(f)(x), no tape.
void sinsq_graph_value(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  sinsq_data d(n);
  const auto vg = fx::value_and_grad(sinsq);
  if (!verified(state, [&](std::string& err) {
        auto [y, g] = vg(d.x);
        return close(y.item(), d.value, "value", err) && close(g.to_vector(), d.grad, "d/dx", err);
      }))
    return;
  for (auto _ : state) {
    auto [y, g] = vg(d.x);
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(g.data());
  }
  state.SetItemsProcessed(state.iterations() * n);
}

/// Tape mode: gradient_tape, watch, y = f(x), tape.gradient (value and gradient).
void sinsq_tape(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  sinsq_data d(n);
  const auto run = [&] {
    fx::gradient_tape tape;
    tape.watch(d.x);
    fx::tensor<float> y = sinsq(d.x);
    fx::tensor<float> g = tape.gradient(y, d.x);
    return std::pair{y, g};
  };
  time_checked(state, n, run, [&](const auto& y, const auto& g, std::string& err) {
    return close(y.item(), d.value, "value", err) && close(g.to_vector(), d.grad, "d/dx", err);
  });
}

#if FLUXION_BENCH_HAVE_TORCH
void sinsq_torch(benchmark::State& state) {
  const fx::index_t n = state.range(0);
  set_threads(static_cast<int>(state.range(1)));
  sinsq_data d(n);
  auto x = to_torch(d.x, true);
  const auto forward = [&] { return (x * torch::sin(x) + x.square()).sum(); };
  if (!verified(state, [&](std::string& err) {
        auto y = forward();
        y.backward();
        const bool ok = close(y.item<float>(), d.value, "value", err) && close(to_vector(x.grad()), d.grad, "d/dx", err);
        drop_grad(x);
        return ok;
      }))
    return;
  for (auto _ : state) {
    auto y = forward();
    y.backward();
    benchmark::DoNotOptimize(y.data_ptr());
    benchmark::DoNotOptimize(x.grad().data_ptr());
    drop_grad(x);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
#endif

void sizes_threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "threads"});
  for (int th : {1, 2})
    for (std::int64_t n : {1 << 10, 1 << 16, 1 << 20}) b->Args({n, th});
}
void threads_only(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads"});
  for (int th : {1, 2}) b->Args({th});
}

}  // namespace

// Peers of one workload are registered side by side, so they run seconds apart and see
// the same machine load.
#if FLUXION_BENCH_HAVE_TORCH
#define FLUXION_TORCH_PEER(name, args) BENCHMARK(name)->Apply(args);
#else
#define FLUXION_TORCH_PEER(name, args)
#endif
BENCHMARK(lse_fluxion)->Apply(sizes_threads);
FLUXION_TORCH_PEER(lse_torch, sizes_threads)
BENCHMARK(normal_fluxion)->Apply(sizes_threads);
FLUXION_TORCH_PEER(normal_torch, sizes_threads)
BENCHMARK(logreg_fluxion)->Apply(sizes_threads);
FLUXION_TORCH_PEER(logreg_torch, sizes_threads)
BENCHMARK(chain_fluxion)->Apply(threads_only);
FLUXION_TORCH_PEER(chain_torch, threads_only)
BENCHMARK(sinsq_graph)->Apply(sizes_threads);
BENCHMARK(sinsq_graph_value)->Apply(sizes_threads);
BENCHMARK(sinsq_tape)->Apply(sizes_threads);
FLUXION_TORCH_PEER(sinsq_torch, sizes_threads)
