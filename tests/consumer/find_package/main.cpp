// The smallest useful fluxion program, built by both consumer tests: it checks that the package's
// headers, include paths and dependencies work in a project that is not fluxion's own.
#include <fluxion/fluxion.hpp>

#include <cstdio>

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
  std::puts("consumer: ok");
  return 0;
}
