// The convolution and pooling layers of TensorFlow's tutorial convnet at batch 64 (28x28x1 ->
// conv 5x5x32 same -> max pool 2 -> conv 5x5x64 same -> max pool 2), forward and backward, fluxion
// against LibTorch in the same run, with 1 and 2 threads.
//
// LibTorch runs its default layout, NCHW float tensors (its fastest CPU path here), through the
// explicit ATen kernels a training step calls: at::convolution for the forward pass,
// at::convolution_backward with an output mask for the input and filter gradients, and
// at::max_pool2d_with_indices / at::max_pool2d_with_indices_backward for pooling (the indices
// are what its autograd saves). fluxion's max pool backward recomputes the argmax from the input.
// "set" runs all ten kernels back to back: that total is the goal (<= 0.6x LibTorch).
//
//   ./conv.bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fluxion/backend/cpu/conv.hpp>
#include <fluxion/backend/cpu/pool.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace cpu = fluxion::detail::kernels;
using fluxion::index_t;

namespace {

constexpr index_t batch = 64;

std::vector<float> random_vector(index_t n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

struct conv_layer {
  cpu::conv2d_shape s;
  std::vector<float> x, w, y, dy, dx, dw;
  explicit conv_layer(const cpu::conv2d_shape& shape)
      : s(shape),
        x(random_vector(s.input_size())),
        w(random_vector(s.filter_size())),
        y(static_cast<std::size_t>(s.output_size())),
        dy(random_vector(s.output_size())),
        dx(static_cast<std::size_t>(s.input_size())),
        dw(static_cast<std::size_t>(s.filter_size())) {}
  void forward() { cpu::conv2d_forward<float>(s, x.data(), w.data(), y.data()); }
  void input_grad() { cpu::conv2d_backward_input<float>(s, dy.data(), w.data(), dx.data()); }
  void filter_grad() { cpu::conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data()); }
};

struct pool_layer {
  cpu::pool2d_shape s;
  std::vector<float> x, y, dy, dx;
  explicit pool_layer(const cpu::pool2d_shape& shape)
      : s(shape),
        x(random_vector(s.input_size())),
        y(static_cast<std::size_t>(s.output_size())),
        dy(random_vector(s.output_size())),
        dx(static_cast<std::size_t>(s.input_size())) {}
  void forward() { cpu::max_pool2d_forward<float>(s, x.data(), y.data()); }
  void backward() { cpu::max_pool2d_backward<float>(s, x.data(), dy.data(), dx.data()); }
};

struct fluxion_net {
  conv_layer conv1{cpu::conv2d_tf_shape(batch, 28, 28, 1, 5, 5, 32, cpu::padding_mode::same)};
  pool_layer pool1{cpu::pool2d_tf_shape(batch, 28, 28, 32, 2, 2, 2, 2, cpu::padding_mode::same)};
  conv_layer conv2{cpu::conv2d_tf_shape(batch, 14, 14, 32, 5, 5, 64, cpu::padding_mode::same)};
  pool_layer pool2{cpu::pool2d_tf_shape(batch, 14, 14, 64, 2, 2, 2, 2, cpu::padding_mode::same)};

  std::function<void()> op(const std::string& name) {
    if (name == "conv1/forward") return [this] { conv1.forward(); };
    if (name == "conv1/input_grad") return [this] { conv1.input_grad(); };
    if (name == "conv1/filter_grad") return [this] { conv1.filter_grad(); };
    if (name == "pool1/forward") return [this] { pool1.forward(); };
    if (name == "pool1/backward") return [this] { pool1.backward(); };
    if (name == "conv2/forward") return [this] { conv2.forward(); };
    if (name == "conv2/input_grad") return [this] { conv2.input_grad(); };
    if (name == "conv2/filter_grad") return [this] { conv2.filter_grad(); };
    if (name == "pool2/forward") return [this] { pool2.forward(); };
    if (name == "pool2/backward") return [this] { pool2.backward(); };
    return {};
  }
};

#if FLUXION_BENCH_HAVE_TORCH
struct torch_conv {
  torch::Tensor x, w, dy;
  torch_conv(index_t c_in, index_t hw, index_t c_out)
      : x(torch::rand({batch, c_in, hw, hw})),
        w(torch::rand({c_out, c_in, 5, 5})),
        dy(torch::rand({batch, c_out, hw, hw})) {}
  torch::Tensor forward() { return at::convolution(x, w, {}, {1, 1}, {2, 2}, {1, 1}, false, {0, 0}, 1); }
  torch::Tensor grad(bool input) {
    auto r = at::convolution_backward(dy, x, w, c10::nullopt, {1, 1}, {2, 2}, {1, 1}, false, {0, 0}, 1,
                                      {input, !input, false});
    return input ? std::get<0>(r) : std::get<1>(r);
  }
};

struct torch_pool {
  torch::Tensor x, dy, indices;
  torch_pool(index_t c, index_t hw) : x(torch::rand({batch, c, hw, hw})), dy(torch::rand({batch, c, hw / 2, hw / 2})) {
    indices = std::get<1>(at::max_pool2d_with_indices(x, {2, 2}, {2, 2}));
  }
  torch::Tensor forward() { return std::get<0>(at::max_pool2d_with_indices(x, {2, 2}, {2, 2})); }
  torch::Tensor backward() {
    return at::max_pool2d_with_indices_backward(dy, x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, indices);
  }
};

struct torch_net {
  torch_conv conv1{1, 28, 32};
  torch_pool pool1{32, 28};
  torch_conv conv2{32, 14, 64};
  torch_pool pool2{64, 14};

  std::function<void()> op(const std::string& name) {
    auto keep = [](torch::Tensor t) { benchmark::DoNotOptimize(t.data_ptr()); };
    if (name == "conv1/forward") return [=, this] { keep(conv1.forward()); };
    if (name == "conv1/input_grad") return [=, this] { keep(conv1.grad(true)); };
    if (name == "conv1/filter_grad") return [=, this] { keep(conv1.grad(false)); };
    if (name == "pool1/forward") return [=, this] { keep(pool1.forward()); };
    if (name == "pool1/backward") return [=, this] { keep(pool1.backward()); };
    if (name == "conv2/forward") return [=, this] { keep(conv2.forward()); };
    if (name == "conv2/input_grad") return [=, this] { keep(conv2.grad(true)); };
    if (name == "conv2/filter_grad") return [=, this] { keep(conv2.grad(false)); };
    if (name == "pool2/forward") return [=, this] { keep(pool2.forward()); };
    if (name == "pool2/backward") return [=, this] { keep(pool2.backward()); };
    return {};
  }
};
#endif

const std::vector<std::string> ops = {"conv1/forward",  "conv1/input_grad", "conv1/filter_grad", "pool1/forward",
                                      "pool1/backward", "conv2/forward",    "conv2/input_grad",  "conv2/filter_grad",
                                      "pool2/forward",  "pool2/backward"};

template <class Net>
void run(benchmark::State& state, const std::string& name, int threads) {
  fluxion::set_num_threads(threads);
#if FLUXION_BENCH_HAVE_TORCH
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
#endif
  Net net;
  // Idle OpenMP and OpenBLAS workers of the previous benchmark spin for a while before sleeping,
  // taking the second core from this one; let them settle.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::function<void()>> work;
  if (name == "set")
    for (const auto& o : ops) work.push_back(net.op(o));
  else
    work.push_back(net.op(name));
  for (auto _ : state)
    for (auto& f : work) f();
}

template <class Net>
void add(const char* impl, const std::string& name, int threads) {
  benchmark::RegisterBenchmark(
      (std::string("convnet/") + impl + "/" + name + "/threads:" + std::to_string(threads)).c_str(),
      [name, threads](benchmark::State& st) { run<Net>(st, name, threads); })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(0.3);
}

// Peers next to each other, so that both see the same load on a shared machine.
const int registered = [] {
  auto names = ops;
  names.push_back("set");
  for (int threads : {1, 2})
    for (const auto& name : names) {
      add<fluxion_net>("fluxion", name, threads);
#if FLUXION_BENCH_HAVE_TORCH
      add<torch_net>("torch", name, threads);
#endif
    }
  return 0;
}();

}  // namespace
