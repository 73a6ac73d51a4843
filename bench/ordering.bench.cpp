// cumsum, sort, top_k, norm and tile against LibTorch's in the same run, float, 1 and 2 threads:
//
//   cumsum_rows      cumsum along the last axis of (256, 4096): contiguous lanes
//   cumsum_columns   cumsum along axis 0 of (4096, 256): lanes 256 elements apart
//   cumprod_rows     cumprod along the last axis of (256, 4096), values near 1 (stop 61)
//   cumprod_train    the same under a tape (autograd), then the gradient of sum(cumprod(x) * dy)
//   discounted_returns  g[t] = r[t] + 0.99 g[t + 1] along the last axis of (256, 4096):
//                    fx::linear_recurrence against a hand-written loop over the rows (no LibTorch op)
//   sort             sort along the last axis of (256, 1024), values (and their positions)
//   top_k            the 10 largest of each row of (256, 1000) logits, values and indices
//   top_k_train      the same under a tape (autograd), then the gradient of sum(values * dy)
//   norm             the Euclidean norm of each row of (256, 1024)
//   tile             (64, 128) tiled (4, 4)
//   einsum_attention "bhqd,bhkd->bhqk" over (32, 8, 64, 32): attention scores
//   einsum_chain     "ij,jk,k->i" over (512, 512), (512, 512), (512): fluxion's greedy order multiplies
//                    the matrix by the vector first; peers torch::einsum (left to right, LibTorch's C++
//                    default) and torch_matmul, the same order written by hand (stop 63)
//   einsum_trace     "bii->b" over (64, 256, 256): batched traces (stop 63; the diagonal a strided
//                    view since stop 82, a gather of an index tensor before)
//   trace_train      fx::linalg::trace of the same under a tape, then the gradient of sum(traces * dy)
//                    (stop 82)
//   trace_of_exp     fx::linalg::trace(exp(x)) of the same: the diagonal a view of the expression,
//                    computed at the diagonal only (stop 82); LibTorch exponentiates every element
//   segment_sum      unsorted_segment_sum of (16384, 64) rows into 1024 segments
//   segment_max      unsorted_segment_max of the same (stop 60)
//   gather_rows      16384 rows of 64 picked from (65536, 64) by index: an embedding lookup (stop 60)
//   gather_nd        16384 rows of 64 picked from (256, 256, 64) by (row, column) pairs (stop 60)
//
// LibTorch: torch::cumsum, torch::cumprod, torch::sort, torch::topk, x.norm, repeat, torch::einsum,
// torch::diagonal, index_add_, scatter_reduce("amax"), index_select, and indexing by two index tensors.
//
//   ./ordering.bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include <fluxion/fluxion.hpp>

#include "threads.hpp"

#if FLUXION_BENCH_HAVE_TORCH
#include <ATen/Parallel.h>
#include <torch/torch.h>
#endif

namespace fx = fluxion;

namespace {

fx::tensor<float> uniform(const fx::shape& s, std::uint64_t seed) {
  fx::random::generator gen{seed};
  return fx::random::uniform<float>(s, gen, -1.f, 1.f);
}

const auto add = add_at_both_thread_counts;

const int registered = [] {
  add("cumsum_rows", "fluxion", [] {
    auto x = uniform({256, 4096}, 1);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::cumsum(x, 1)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("cumsum_rows", "torch", [] {
    auto x = torch::rand({256, 4096});
    return [x] { benchmark::DoNotOptimize(torch::cumsum(x, 1).data_ptr()); };
  });
#endif
  add("cumsum_columns", "fluxion", [] {
    auto x = uniform({4096, 256}, 2);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::cumsum(x, 0)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("cumsum_columns", "torch", [] {
    auto x = torch::rand({4096, 256});
    return [x] { benchmark::DoNotOptimize(torch::cumsum(x, 0).data_ptr()); };
  });
#endif
  add("cumprod_rows", "fluxion", [] {
    fx::tensor<float> x = 1.f + 1e-4f * uniform({256, 4096}, 11);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::cumprod(x, 1)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("cumprod_rows", "torch", [] {
    auto x = 1.f + 1e-4f * (2 * torch::rand({256, 4096}) - 1);
    return [x] { benchmark::DoNotOptimize(torch::cumprod(x, 1).data_ptr()); };
  });
#endif
  add("cumprod_train", "fluxion", [] {
    fx::tensor<float> x = 1.f + 1e-4f * uniform({256, 4096}, 12);
    fx::tensor<float> dy = uniform({256, 4096}, 13);
    return [x, dy] {
      fx::gradient_tape tape;
      tape.watch(x);
      fx::tensor<float> y = fx::reduce_sum(fx::cumprod(x, 1) * dy);
      benchmark::DoNotOptimize(tape.gradient(y, x).data());
    };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("cumprod_train", "torch", [] {
    auto x = (1.f + 1e-4f * (2 * torch::rand({256, 4096}) - 1)).requires_grad_(true);
    auto dy = 2 * torch::rand({256, 4096}) - 1;
    return [x, dy] {
      auto y = (torch::cumprod(x, 1) * dy).sum();
      benchmark::DoNotOptimize(torch::autograd::grad({y}, {x})[0].data_ptr());
    };
  });
#endif
  add("discounted_returns", "fluxion", [] {
    auto r = uniform({256, 4096}, 14);
    return [r] { benchmark::DoNotOptimize(fx::tensor<float>(fx::linear_recurrence(0.99f, r, 1, {.reverse = true})).data()); };
  });
  add("discounted_returns", "loop", [] {
    auto r = uniform({256, 4096}, 14);
    return [r] {
      fx::tensor<float> g(r.shape());
      const float* rp = r.data();
      float* gp = g.mutable_data();
      for (fx::index_t i = 0; i < 256; ++i) {
        float h = 0;
        for (fx::index_t t = 4095; t >= 0; --t) gp[i * 4096 + t] = h = rp[i * 4096 + t] + 0.99f * h;
      }
      benchmark::DoNotOptimize(g.data());
    };
  });
  add("sort", "fluxion", [] {
    auto x = uniform({256, 1024}, 3);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::sort(x)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("sort", "torch", [] {
    auto x = torch::rand({256, 1024});
    return [x] { benchmark::DoNotOptimize(std::get<0>(torch::sort(x, 1)).data_ptr()); };
  });
#endif
  add("top_k", "fluxion", [] {
    auto x = uniform({256, 1000}, 4);
    return [x] { benchmark::DoNotOptimize(fx::top_k(x, 10).values.data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("top_k", "torch", [] {
    auto x = torch::rand({256, 1000});
    return [x] { benchmark::DoNotOptimize(std::get<0>(torch::topk(x, 10)).data_ptr()); };
  });
#endif
  add("top_k_train", "fluxion", [] {
    auto x = uniform({256, 1000}, 5);
    auto dy = uniform({256, 10}, 6);
    return [x, dy] {
      fx::gradient_tape tape;
      tape.watch(x);
      const fx::tensor<float> s = fx::reduce_sum(fx::top_k(x, 10).values * dy);
      benchmark::DoNotOptimize(tape.gradient(s, x).data());
    };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("top_k_train", "torch", [] {
    auto x = torch::rand({256, 1000});
    auto dy = torch::rand({256, 10});
    return [x, dy] {
      const torch::Tensor xi = x.detach().requires_grad_(true);
      (std::get<0>(torch::topk(xi, 10)) * dy).sum().backward();
      benchmark::DoNotOptimize(xi.grad().data_ptr());
    };
  });
#endif
  add("norm", "fluxion", [] {
    auto x = uniform({256, 1024}, 7);
    return [x] { benchmark::DoNotOptimize(fx::norm(x, 2, 1).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("norm", "torch", [] {
    auto x = torch::rand({256, 1024});
    return [x] { benchmark::DoNotOptimize(x.norm(2, {1}).data_ptr()); };
  });
#endif
  add("tile", "fluxion", [] {
    auto x = uniform({64, 128}, 8);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::tile(x, {4, 4})).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("tile", "torch", [] {
    auto x = torch::rand({64, 128});
    return [x] { benchmark::DoNotOptimize(x.repeat({4, 4}).data_ptr()); };
  });
#endif
  add("einsum_attention", "fluxion", [] {
    auto q = uniform({32, 8, 64, 32}, 9), k = uniform({32, 8, 64, 32}, 10);
    return [q, k] { benchmark::DoNotOptimize(fx::einsum("bhqd,bhkd->bhqk", q, k).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("einsum_attention", "torch", [] {
    auto q = torch::rand({32, 8, 64, 32}), k = torch::rand({32, 8, 64, 32});
    return [q, k] { benchmark::DoNotOptimize(torch::einsum("bhqd,bhkd->bhqk", {q, k}).data_ptr()); };
  });
#endif
  add("einsum_chain", "fluxion", [] {
    auto a = uniform({512, 512}, 13), b = uniform({512, 512}, 14), v = uniform({512}, 15);
    return [a, b, v] { benchmark::DoNotOptimize(fx::einsum("ij,jk,k->i", a, b, v).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("einsum_chain", "torch", [] {
    auto a = torch::rand({512, 512}), b = torch::rand({512, 512}), v = torch::rand({512});
    return [a, b, v] { benchmark::DoNotOptimize(torch::einsum("ij,jk,k->i", {a, b, v}).data_ptr()); };
  });
  add("einsum_chain", "torch_matmul", [] {
    auto a = torch::rand({512, 512}), b = torch::rand({512, 512}), v = torch::rand({512});
    return [a, b, v] { benchmark::DoNotOptimize(a.matmul(b.matmul(v)).data_ptr()); };
  });
#endif
  add("einsum_trace", "fluxion", [] {
    auto x = uniform({64, 256, 256}, 16);
    return [x] { benchmark::DoNotOptimize(fx::einsum("bii->b", x).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("einsum_trace", "torch", [] {
    auto x = torch::rand({64, 256, 256});
    return [x] { benchmark::DoNotOptimize(torch::einsum("bii->b", {x}).data_ptr()); };
  });
#endif
  add("trace_train", "fluxion", [] {
    fx::tensor<float> x = uniform({64, 256, 256}, 16);
    fx::tensor<float> dy = uniform({64}, 17);
    return [x, dy] {
      fx::gradient_tape tape;
      tape.watch(x);
      fx::tensor<float> y = fx::reduce_sum(fx::linalg::trace(x) * dy);
      benchmark::DoNotOptimize(tape.gradient(y, x).data());
    };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("trace_train", "torch", [] {
    auto x = torch::rand({64, 256, 256}).requires_grad_(true);
    auto dy = 2 * torch::rand({64}) - 1;
    return [x, dy] {
      auto y = (torch::diagonal(x, 0, -2, -1).sum(-1) * dy).sum();
      benchmark::DoNotOptimize(torch::autograd::grad({y}, {x})[0].data_ptr());
    };
  });
#endif
  add("trace_of_exp", "fluxion", [] {
    auto x = uniform({64, 256, 256}, 16);
    return [x] { benchmark::DoNotOptimize(fx::tensor<float>(fx::linalg::trace(fx::exp(x))).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("trace_of_exp", "torch", [] {
    auto x = torch::rand({64, 256, 256});
    return [x] { benchmark::DoNotOptimize(torch::diagonal(torch::exp(x), 0, -2, -1).sum(-1).data_ptr()); };
  });
#endif
  add("segment_sum", "fluxion", [] {
    auto x = uniform({16384, 64}, 11);
    fx::random::generator gen{12};
    const fx::tensor<std::int32_t> ids = fx::random::uniform<std::int32_t>({16384}, gen, 0, 1024);
    return [x, ids] { benchmark::DoNotOptimize(fx::tensor<float>(fx::unsorted_segment_sum(x, ids, 1024)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("segment_sum", "torch", [] {
    auto x = torch::rand({16384, 64});
    auto ids = torch::randint(0, 1024, {16384}, torch::kLong);
    return [x, ids] { benchmark::DoNotOptimize(torch::zeros({1024, 64}).index_add_(0, ids, x).data_ptr()); };
  });
#endif
  add("segment_max", "fluxion", [] {
    auto x = uniform({16384, 64}, 11);
    fx::random::generator gen{12};
    const fx::tensor<std::int32_t> ids = fx::random::uniform<std::int32_t>({16384}, gen, 0, 1024);
    return [x, ids] { benchmark::DoNotOptimize(fx::tensor<float>(fx::unsorted_segment_max(x, ids, 1024)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("segment_max", "torch", [] {
    auto x = torch::rand({16384, 64});
    auto ids = torch::randint(0, 1024, {16384}, torch::kLong).unsqueeze(1).expand({16384, 64});
    return [x, ids] {
      benchmark::DoNotOptimize(torch::zeros({1024, 64}).scatter_reduce_(0, ids, x, "amax", /*include_self=*/false).data_ptr());
    };
  });
#endif
  add("gather_rows", "fluxion", [] {
    auto table = uniform({65536, 64}, 15);
    fx::random::generator gen{16};
    const fx::tensor<std::int32_t> ids = fx::random::uniform<std::int32_t>({16384}, gen, 0, 65536);
    return [table, ids] { benchmark::DoNotOptimize(fx::tensor<float>(fx::gather(table, ids, 0)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("gather_rows", "torch", [] {
    auto table = torch::rand({65536, 64});
    auto ids = torch::randint(0, 65536, {16384}, torch::kLong);
    return [table, ids] { benchmark::DoNotOptimize(table.index_select(0, ids).data_ptr()); };
  });
#endif
  add("gather_nd", "fluxion", [] {
    auto x = uniform({256, 256, 64}, 13);
    fx::random::generator gen{14};
    const fx::tensor<std::int32_t> at = fx::random::uniform<std::int32_t>({16384, 2}, gen, 0, 256);
    return [x, at] { benchmark::DoNotOptimize(fx::tensor<float>(fx::gather_nd(x, at)).data()); };
  });
#if FLUXION_BENCH_HAVE_TORCH
  add("gather_nd", "torch", [] {
    auto x = torch::rand({256, 256, 64});
    auto at = torch::randint(0, 256, {16384, 2}, torch::kLong);
    return [x, at] { benchmark::DoNotOptimize(x.index({at.select(1, 0), at.select(1, 1)}).data_ptr()); };
  });
#endif
  return 0;
}();

}  // namespace
