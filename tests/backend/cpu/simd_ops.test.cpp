#include "../../test_util.hpp"

#include <fluxion/backend/cpu/detail/simd_ops.hpp>

// The CPU loops use the widest vectors of the architecture the compiler targets: with
// -march=native on an AVX-512 machine, 16 floats and 8 doubles a vector.

TEST_CASE("simd: the vector width follows the compiler's target") {
  using fx::detail::kernels::simd_ops;
#if defined(__AVX512F__)
  CHECK(simd_ops<float>::width == 16);
  CHECK(simd_ops<double>::width == 8);
  CHECK(fx::detail::kernels::simd_register_count == 32);
#elif defined(__AVX__)
  CHECK(simd_ops<float>::width == 8);
  CHECK(simd_ops<double>::width == 4);
#elif defined(__SSE2__)
  CHECK(simd_ops<float>::width == 4);
#endif
  MESSAGE("xsimd architecture: " << std::string(xsimd::default_arch::name()) << ", float lanes: " << simd_ops<float>::width);
}

TEST_CASE_TEMPLATE("simd: vector bodies and scalar tails agree with a scalar loop", T, float, double) {
  // Sizes around multiples of every width, so the vector body, the tail and both together run.
  for (fx::index_t n : {1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({n}, 1), b = test::random_tensor<T>({n}, 2);
    fx::tensor<T> r = a * b + fx::sin(a) - b / T(3);
    for (fx::index_t i = 0; i < n; ++i)
      CHECK(r(i) == doctest::Approx(a(i) * b(i) + std::sin(a(i)) - b(i) / T(3)).epsilon(1e-5));
  }
}
