// Depthwise convolutions (tf.nn.depthwise_conv2d) of MobileNet and ConvNeXt at batch 32, forward,
// input gradient and filter gradient, fluxion against LibTorch in the same run, with 1 and 2
// threads.
//
// LibTorch runs the grouped convolution a depthwise layer is (groups = channels) through the ATen
// kernels a training step calls: at::convolution forward, at::convolution_backward with an output
// mask for each gradient. It runs twice: in its default layout, NCHW, and channels-last (NHWC,
// fluxion's layout), so that the ratio can be taken against whichever is faster on this machine.
// "set" runs the layer's three kernels back to back.
//
//   ./depthwise_conv --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fluxion/backend/cpu/depthwise_conv.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace cpu = fluxion::detail::kernels;
using fluxion::index_t;

namespace {

constexpr index_t batch = 32;

struct layer_shape {
  const char* name;
  index_t hw, channels, kernel, stride;
};

// MobileNet v1's depthwise layers at 56x56 (stride 1 and 2) and 14x14, and ConvNeXt's 7x7 one.
const std::vector<layer_shape> layers = {
    {"mobilenet_56x56x128_3x3", 56, 128, 3, 1},
    {"mobilenet_56x56x128_3x3_s2", 56, 128, 3, 2},
    {"mobilenet_14x14x512_3x3", 14, 512, 3, 1},
    {"convnext_14x14x384_7x7", 14, 384, 7, 1},
};

std::vector<float> random_vector(index_t n) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

struct fluxion_layer {
  cpu::depthwise2d_shape s;
  std::vector<float> x, w, y, dy, dx, dw;
  explicit fluxion_layer(const layer_shape& l)
      : s(cpu::depthwise2d_tf_shape(batch, l.hw, l.hw, l.channels, l.kernel, l.kernel, 1, cpu::padding_mode::same,
                                    l.stride, l.stride)),
        x(random_vector(s.input_size())),
        w(random_vector(s.filter_size())),
        y(static_cast<std::size_t>(s.output_size())),
        dy(random_vector(s.output_size())),
        dx(static_cast<std::size_t>(s.input_size())),
        dw(static_cast<std::size_t>(s.filter_size())) {}
  std::function<void()> op(const std::string& name) {
    if (name == "forward") return [this] { cpu::depthwise_conv2d_forward<float>(s, x.data(), w.data(), y.data()); };
    if (name == "input_grad")
      return [this] { cpu::depthwise_conv2d_backward_input<float>(s, dy.data(), w.data(), dx.data()); };
    return [this] { cpu::depthwise_conv2d_backward_filter<float>(s, x.data(), dy.data(), dw.data()); };
  }
};

#if FLUXION_BENCH_HAVE_TORCH
template <bool ChannelsLast>
struct torch_layer {
  torch::Tensor x, w, dy;
  int64_t stride, pad, groups;
  explicit torch_layer(const layer_shape& l)
      : stride(l.stride), pad(l.kernel / 2), groups(l.channels) {
    const auto format = ChannelsLast ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    x = torch::rand({batch, l.channels, l.hw, l.hw}).contiguous(format);
    w = torch::rand({l.channels, 1, l.kernel, l.kernel}).contiguous(format);
    const int64_t out = (l.hw + l.stride - 1) / l.stride;
    dy = torch::rand({batch, l.channels, out, out}).contiguous(format);
  }
  torch::Tensor forward() {
    return at::convolution(x, w, {}, {stride, stride}, {pad, pad}, {1, 1}, false, {0, 0}, groups);
  }
  torch::Tensor grad(bool input) {
    auto r = at::convolution_backward(dy, x, w, c10::nullopt, {stride, stride}, {pad, pad}, {1, 1}, false, {0, 0},
                                      groups, {input, !input, false});
    return input ? std::get<0>(r) : std::get<1>(r);
  }
  std::function<void()> op(const std::string& name) {
    auto keep = [](torch::Tensor t) { benchmark::DoNotOptimize(t.data_ptr()); };
    if (name == "forward") return [=, this] { keep(forward()); };
    if (name == "input_grad") return [=, this] { keep(grad(true)); };
    return [=, this] { keep(grad(false)); };
  }
};
#endif

const std::vector<std::string> ops = {"forward", "input_grad", "filter_grad"};

template <class Layer>
void run(benchmark::State& state, const layer_shape& shape, const std::string& name, int threads) {
  fluxion::set_num_threads(threads);
#if FLUXION_BENCH_HAVE_TORCH
  at::set_num_threads(threads);
  torch::NoGradGuard no_grad;
#endif
  Layer layer(shape);
  // Idle OpenMP workers of the previous benchmark spin for a while before sleeping.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::vector<std::function<void()>> work;
  if (name == "set")
    for (const auto& o : ops) work.push_back(layer.op(o));
  else
    work.push_back(layer.op(name));
  for (auto _ : state)
    for (auto& f : work) f();
}

template <class Layer>
void add(const char* impl, const layer_shape& shape, const std::string& name, int threads) {
  benchmark::RegisterBenchmark((std::string("depthwise/") + shape.name + "/" + impl + "/" + name +
                                "/threads:" + std::to_string(threads))
                                   .c_str(),
                               [shape, name, threads](benchmark::State& st) { run<Layer>(st, shape, name, threads); })
      ->UseRealTime()
      ->Unit(benchmark::kMicrosecond)
      ->MinTime(0.3);
}

// Peers next to each other, so that all see the same load on a shared machine.
const int registered = [] {
  auto names = ops;
  names.push_back("set");
  for (int threads : {1, 2})
    for (const auto& shape : layers)
      for (const auto& name : names) {
        add<fluxion_layer>("fluxion", shape, name, threads);
#if FLUXION_BENCH_HAVE_TORCH
        add<torch_layer<false>>("torch_nchw", shape, name, threads);
        add<torch_layer<true>>("torch_nhwc", shape, name, threads);
#endif
      }
  return 0;
}();

}  // namespace
