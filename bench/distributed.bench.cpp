// Averaging a model's gradients over the processes of an MPI job, the step data-parallel training
// adds (stop 65): fx::distributed::data_parallel::average_gradients, of a list the caller keeps
// (fluxion: the means go to new tensors) and of one it gives away (fluxion_owned: as fx::fit gives
// it the tape's gradients, which are averaged in their own buffers), against
//
//   mpi_one_buffer   one MPI_Allreduce, in place, on a buffer that already holds every gradient:
//                    the floor (what averaging costs without packing, unpacking or checks)
//   mpi_per_tensor   an in-place MPI_Allreduce per gradient (the naive loop)
//   torch_gloo       LibTorch's c10d::ProcessGroupGloo (PyTorch's DistributedDataParallel's CPU
//                    backend) all-reducing the gradients flattened into one bucket, divided by the
//                    process count and copied back, as DDP does with a bucket
//
// and a whole step, data_parallel::apply_gradients with SGD (stop 66), per call:
//
//   step_every_call      gradients exchanged at every call (no accumulation)
//   step_accumulate4     gradient_accumulation_steps = 4: three calls in four add the gradients to
//                        this process's accumulators and send no gradients, the fourth exchanges the sums
//   torch_gloo_accumulate4  the same in LibTorch: p.grad.add_(g) at each call, and at every fourth
//                        the Gloo bucket all-reduce, the division and SGD's step, then zero_grad
//
// for two gradient lists: the Fashion-MNIST MLP's (784-256-10: 203,530 floats) and the TF
// tutorial's CNN's (3,274,634 floats). Run under MPI; every benchmark runs a fixed number of
// iterations so that the processes stay in step, and only process 0 reports:
//
//   mpirun -np 2 build/bench/distributed --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

#if FLUXION_BENCH_HAVE_TORCH && __has_include(<gloo/context.h>)
#define FLUXION_BENCH_HAVE_GLOO 1
#define USE_C10D_GLOO 1
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>
#endif

namespace fx = fluxion;

namespace {

const fx::distributed::communicator* g_comm = nullptr;

std::vector<fx::shape> shapes(int model) {
  if (model == 0) return {{784, 256}, {256}, {256, 10}, {10}};
  return {{5, 5, 1, 32}, {32}, {5, 5, 32, 64}, {64}, {3136, 1024}, {1024}, {1024, 10}, {10}};
}

std::vector<fx::tensor<float>> gradients(int model) {
  fx::random::generator gen{static_cast<std::uint64_t>(1 + g_comm->rank())};
  std::vector<fx::tensor<float>> out;
  for (const auto& s : shapes(model)) out.push_back(fx::random::normal<float>(s, gen));
  return out;
}

std::int64_t total(const std::vector<fx::tensor<float>>& gs) {
  std::int64_t n = 0;
  for (const auto& g : gs) n += g.size();
  return n;
}

void report(benchmark::State& state, std::int64_t floats) {
  state.counters["floats"] = static_cast<double>(floats);
  state.counters["processes"] = g_comm->size();
  state.SetBytesProcessed(state.iterations() * floats * static_cast<std::int64_t>(sizeof(float)));
}

void BM_fluxion(benchmark::State& state) {
  const auto gs = gradients(static_cast<int>(state.range(0)));
  fx::optim::sgd sgd{0.1};
  fx::distributed::data_parallel dp{*g_comm, sgd};
  g_comm->barrier();
  for (auto _ : state) {
    auto mean = dp.average_gradients(gs);
    benchmark::DoNotOptimize(mean[0].data());
  }
  report(state, total(gs));
}

/// As fx::fit calls it: the tape's gradients, which nothing else holds, averaged in their own buffers.
void BM_fluxion_owned(benchmark::State& state) {
  const auto gs = gradients(static_cast<int>(state.range(0)));
  fx::optim::sgd sgd{0.1};
  fx::distributed::data_parallel dp{*g_comm, sgd};
  g_comm->barrier();
  for (auto _ : state) {
    state.PauseTiming();  // fresh gradients, as a backward pass makes them
    std::vector<fx::tensor<float>> fresh;
    for (const auto& g : gs) fresh.push_back(fx::tensor<float>(g + 0.f));
    g_comm->barrier();
    state.ResumeTiming();
    auto mean = dp.average_gradients(std::move(fresh));
    benchmark::DoNotOptimize(mean[0].data());
  }
  report(state, total(gs));
}

/// data_parallel::apply_gradients with SGD on variables of the model's shapes, per call.
void step(benchmark::State& state, std::int64_t accumulation) {
  const auto gs = gradients(static_cast<int>(state.range(0)));
  std::vector<fx::variable<float>> vars;
  vars.reserve(gs.size());
  for (const auto& g : gs) vars.emplace_back(fx::zeros<float>(g.shape()));
  std::vector<fx::variable<float>*> pointers;
  for (auto& v : vars) pointers.push_back(&v);
  fx::optim::sgd sgd{{.learning_rate = 0.01, .gradient_accumulation_steps = accumulation}};
  fx::distributed::data_parallel dp{*g_comm, sgd};
  g_comm->barrier();
  for (auto _ : state) {
    dp.apply_gradients(gs, pointers);
    benchmark::DoNotOptimize(vars[0].peek().data());
  }
  report(state, total(gs));
}
void BM_step_every_call(benchmark::State& state) { step(state, 0); }
void BM_step_accumulate4(benchmark::State& state) { step(state, 4); }

void BM_mpi_one_buffer(benchmark::State& state) {
  const auto gs = gradients(static_cast<int>(state.range(0)));
  std::vector<float> buffer(static_cast<std::size_t>(total(gs)));
  g_comm->barrier();
  for (auto _ : state) {
    MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, MPI_SUM, g_comm->native());
    benchmark::DoNotOptimize(buffer.data());
  }
  report(state, total(gs));
}

void BM_mpi_per_tensor(benchmark::State& state) {
  auto gs = gradients(static_cast<int>(state.range(0)));
  g_comm->barrier();
  for (auto _ : state) {
    for (auto& g : gs)
      MPI_Allreduce(MPI_IN_PLACE, g.mutable_data(), static_cast<int>(g.size()), MPI_FLOAT, MPI_SUM, g_comm->native());
    benchmark::DoNotOptimize(gs[0].data());
  }
  report(state, total(gs));
}

#if FLUXION_BENCH_HAVE_GLOO
c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo_group() {
  static c10::intrusive_ptr<c10d::ProcessGroupGloo> group = [] {
    // A store file that is new to this job: process 0's name, broadcast.
    fx::tensor<std::int64_t> id{static_cast<std::int64_t>(std::chrono::steady_clock::now().time_since_epoch().count())};
    id = g_comm->broadcast(id, 0);
    const std::string path = "/tmp/fluxion_bench_gloo_" + std::to_string(id.item());
    auto store = c10::make_intrusive<c10d::FileStore>(path, g_comm->size());
    auto options = c10d::ProcessGroupGloo::Options::create();
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    return c10::make_intrusive<c10d::ProcessGroupGloo>(store, g_comm->rank(), g_comm->size(), options);
  }();
  return group;
}

/// DDP's bucket: the tensors flattened into one, all-reduced by Gloo and divided by the process
/// count; f(i, mean of tensor i) for each.
template <class F>
void gloo_mean(const c10::intrusive_ptr<c10d::ProcessGroupGloo>& group, const std::vector<torch::Tensor>& tensors, F f) {
  std::vector<torch::Tensor> flat;
  for (const auto& t : tensors) flat.push_back(t.reshape({-1}));
  std::vector<torch::Tensor> bucket{torch::cat(flat)};
  group->allreduce(bucket)->wait();
  bucket[0].div_(g_comm->size());
  std::int64_t at = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    f(i, bucket[0].narrow(0, at, tensors[i].numel()).view_as(tensors[i]));
    at += tensors[i].numel();
  }
}

void BM_torch_gloo(benchmark::State& state) {
  at::set_num_threads(1);
  torch::manual_seed(1 + g_comm->rank());
  std::vector<torch::Tensor> gs;
  for (const auto& s : shapes(static_cast<int>(state.range(0)))) gs.push_back(torch::randn(std::vector<int64_t>(s.begin(), s.end())));
  auto group = gloo_group();
  std::int64_t n = 0;
  for (const auto& g : gs) n += g.numel();
  g_comm->barrier();
  for (auto _ : state) {
    gloo_mean(group, gs, [&](std::size_t i, const torch::Tensor& mean) { gs[i].copy_(mean); });
    benchmark::DoNotOptimize(gs[0].data_ptr());
  }
  report(state, n);
}

void BM_torch_gloo_accumulate4(benchmark::State& state) {
  at::set_num_threads(1);
  torch::NoGradGuard no_grad;
  torch::manual_seed(1 + g_comm->rank());
  std::vector<torch::Tensor> gs, params, grads;
  for (const auto& s : shapes(static_cast<int>(state.range(0)))) {
    gs.push_back(torch::randn(std::vector<int64_t>(s.begin(), s.end())));
    params.push_back(torch::zeros_like(gs.back()));
    grads.push_back(torch::zeros_like(gs.back()));
  }
  auto group = gloo_group();
  std::int64_t n = 0, calls = 0;
  for (const auto& g : gs) n += g.numel();
  g_comm->barrier();
  for (auto _ : state) {
    for (std::size_t i = 0; i < gs.size(); ++i) grads[i].add_(gs[i], 0.25);  // backward() of loss / 4
    if (++calls % 4 == 0)
      gloo_mean(group, grads, [&](std::size_t i, const torch::Tensor& mean) {
        params[i].add_(mean, -0.01);
        grads[i].zero_();
      });
    benchmark::DoNotOptimize(params[0].data_ptr());
  }
  report(state, n);
}
#endif

void add(const char* name, void (*f)(benchmark::State&), const char* what = "average_gradients") {
  benchmark::RegisterBenchmark((std::string(what) + "/mlp/" + name).c_str(), f)
      ->Arg(0)->Iterations(400)->UseRealTime()->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark((std::string(what) + "/cnn/" + name).c_str(), f)
      ->Arg(1)->Iterations(40)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  fx::distributed::communicator comm{argc, argv};
  g_comm = &comm;
  fx::set_num_threads(1);
  benchmark::Initialize(&argc, argv);
  add("fluxion", BM_fluxion);
  add("fluxion_owned", BM_fluxion_owned);
  add("mpi_one_buffer", BM_mpi_one_buffer);
  add("mpi_per_tensor", BM_mpi_per_tensor);
#if FLUXION_BENCH_HAVE_GLOO
  add("torch_gloo", BM_torch_gloo);
#endif
  add("step_every_call", BM_step_every_call, "apply_gradients");
  add("step_accumulate4", BM_step_accumulate4, "apply_gradients");
#if FLUXION_BENCH_HAVE_GLOO
  add("torch_gloo_accumulate4", BM_torch_gloo_accumulate4, "apply_gradients");
#endif
  // Every process runs every benchmark (they are collectives); process 0 reports.
  if (comm.rank() == 0) {
    benchmark::RunSpecifiedBenchmarks();
  } else {
    benchmark::BenchmarkReporter* none = nullptr;
    struct silent : benchmark::BenchmarkReporter {
      bool ReportContext(const Context&) override { return true; }
      void ReportRuns(const std::vector<Run>&) override {}
    } quiet;
    none = &quiet;
    benchmark::RunSpecifiedBenchmarks(none);
  }
  benchmark::Shutdown();
  return 0;
}
