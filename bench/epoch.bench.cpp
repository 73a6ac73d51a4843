// One epoch of each training example against its LibTorch twin, in one run (issue 12, part 6):
//
//   epoch_cnn     examples/fashion_mnist_cnn.cpp: the TF tutorial's network (conv 32 5x5 same relu,
//                 pool 2, conv 64 5x5 same relu, pool 2, dense 1024 relu, dropout 0.4, dense 10)
//   epoch_lstm    examples/mnist_cnn_lstm.cpp: MNIST_HighLevel (conv, pool, conv, pool, LSTM 128,
//                 dense 10)
//
// Both on Fashion-MNIST's 60000 training images, batch 64 (938 steps), Adam 1e-3, softmax
// cross-entropy. The time is the whole epoch, data loading included, from the gzip files on disk:
//   fluxion   fx::datasets::fashion_mnist("train").shuffle(60000, 42).batch(64).prefetch(2) and
//             fx::fit, exactly the example's pipeline and loop;
//   LibTorch  the same files read with zlib (LibTorch's MNIST reader takes no .gz), a
//             torch::data Dataset with a RandomSampler, Stack and a one-worker DataLoader (the
//             background thread, as prefetch), and the usual zero_grad / backward / step loop.
// The argument is the thread count given to both libraries; docs/benchmarks.md reports each at its best.
// Each case fails (SkipWithError) unless the mean loss of the epoch's last 50 steps is below that of
// its first 50, so an epoch that does not train cannot look fast. The counter `wait` is the share
// of fluxion's epoch spent waiting for the next batch, and `steady_wait` that share after the first
// batch (whose wait is the 60000-image shuffle buffer filling): prefetch should hide loading.
//
//   FLUXION_BENCH_EPOCH_STEPS=100 build/bench/epoch   # a shorter "epoch", for a quick look
//   FLUXION_DATASETS_DIR=/path                          # where the fashion-mnist files are
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>

#include "../examples/mnist_high_level.hpp"

#include "threads.hpp"

#if FLUXION_BENCH_HAVE_TORCH
#include "compile/read_idx.hpp"
#include "torch_models.hpp"
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

constexpr fx::index_t batch = 64;
constexpr std::int64_t full_epoch = (60000 + batch - 1) / batch;  // 938, the last batch short

std::int64_t epoch_steps() {
  const char* s = std::getenv("FLUXION_BENCH_EPOCH_STEPS");
  return s && *s ? std::min<std::int64_t>(std::stoll(s), full_epoch) : full_epoch;
}


/// The first and last 50 steps' mean losses: the epoch must have trained.
bool trained(const std::vector<double>& losses) {
  const std::size_t k = std::min<std::size_t>(50, losses.size() / 2);
  if (k == 0) return false;
  const double first = std::accumulate(losses.begin(), losses.begin() + static_cast<std::ptrdiff_t>(k), 0.0) / static_cast<double>(k);
  const double last = std::accumulate(losses.end() - static_cast<std::ptrdiff_t>(k), losses.end(), 0.0) / static_cast<double>(k);
  return last < first;
}


/// Records each step's loss: fit's logs carry the running mean, so the step's own loss is
/// recovered from consecutive means.
struct loss_recorder : fx::callback {
  std::vector<double> losses;
  std::vector<double> step_waits;  // seconds each step waited for its batch
  double previous_mean = 0, previous_data = 0, data_seconds = 0, seconds = 0, first_wait = 0, first_step_end = 0;
  void on_batch_end(const fx::fit_logs& l) override {
    const auto n = static_cast<double>(l.step);
    losses.push_back(l.loss * n - previous_mean * (n - 1));
    previous_mean = l.loss;
    step_waits.push_back(l.data_seconds - previous_data);
    previous_data = l.data_seconds;
    if (l.step == 1) first_wait = l.data_seconds, first_step_end = l.seconds;
  }
  void on_epoch_end(const fx::fit_logs& l) override {
    data_seconds = l.data_seconds;
    seconds = l.seconds;
  }
};

template <class Model>
void fluxion_epoch(benchmark::State& state, Model& model) {
  set_threads(static_cast<int>(state.range(0)));
  const std::int64_t steps = epoch_steps();
  loss_recorder rec;
  for (auto _ : state) {
    fx::optim::adam opt{1e-3};
    auto train = fx::datasets::fashion_mnist("train").shuffle(60000, /*seed=*/42).batch(batch).prefetch(2);
    auto loss = [](const auto& logits, const auto& labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
    rec = loss_recorder{};
    fx::fit(model, opt, loss, train,
            {.epochs = 1, .steps_per_epoch = steps, .verbose = 0, .callbacks = {&rec}, .handle_interrupt = false});
  }
  if (!trained(rec.losses)) state.SkipWithError("fluxion: the loss did not fall over the epoch");
  state.counters["steps"] = static_cast<double>(rec.losses.size());
  state.counters["wait"] = rec.seconds > 0 ? rec.data_seconds / rec.seconds : 0;
  // After the first batch (whose wait is the shuffle buffer filling): the steady state.
  const double rest = rec.seconds - rec.first_step_end;
  state.counters["steady_wait"] = rest > 0 ? (rec.data_seconds - rec.first_wait) / rest : 0;
  // The steady state's waits, step by step (microseconds): the median, the 99th percentile, the
  // worst, and how many steps waited more than 50 us.
  std::vector<double> w(rec.step_waits.begin() + std::min<std::ptrdiff_t>(1, std::ssize(rec.step_waits)), rec.step_waits.end());
  if (!w.empty()) {
    std::sort(w.begin(), w.end());
    state.counters["wait_p50_us"] = 1e6 * w[w.size() / 2];
    state.counters["wait_p99_us"] = 1e6 * w[w.size() * 99 / 100];
    state.counters["wait_max_us"] = 1e6 * w.back();
    state.counters["steps_over_50us"] = static_cast<double>(std::count_if(w.begin(), w.end(), [](double x) { return x > 50e-6; }));
  }
}

void epoch_cnn_fluxion(benchmark::State& s) {
  fx::random::generator gen{2026};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                                  nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{}, nn::flatten{},
                                  nn::dense<1024>{}, nn::relu{}, nn::dropout{0.4, 7}, nn::dense<10>{});
  fluxion_epoch(s, net);
}
void epoch_lstm_fluxion(benchmark::State& s) {
  mnist_high_level model;
  fluxion_epoch(s, model);
}

#if FLUXION_BENCH_HAVE_TORCH

std::string fashion_dir() {
  const char* d = std::getenv("FLUXION_DATASETS_DIR");
  return d && *d ? std::string(d) + "/fashion-mnist" : "/usr/share/datasets/fashion-mnist";
}

/// Fashion-MNIST's training split for torch::data: images (1, 28, 28) in [0, 1], int64 labels.
class fashion_train : public torch::data::datasets::Dataset<fashion_train> {
 public:
  fashion_train() {
    const auto images = read_idx(fashion_dir() + "/train-images-idx3-ubyte.gz", 16);
    const auto labels = read_idx(fashion_dir() + "/train-labels-idx1-ubyte.gz", 8);
    m_images = torch::from_blob(const_cast<std::uint8_t*>(images.data()), {60000, 1, 28, 28}, torch::kUInt8)
                   .to(torch::kFloat32)
                   .div_(255);
    m_labels = torch::from_blob(const_cast<std::uint8_t*>(labels.data()), {60000}, torch::kUInt8).to(torch::kInt64);
  }
  torch::data::Example<> get(std::size_t i) override {
    const auto k = static_cast<std::int64_t>(i);
    return {m_images[k], m_labels[k]};
  }
  torch::optional<std::size_t> size() const override { return 60000; }

 private:
  torch::Tensor m_images, m_labels;
};

template <class Module>
void torch_epoch(benchmark::State& state, double dropout) {
  set_threads(static_cast<int>(state.range(0)));
  const std::int64_t steps = epoch_steps();
  std::vector<double> losses;
  for (auto _ : state) {
    torch::manual_seed(0);
    auto model = [&] {
      if constexpr (std::is_constructible_v<Module, double>) return Module(dropout);
      else return Module();
    }();
    model.train();
    torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-3).eps(1e-7));
    auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
        fashion_train().map(torch::data::transforms::Stack<>()),
        torch::data::DataLoaderOptions().batch_size(batch).workers(1));
    losses.clear();
    for (auto& b : *loader) {
      if (static_cast<std::int64_t>(losses.size()) >= steps) break;
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model.forward(b.data), b.target);
      loss.backward();
      opt.step();
      losses.push_back(loss.template item<double>());
    }
  }
  if (!trained(losses)) state.SkipWithError("LibTorch: the loss did not fall over the epoch");
  state.counters["steps"] = static_cast<double>(losses.size());
}
void epoch_cnn_torch(benchmark::State& s) { torch_epoch<torch_cnn>(s, 0.4); }
void epoch_lstm_torch(benchmark::State& s) { torch_epoch<torch_lstm>(s, 0); }
#endif

void threads(benchmark::internal::Benchmark* b) {
  b->ArgNames({"threads"});
  for (int th : {1, 2}) b->Args({th});
  b->Unit(benchmark::kSecond)->Iterations(1)->UseRealTime();
}

}  // namespace

BENCHMARK(epoch_cnn_fluxion)->Apply(threads);
BENCHMARK(epoch_lstm_fluxion)->Apply(threads);
#if FLUXION_BENCH_HAVE_TORCH
BENCHMARK(epoch_cnn_torch)->Apply(threads);
BENCHMARK(epoch_lstm_torch)->Apply(threads);
#endif
