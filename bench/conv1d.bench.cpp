// fx::nn::conv1d against LibTorch's conv1d in the same run, float, 1 and 2 threads: a WaveNet-style
// causal layer dilated by 2 (batch 32, 256 steps, 64 -> 64 channels, kernel 3) and a text CNN's
// layer with same padding (batch 64, 128 steps, 128 -> 128 channels, kernel 5).
//
//   forward   inference: the layer's output
//   train     a training step's work: the output under a tape, then the gradients of
//             sum(y * dy) with respect to the input, the kernel and the bias
//
// LibTorch runs the same work through its autograd: torch::conv1d on its NCW layout (causal: the
// input padded on the left first, as Keras and PyTorch users write it), then backward().
//
//   ./conv1d.bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <thread>

#include <fluxion/fluxion.hpp>

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

struct geometry {
  fx::index_t batch, steps, channels;
};
constexpr geometry wavenet{32, 256, 64};
constexpr geometry text{64, 128, 128};

template <class Layer>
struct fluxion_case {
  Layer layer;
  fx::variable<float> x;  // a variable, so that one backward pass gives all three gradients
  fx::tensor<float> dy;
  explicit fluxion_case(const geometry& g) : x(fx::zeros<float>({g.batch, g.steps, g.channels}), "x") {
    fx::random::generator gen{1};
    x.assign(fx::random::uniform<float>({g.batch, g.steps, g.channels}, gen, -1.f, 1.f));
    layer.build(fx::shape{g.steps, g.channels}, gen);
    dy = fx::random::uniform<float>(fx::tensor<float>(layer(x.peek())).shape(), gen, -1.f, 1.f);
  }
  void forward() { benchmark::DoNotOptimize(fx::tensor<float>(layer(x.peek())).data()); }
  void train() {
    fx::gradient_tape tape;
    const fx::tensor<float> s = fx::reduce_sum(layer(x) * dy);
    auto g = tape.gradient(s, std::vector<fx::variable<float>*>{&x, &layer.kernel(), &layer.bias()});
    benchmark::DoNotOptimize(g[0].data());
  }
};

#if FLUXION_BENCH_HAVE_TORCH
struct torch_case {
  torch::Tensor x, w, b, dy;
  int64_t left, dilation, padding;
  torch_case(const geometry& g, int64_t kernel, int64_t dil, bool causal)
      : x(torch::rand({g.batch, g.channels, g.steps}) * 2 - 1),
        w(torch::rand({g.channels, g.channels, kernel}) * 0.1),
        b(torch::zeros({g.channels})),
        left(causal ? dil * (kernel - 1) : 0),
        dilation(dil),
        padding(causal ? 0 : dil * (kernel - 1) / 2) {
    dy = torch::rand({g.batch, g.channels, g.steps}) * 2 - 1;
  }
  torch::Tensor run(const torch::Tensor& in) {
    const torch::Tensor padded = left > 0 ? torch::constant_pad_nd(in, {left, 0}) : in;
    return torch::conv1d(padded, w, b, 1, padding, dilation);
  }
  void forward() {
    torch::NoGradGuard no_grad;
    benchmark::DoNotOptimize(run(x).data_ptr());
  }
  void train() {
    const torch::Tensor xi = x.detach().requires_grad_(true), wi = w.detach().requires_grad_(true),
                        bi = b.detach().requires_grad_(true);
    const torch::Tensor padded = left > 0 ? torch::constant_pad_nd(xi, {left, 0}) : xi;
    (torch::conv1d(padded, wi, bi, 1, padding, dilation) * dy).sum().backward();
    benchmark::DoNotOptimize(xi.grad().data_ptr());
  }
};
#endif

template <class Case, class Make>
void add(const std::string& name, Make make) {
  for (int threads : {1, 2})
    for (bool train : {false, true})
      benchmark::RegisterBenchmark(
          (name + (train ? "/train" : "/forward") + "/threads:" + std::to_string(threads)).c_str(),
          [make, threads, train](benchmark::State& state) {
            fx::set_num_threads(threads);
#if FLUXION_BENCH_HAVE_TORCH
            at::set_num_threads(threads);
#endif
            Case c = make();
            std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let idle workers of the last run sleep
            for (auto _ : state) train ? c.train() : c.forward();
          })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond)
          ->MinTime(0.3);
}

// Peers next to each other, so that both see the same load on a shared machine.
const int registered = [] {
  using causal_layer = nn::conv1d<64, 3, nn::causal, 1, 2>;
  using same_layer = nn::conv1d<128, 5, nn::same>;
  add<fluxion_case<causal_layer>>("conv1d_causal/fluxion", [] { return fluxion_case<causal_layer>(wavenet); });
#if FLUXION_BENCH_HAVE_TORCH
  add<torch_case>("conv1d_causal/torch", [] { return torch_case(wavenet, 3, 2, true); });
#endif
  add<fluxion_case<same_layer>>("conv1d_same/fluxion", [] { return fluxion_case<same_layer>(text); });
#if FLUXION_BENCH_HAVE_TORCH
  add<torch_case>("conv1d_same/torch", [] { return torch_case(text, 5, 1, false); });
#endif
  return 0;
}();

}  // namespace
