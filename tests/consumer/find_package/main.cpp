// The smallest useful fluxion program, built by both consumer tests: it checks that the package's
// headers, include paths and dependencies work in a project that is not fluxion's own.
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <cstdio>
#include <string>

int main() {
  namespace fx = fluxion;
  fx::tensor<float> t = {1.f, 2.f, 3.f};
  fx::tensor<float> sum = fx::reduce_sum(t * 2.f);
  const float value = sum.item();
  if (value != 12.f) {
    std::fprintf(stderr, "consumer: reduce_sum(t * 2) = %g, expected 12\n", static_cast<double>(value));
    return 1;
  }
  // matmul runs the GEMM: header-only, or from fluxion_target_prebuilt_kernels's library.
  fx::tensor<float> m = fx::matmul(fx::tensor<float>{{1.f, 2.f}}, fx::tensor<float>{{3.f}, {4.f}});
  if (m.item() != 11.f) {
    std::fprintf(stderr, "consumer: matmul = %g, expected 11\n", static_cast<double>(m.item()));
    return 1;
  }
  // reduce_logsumexp and its gradient run statements of tensors: header-only, or (float) from the
  // prebuilt library, where a declaration that matched no definition would fail to link here.
  fx::tensor<float> z = {0.f, 0.f};
  fx::gradient_tape tape;
  tape.watch(z);
  fx::tensor<float> lse = fx::reduce_logsumexp(z);
  const auto g = tape.gradient(lse, z).to_vector();
  if (std::fabs(lse.item() - std::log(2.f)) > 1e-6f || std::fabs(g[0] - 0.5f) > 1e-6f || std::fabs(g[1] - 0.5f) > 1e-6f) {
    std::fprintf(stderr, "consumer: reduce_logsumexp([0, 0]) = %g with gradient (%g, %g), expected log 2 and (0.5, 0.5)\n",
                 static_cast<double>(lse.item()), static_cast<double>(g[0]), static_cast<double>(g[1]));
    return 1;
  }
  // The core's non-template code (the thread pool, the host cache and its statistics, shape
  // checks) comes from the library with prebuilt kernels (core/prebuilt.hpp): two threads split a
  // statement of 2^20 elements, which allocates exactly its output, and a broadcast error is the
  // library's exception.
  fx::set_num_threads(2);
  const fx::tensor<float> ones = fx::ones<float>({1 << 20});
  const auto allocations = fx::memory_stats().allocations;
  const fx::tensor<float> threes = ones * 2.f + 1.f;
  if (fx::memory_stats().allocations - allocations != 1 || threes.to_vector()[(1 << 20) - 1] != 3.f) {
    std::fprintf(stderr, "consumer: ones * 2 + 1 over 2^20 elements made %lld buffers, expected 1 (last element %g)\n",
                 static_cast<long long>(fx::memory_stats().allocations - allocations),
                 static_cast<double>(threes.to_vector()[(1 << 20) - 1]));
    return 1;
  }
  try {
    const fx::tensor<float> bad = fx::tensor<float>{1.f, 2.f} + fx::tensor<float>{1.f, 2.f, 3.f};
    std::fprintf(stderr, "consumer: adding shapes (2,) and (3,) did not throw\n");
    return 1;
  } catch (const fx::shape_error& e) {
    if (std::string(e.what()).find("shapes (2,) and (3,) cannot be broadcast") == std::string::npos) {
      std::fprintf(stderr, "consumer: adding shapes (2,) and (3,) threw '%s'\n", e.what());
      return 1;
    }
  }
  std::puts("consumer: ok");
  return 0;
}
