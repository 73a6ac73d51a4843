// A training step on fx::cuda: the 784-256-256-10 MLP of bench/nn.bench.cpp, at batch 64 and 256,
// written two ways. mlp_train_fluxion: with the tape and fx::variable directly,
//   logits = relu(relu(x W1 + b1) W2 + b2) W3 + b3
//   loss   = mean(logsumexp(logits) - sum(logits * onehot))      (softmax cross-entropy)
//   every variable -= 0.01 * its gradient                          (SGD)
// mlp_train_nn: the model layer, as a user writes it: nn::sequential on nn::input<784>::on<fx::cuda>,
// sparse softmax cross-entropy on integer labels, fx::optim::adam (the model of bench/nn.bench.cpp);
// cnn_train_nn and cnn_lstm_train_nn the same for bench/nn.bench.cpp's 2-conv CNN and CNN+LSTM.
// PyTorch's same step on the same GPU is in bench/cuda/torch_peer.py. Timed with CUDA events
// around each step after a warm-up; the step reads the loss back only in the check after timing.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include <fluxion/cuda.hpp>
#include <fluxion/losses.hpp>
#include <fluxion/nn.hpp>
#include <fluxion/optim.hpp>
#include <fluxion/tensor/random.hpp>

#include "timer.hpp"

namespace fx = fluxion;

namespace {

using tensor = fx::tensor<float, fx::cuda>;
using variable = fx::variable<float, fx::cuda>;

tensor uniform(const fx::shape& s, fx::random::generator& gen, float lo, float hi) {
  return fx::to<fx::cuda>(fx::random::uniform<float>(s, gen, lo, hi));
}

struct mlp {
  std::vector<variable> vars;
  explicit mlp(fx::random::generator& gen) {
    const fx::index_t sizes[] = {784, 256, 256, 10};
    for (int l = 0; l < 3; ++l) {
      const float limit = std::sqrt(6.f / static_cast<float>(sizes[l] + sizes[l + 1]));
      vars.emplace_back(uniform({sizes[l], sizes[l + 1]}, gen, -limit, limit), "w");
      vars.emplace_back(fx::zeros<float, fx::cuda>({sizes[l + 1]}), "b");
    }
  }

  fx::optim::adam adam{1e-3};

  /// One step, SGD by assign_sub or fx::optim::adam (one fused kernel per variable); returns the
  /// loss (on the device: reading it would wait for the step).
  template <bool Adam = false>
  tensor step(const tensor& x, const tensor& onehot) {
    fx::gradient_tape tape;
    tensor h1 = fx::relu(fx::matmul(x, vars[0]) + vars[1]);
    tensor h2 = fx::relu(fx::matmul(h1, vars[2]) + vars[3]);
    tensor logits = fx::matmul(h2, vars[4]) + vars[5];
    tensor loss = fx::reduce_mean(fx::reduce_logsumexp(logits, {1}) - fx::reduce_sum(logits * onehot, {1}));
    auto grads = tape.gradient(loss, {std::cref(vars[0]), std::cref(vars[1]), std::cref(vars[2]), std::cref(vars[3]),
                                      std::cref(vars[4]), std::cref(vars[5])});
    if constexpr (Adam) {
      adam.apply_gradients(grads, {&vars[0], &vars[1], &vars[2], &vars[3], &vars[4], &vars[5]});
    } else {
      for (std::size_t i = 0; i < vars.size(); ++i) vars[i].assign_sub(0.01f * grads[i]);
    }
    return loss;
  }
};

/// Upload: false, the batch stays on the device; true, each step uploads it from host memory
/// first (fx::to<fx::cuda>, queued without waiting), as a training loop over a data set does.
template <bool Upload, bool Adam = false>
void mlp_train_fluxion(benchmark::State& state) {
  const fx::index_t batch = state.range(0);
  fx::random::generator gen{3};
  mlp net(gen);
  const fx::tensor<float> x_host = fx::random::uniform<float>({batch, 784}, gen, 0.f, 1.f);
  tensor x = fx::to<fx::cuda>(x_host);
  fx::tensor<float> labels(fx::shape{batch, 10});
  for (fx::index_t i = 0; i < batch * 10; ++i) labels.mutable_data()[i] = (i % 10 == (i / 10) % 7) ? 1.f : 0.f;
  tensor onehot = fx::to<fx::cuda>(labels);
  const float first = net.step<Adam>(x, onehot).item();
  event_timer timer;
  timer.run(state, [&] {
    tensor loss = Upload ? net.step<Adam>(fx::to<fx::cuda>(x_host), onehot) : net.step<Adam>(x, onehot);
    benchmark::DoNotOptimize(loss.data());
  });
  const float last = net.step<Adam>(x, onehot).item();
  // The same batch over and over: the loss must fall, or the step is not training.
  if (!(last < first)) state.SkipWithError("the loss did not fall");
  state.counters["loss_first"] = first;
  state.counters["loss_last"] = last;
}

/// A model-layer training step on the device: `net` (nn::sequential on ...::on<fx::cuda>), sparse
/// softmax cross-entropy on integer labels, fx::optim::adam; random inputs of per-example shape
/// `example`, at batch state.range(0).
template <class Net>
void train_model(benchmark::State& state, Net& net, const std::vector<fx::index_t>& example, fx::random::generator& gen) {
  const fx::index_t batch = state.range(0);
  fx::optim::adam opt{1e-3};
  std::vector<fx::index_t> dims{batch};
  dims.insert(dims.end(), example.begin(), example.end());
  tensor x = fx::to<fx::cuda>(fx::random::uniform<float>(fx::shape(dims), gen, 0.f, 1.f));
  fx::tensor<std::int32_t> labels_host(fx::shape{batch});
  for (fx::index_t i = 0; i < batch; ++i) labels_host.mutable_data()[i] = static_cast<std::int32_t>(i % 10);
  const auto labels = fx::to<fx::cuda>(labels_host);
  auto step = [&] {
    fx::gradient_tape tape;
    tensor loss = fx::losses::sparse_softmax_cross_entropy(net(x, /*training=*/true), labels);
    auto vars = net.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  const float first = step().item();
  const auto mallocs = fx::memory::stats<fx::cuda>().system_allocations;
  event_timer timer;
  timer.run(state, [&] {
    tensor loss = step();
    benchmark::DoNotOptimize(loss.data());
  });
  // Device allocations that missed the cache while timing: in steady state there should be none.
  state.counters["cudaMalloc"] = double(fx::memory::stats<fx::cuda>().system_allocations - mallocs);
  const float last = step().item();
  if (!(last < first)) state.SkipWithError("the loss did not fall");
  state.counters["loss_first"] = first;
  state.counters["loss_last"] = last;
}

namespace nn = fluxion::nn;

/// The same MLP through the model layer: dense layers on the device, Adam, integer labels.
void mlp_train_nn(benchmark::State& state) {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<784>::on<fx::cuda>{}, nn::dense<256>{}, nn::relu{}, nn::dense<256>{},
                            nn::relu{}, nn::dense<10>{});
  train_model(state, net, {784}, gen);
}

/// The 2-conv CNN of bench/nn.bench.cpp: conv 32 5x5 same, relu, pool 2, conv 64 5x5 same, relu,
/// pool 2, dense 1024, relu, dense 10. state.range(1): 1, the convolutions through cuDNN (where
/// the build has it) or im2col, whichever is faster per pass; 0, through im2col + cuBLAS
/// (backend/cuda/window.hpp); 2, as 1 with fx::allow_nondeterministic_cudnn(true), which lets
/// cuDNN's non-deterministic algorithms compete, as PyTorch's step does
/// (torch_peer.py's torch_cnn_train_adam_benchmark_mode).
void cnn_train_nn(benchmark::State& state) {
  if (state.range(1) && !fx::cudnn_built) {
    state.SkipWithError("built without cuDNN (FLUXION_USE_CUDNN)");
    return;
  }
  fx::allow_cudnn(state.range(1) != 0);
  fx::allow_nondeterministic_cudnn(state.range(1) == 2);
  fx::random::generator gen{4};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>::on<fx::cuda>{}, nn::conv2d<32, 5, nn::same>{}, nn::relu{},
                            nn::max_pool2d<2>{}, nn::conv2d<64, 5, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                            nn::flatten{}, nn::dense<1024>{}, nn::relu{}, nn::dense<10>{});
  train_model(state, net, {28, 28, 1}, gen);
  if (state.range(1)) report_cudnn_routes_at_exit();
  fx::allow_cudnn(true);
  fx::allow_nondeterministic_cudnn(false);
}

/// The seed's CNN+LSTM of bench/nn.bench.cpp: conv 32 5x5, pool, conv 64 5x5, pool, (49, 64) ->
/// (64, 49), LSTM 128 over 64 steps, dense 10. state.range(1): 1, each LSTM step one kernel with
/// its recurrent products inside (at any batch); 0, a cuBLAS GEMM before each cell pass (the
/// default since stop 48: twice as fast on an H200).
/// The recurrent layers' path for one benchmark, restored after it: 0 each step's products as
/// GEMMs, 1 inside the cell kernel, 2 the whole sequence as one persistent kernel
/// (backend/cuda/recurrent.hpp).
/// block_units: the persistent kernel's recurrent_block_units() (0: one unit a block on an H200).
struct recurrent_path {
  fx::index_t limit = fx::nn::detail::recurrent_product_limit();
  bool persistent = fx::nn::detail::recurrent_persistent();
  fx::index_t block_units = fx::nn::detail::recurrent_block_units();
  explicit recurrent_path(std::int64_t path, std::int64_t units_a_block = 0) {
    fx::nn::detail::recurrent_product_limit() = path == 1 ? fx::index_t(1) << 40 : 0;
    fx::nn::detail::recurrent_persistent() = path == 2;
    fx::nn::detail::recurrent_block_units() = units_a_block;
  }
  ~recurrent_path() {
    fx::nn::detail::recurrent_product_limit() = limit;
    fx::nn::detail::recurrent_persistent() = persistent;
    fx::nn::detail::recurrent_block_units() = block_units;
  }
};

// range(1): the recurrent_path.
void cnn_lstm_train_nn(benchmark::State& state) {
  const recurrent_path path(state.range(1));
  fx::random::generator gen{5};
  auto net = nn::sequential(gen, nn::input<28, 28, 1>::on<fx::cuda>{}, nn::conv2d<32, 5, nn::same>{},
                            nn::max_pool2d<2, 2, nn::same>{}, nn::conv2d<64, 5, nn::same>{},
                            nn::max_pool2d<2, 2, nn::same>{}, nn::reshape<49, 64>{}, nn::permute<2, 1>{},
                            nn::lstm<128>{}, nn::dense<10>{});
  train_model(state, net, {28, 28, 1}, gen);
}

/// The CNN+LSTM's recurrent part alone: (batch, 64, 49) -> lstm<128> -> dense<10>, the products
/// as in cnn_lstm_train_nn's range(1). What the persistent kernel changes, without the convolutions.
/// range(2): the persistent kernel's units a block (recurrent_path).
void lstm_train_nn(benchmark::State& state) {
  const recurrent_path path(state.range(1), state.range(2));
  fx::random::generator gen{6};
  auto net = nn::sequential(gen, nn::input<64, 49>::on<fx::cuda>{}, nn::lstm<128>{}, nn::dense<10>{});
  train_model(state, net, {64, 49}, gen);
}

}  // namespace

BENCHMARK(mlp_train_nn)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(cnn_train_nn)->ArgsProduct({{64, 256}, {1, 0, 2}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(cnn_lstm_train_nn)->ArgsProduct({{64, 256}, {2, 0, 1}})->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(lstm_train_nn)
    ->ArgsProduct({{64, 256}, {2}, {0, 2, 4}})
    ->ArgsProduct({{64, 256}, {0}, {0}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(mlp_train_fluxion, false)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(mlp_train_fluxion, true)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_TEMPLATE(mlp_train_fluxion, false, true)->Arg(64)->Arg(256)->UseManualTime()->Unit(benchmark::kMicrosecond);
