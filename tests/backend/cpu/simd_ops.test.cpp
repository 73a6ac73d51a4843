#include "../../test_util.hpp"

#include <cmath>
#include <limits>
#include <vector>

#include <fluxion/backend/cpu/detail/simd_ops.hpp>
#include <fluxion/tensor/creation.hpp>

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

TEST_CASE_TEMPLATE("simd: fma rounds once, in vectors and in scalars", T, float, double) {
  // (1 + e_i)(1 + f_i) - 1 with e, f of a few ulps: the product's low bits are lost when it is
  // rounded before the addition, so one rounding and two give different bits. xsimd's AVX-512 fma is
  // `x * y + z`, fused by g++ and not by clang: simd_ops::fma calls the instruction itself. A target
  // without fused multiply-add instructions (SSE2: the `_sse2` build of this test) multiplies, then
  // adds, in vectors; the scalar stand-in is std::fma, one rounding everywhere.
  using fx::detail::kernels::simd_ops;
  using V = simd_ops<T>;
  using S = simd_ops<T, false>;
  constexpr fx::index_t n = 2 * V::width;
  std::vector<T> a(n), b(n), c(n, T(-1)), out(n);
  const T ulp = std::numeric_limits<T>::epsilon();
  for (fx::index_t i = 0; i < n; ++i) {
    a[static_cast<std::size_t>(i)] = T(1) + T(i + 1) * ulp;
    b[static_cast<std::size_t>(i)] = T(1) + T(i + 3) * ulp;
  }
  for (fx::index_t i = 0; i < n; i += V::width)
    V::storeu(out.data() + i, V::fma(V::loadu(a.data() + i), V::loadu(b.data() + i), V::loadu(c.data() + i)));
  std::size_t apart = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
    CHECK(out[i] == std::fma(a[i], b[i], c[i]));
#else
    CHECK(out[i] == doctest::Approx(std::fma(a[i], b[i], c[i])).epsilon(std::is_same_v<T, float> ? 1e-5 : 1e-13));
#endif
    CHECK(S::fma(a[i], b[i], c[i]) == std::fma(a[i], b[i], c[i]));
    volatile T product = a[i] * b[i];  // rounded: a volatile store is not contracted
    apart += product + c[i] != std::fma(a[i], b[i], c[i]);
  }
  CHECK(apart == out.size());  // every case tells one rounding from two
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

TEST_CASE("simd: inline float sin and cos against double-precision std::sin and std::cos") {
  // A dense sweep through the inline range (|x| <= 4096) and past it, where xsimd takes over.
  const fx::index_t n = 1 << 18;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (fx::index_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = -5000.f + 10000.f * static_cast<float>(i) / n;
  v[0] = 0.f, v[1] = -0.f, v[2] = 1e-30f, v[3] = 4096.f, v[4] = 1e7f, v[5] = -3.14159265f;
  const auto x = fx::from_vector(v, {n});
  const auto s = fx::tensor<float>(fx::sin(x)).to_vector(), c = fx::tensor<float>(fx::cos(x)).to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    worst = std::max(worst, std::abs(s[i] - std::sin(static_cast<double>(v[i]))));
    worst = std::max(worst, std::abs(c[i] - std::cos(static_cast<double>(v[i]))));
  }
  CHECK(worst < 2.5e-7);  // about two float ulps of 1
  CHECK(std::signbit(s[1]));
  CHECK(s[2] == 1e-30f);
  fx::tensor<float> special = {INFINITY, -INFINITY, NAN};
  for (float y : fx::tensor<float>(fx::sin(special)).to_vector()) CHECK(std::isnan(y));
  for (float y : fx::tensor<float>(fx::cos(special)).to_vector()) CHECK(std::isnan(y));
}

TEST_CASE("simd: inline float exp against double-precision std::exp") {
  const fx::index_t n = 1 << 18;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (fx::index_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = -87.f + 175.f * static_cast<float>(i) / n;
  const auto e = fx::tensor<float>(fx::exp(fx::from_vector(v, {n}))).to_vector();
  double worst = 0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double ref = std::exp(static_cast<double>(v[i]));
    worst = std::max(worst, std::abs(e[i] - ref) / ref);
  }
  CHECK(worst < 1.8e-7);  // three float ulps
  // Outside the inline range xsimd takes over: overflow, underflow, inf and NaN.
  fx::tensor<float> special = {0.f, 100.f, -120.f, INFINITY, -INFINITY, NAN};
  const auto s = fx::tensor<float>(fx::exp(special)).to_vector();
  CHECK(s[0] == 1.f);
  CHECK(std::isinf(s[1]));
  CHECK(s[2] == 0.f);
  CHECK(std::isinf(s[3]));
  CHECK(s[4] == 0.f);
  CHECK(std::isnan(s[5]));
}

TEST_CASE_TEMPLATE("simd: sum_each gives each vector's sum in its own lane", T, float, double) {
  using ops = fx::detail::kernels::simd_ops<T>;
  constexpr fx::index_t w = ops::width;
  typename ops::batch v[w];
  std::vector<T> expected(static_cast<std::size_t>(w));
  for (fx::index_t i = 0; i < w; ++i) {
    alignas(64) T lanes[w];
    for (fx::index_t j = 0; j < w; ++j) lanes[j] = static_cast<T>((i + 1) * 100 + j);
    v[i] = ops::loadu(lanes);
    for (fx::index_t j = 0; j < w; ++j) expected[static_cast<std::size_t>(i)] += lanes[j];
  }
  std::vector<T> out(static_cast<std::size_t>(w));
  ops::sum_each(v, out.data());
  CHECK(out == expected);
}

TEST_CASE_TEMPLATE("simd: sin and cos in every octant, of both signs, against the C library", T, float, double) {
  // sin's sign depends on the octant and on the sign of x; every octant of [-20, 20] is hit many
  // times, the octant boundaries too. Built again for SSE2 and AVX2 (backend.cpu.simd_ops_sse2,
  // _avx2), whose mask comparisons differ from AVX-512's: on SSE2 a `!=` of two masks once gave
  // sin the wrong sign for x < -3 pi / 4.
  const fx::index_t n = 4001;
  fx::tensor<T> x = fx::linspace(T(-20), T(20), n);
  fx::tensor<T> s = fx::sin(x), c = fx::cos(x), sc = fx::sin(x) * fx::cos(x);
  for (fx::index_t i = 0; i < n; ++i) {
    const double v = static_cast<double>(x.data()[i]);
    CAPTURE(v);
    CHECK(std::abs(s.data()[i] - std::sin(v)) <= 2e-6);
    CHECK(std::abs(c.data()[i] - std::cos(v)) <= 2e-6);
    CHECK(std::abs(sc.data()[i] - std::sin(v) * std::cos(v)) <= 4e-6);
  }
}
