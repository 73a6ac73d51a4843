// Random draws: Philox known answers, reproducibility across thread counts and chunkings,
// moments within 5 sigma of their sampling error, and Kolmogorov–Smirnov tests against the CDFs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fluxion/tensor.hpp>
#include <fluxion/tensor/random.hpp>

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace random_test {

namespace fx = fluxion;
namespace fr = fluxion::random;
using fx::index_t;

namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const fx::error& e) {
    return e.what();
  }
  return "(no exception)";
}

/// Restores the thread count when a test ends, whatever happens.
struct thread_count_guard {
  int saved = fx::get_num_threads();
  ~thread_count_guard() { fx::set_num_threads(saved); }
};

template <class T>
bool bitwise_equal(const fx::tensor<T>& a, const fx::tensor<T>& b) {
  return a.shape() == b.shape() && std::equal(a.data(), a.data() + a.size(), b.data());
}

/// Checks the sample mean and variance of `t` against the distribution's mean, variance and
/// fourth central moment, each within 5 standard errors.
template <class T>
void check_moments(const fx::tensor<T>& t, double mean, double var, double mu4) {
  const double n = static_cast<double>(t.size());
  double s = 0;
  for (index_t i = 0; i < t.size(); ++i) s += static_cast<double>(t.data()[i]);
  const double m = s / n;
  double s2 = 0;
  for (index_t i = 0; i < t.size(); ++i) {
    const double d = static_cast<double>(t.data()[i]) - m;
    s2 += d * d;
  }
  const double v = s2 / (n - 1);
  CHECK(std::abs(m - mean) <= 5 * std::sqrt(var / n));
  CHECK(std::abs(v - var) <= 5 * std::sqrt((mu4 - var * var) / n));
}

/// The Kolmogorov–Smirnov statistic of the sample against `cdf`.
template <class T, class Cdf>
double ks_statistic(const fx::tensor<T>& t, Cdf cdf) {
  std::vector<double> x(t.data(), t.data() + t.size());
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, static_cast<double>(i + 1) / n - f, f - static_cast<double>(i) / n});
  }
  return d;
}

/// The asymptotic critical value of the KS statistic at significance 1e-3: sqrt(-ln(5e-4) / 2) / sqrt(n).
double ks_critical(index_t n) { return std::sqrt(-std::log(5e-4) / 2) / std::sqrt(static_cast<double>(n)); }

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

TEST_CASE("Philox-4x32 matches Random123's known-answer vectors") {
  // Random123 tests/kat_vectors: counter (4 words), key (2 words), expected result.
  CHECK(fr::philox4x32<10>({0, 0, 0, 0}, {0, 0}) == fr::philox_counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(fr::philox4x32<10>({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        fr::philox_counter{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(fr::philox4x32<10>({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        fr::philox_counter{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
  CHECK(fr::philox4x32<7>({0, 0, 0, 0}, {0, 0}) == fr::philox_counter{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48});
  CHECK(fr::philox4x32<7>({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        fr::philox_counter{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662});
  CHECK(fr::philox4x32<7>({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        fr::philox_counter{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a});
}

TEST_CASE("a generator's first block is Philox of counter 0 under the seed as key") {
  fr::generator gen{0};
  CHECK(gen.block(0) == fr::philox_counter{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  auto u = fr::uniform<float>({4}, gen);
  CHECK(gen.offset() == 1);
  const std::uint32_t words[] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
  for (int j = 0; j < 4; ++j) CHECK(u(j) == static_cast<float>(words[j] >> 8) * 0x1p-24f);

  fr::generator all_ones{0xffffffffffffffffull};
  all_ones.skip(0xffffffffffffffffull);  // offset 2^64 - 1: counter words 0 and 1 are all ones
  CHECK(all_ones.block(all_ones.offset(), 0xffffffff) == fr::philox4x32<10>({0xffffffff, 0xffffffff, 0xffffffff, 0},
                                                                             {0xffffffff, 0xffffffff}));
}

TEST_CASE("same seed, same values; another seed, other values") {
  auto draw_all = [](std::uint64_t seed) {
    fr::generator g{seed};
    return std::tuple{fr::uniform<float>({1000}, g), fr::uniform<double>({1000}, g, -2, 5),
                      fr::uniform<std::int32_t>({1000}, g, -50, 50), fr::uniform<std::int64_t>({1000}, g, 0, 1000000),
                      fr::normal<float>({1000}, g), fr::normal<double>({1000}, g), fr::truncated_normal<float>({1000}, g),
                      fr::truncated_normal<double>({1000}, g)};
  };
  auto a = draw_all(42), b = draw_all(42), c = draw_all(43);
  auto compare = [](const auto& x, const auto& y, const auto& z) {
    CHECK(bitwise_equal(x, y));
    CHECK(std::mismatch(x.data(), x.data() + x.size(), z.data()).first != x.data() + x.size());
  };
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (compare(std::get<I>(a), std::get<I>(b), std::get<I>(c)), ...);
  }(std::make_index_sequence<std::tuple_size_v<decltype(a)>>{});
  // Successive draws from one generator differ too.
  fr::generator g{7};
  auto first = fr::normal<float>({64}, g), second = fr::normal<float>({64}, g);
  CHECK_FALSE(bitwise_equal(first, second));
}

TEST_CASE("draws are one contiguous stream, whatever their sizes") {
  // Blocks hold 4 floats: draws of 8 and 8 are a draw of 16.
  fr::generator g1{11}, g2{11};
  auto a = fr::uniform<float>({8}, g1);
  auto b = fr::uniform<float>({2, 4}, g1);
  auto ab = fr::uniform<float>({16}, g2);
  CHECK(g1.offset() == 4);
  CHECK(g2.offset() == 4);
  CHECK(std::equal(a.data(), a.data() + 8, ab.data()));
  CHECK(std::equal(b.data(), b.data() + 8, ab.data() + 8));
  // A partial block is consumed whole.
  fr::generator g3{11};
  fr::normal<double>({3}, g3);
  CHECK(g3.offset() == 2);
  // A copy repeats the original's future draws; element i does not depend on the draw's size.
  fr::generator g4{5};
  fr::generator copy = g4;
  auto small = fr::truncated_normal<float>({1000}, g4);
  auto large = fr::truncated_normal<float>({1 << 18}, copy);
  CHECK(std::equal(small.data(), small.data() + 1000, large.data()));
}

TEST_CASE("results are identical for 1, 2 and 3 threads") {
  thread_count_guard guard;
  std::vector<fx::tensor<float>> normals, truncated;
  std::vector<fx::tensor<std::int32_t>> ints;
  for (int threads : {1, 2, 3}) {
    fx::set_num_threads(threads);
    fr::generator g{2024};
    normals.push_back(fr::normal<float>({1 << 20}, g));
    truncated.push_back(fr::truncated_normal<float>({1 << 20}, g));
    ints.push_back(fr::uniform<std::int32_t>({1 << 20}, g, -1000, 1000));
  }
  for (int i = 1; i < 3; ++i) {
    CHECK(bitwise_equal(normals[0], normals[static_cast<std::size_t>(i)]));
    CHECK(bitwise_equal(truncated[0], truncated[static_cast<std::size_t>(i)]));
    CHECK(bitwise_equal(ints[0], ints[static_cast<std::size_t>(i)]));
  }
}

TEST_CASE("uniform: range, moments and Kolmogorov–Smirnov") {
  fr::generator g{1};
  const index_t n = 1 << 20;
  auto f = fr::uniform<float>({n}, g);
  CHECK(*std::min_element(f.data(), f.data() + n) >= 0.f);
  CHECK(*std::max_element(f.data(), f.data() + n) < 1.f);
  check_moments(f, 0.5, 1.0 / 12, 1.0 / 80);

  auto d = fr::uniform<double>({n}, g, -3.0, 5.0);  // width 8: mean 1, variance 64/12, mu4 = 8^4/80
  CHECK(*std::min_element(d.data(), d.data() + n) >= -3.0);
  CHECK(*std::max_element(d.data(), d.data() + n) < 5.0);
  check_moments(d, 1.0, 64.0 / 12, 4096.0 / 80);

  const index_t m = 1 << 16;
  CHECK(ks_statistic(fr::uniform<float>({m}, g), [](double x) { return std::clamp(x, 0.0, 1.0); }) < ks_critical(m));
  CHECK(ks_statistic(fr::uniform<double>({m}, g, -1.0, 3.0), [](double x) { return std::clamp((x + 1) / 4, 0.0, 1.0); }) <
        ks_critical(m));
  // A rounding of minval + range * u up to maxval is replaced by the largest value below it.
  auto tiny = fr::uniform<float>({4096}, g, 1.f, std::nextafter(1.f, 2.f));
  CHECK(std::all_of(tiny.data(), tiny.data() + 4096, [](float x) { return x == 1.f; }));
}

TEST_CASE("uniform integers cover [minval, maxval) evenly") {
  fr::generator g{3};
  const index_t n = 1 << 20;
  auto i = fr::uniform<std::int32_t>({n}, g, -3, 7);  // 10 values: variance 99/12, mu4 = 99 * 293 / 240
  std::vector<index_t> counts(10);
  bool in_range = true;
  for (index_t k = 0; k < n; ++k) {
    const std::int32_t v = i.data()[k];
    in_range = in_range && v >= -3 && v < 7;
    if (v >= -3 && v < 7) ++counts[static_cast<std::size_t>(v + 3)];
  }
  CHECK(in_range);
  // Each count is binomial(n, 1/10): within 5 sigma of n / 10.
  for (index_t c : counts) CHECK(std::abs(static_cast<double>(c) - n / 10.0) <= 5 * std::sqrt(n * 0.09));
  check_moments(i, 1.5, 99.0 / 12, 99.0 * 293 / 240);

  auto full32 = fr::uniform<std::int32_t>({4096}, g, std::numeric_limits<std::int32_t>::min(),
                                          std::numeric_limits<std::int32_t>::max());
  CHECK(*std::max_element(full32.data(), full32.data() + 4096) > (1 << 30));
  CHECK(*std::min_element(full32.data(), full32.data() + 4096) < -(1 << 30));

  constexpr auto lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  auto full64 = fr::uniform<std::int64_t>({4096}, g, lo, hi);
  CHECK(*std::max_element(full64.data(), full64.data() + 4096) > (std::int64_t{1} << 62));
  CHECK(*std::min_element(full64.data(), full64.data() + 4096) < -(std::int64_t{1} << 62));
  auto big = fr::uniform<std::int64_t>({n}, g, 0, std::int64_t{1} << 40);  // mean 2^39, variance 2^80 / 12
  const double w = std::ldexp(1.0, 40);
  check_moments(big, w / 2, w * w / 12, w * w * w * w / 80);
}

TEST_CASE("normal: moments and Kolmogorov–Smirnov") {
  fr::generator g{5};
  const index_t n = 1 << 20;
  check_moments(fr::normal<float>({n}, g, 2.f, 3.f), 2.0, 9.0, 243.0);
  check_moments(fr::normal<double>({n}, g), 0.0, 1.0, 3.0);
  const index_t m = 1 << 16;
  CHECK(ks_statistic(fr::normal<float>({m}, g), normal_cdf) < ks_critical(m));
  CHECK(ks_statistic(fr::normal<double>({m}, g, -1.0, 0.5), [](double x) { return normal_cdf((x + 1) / 0.5); }) <
        ks_critical(m));
  auto zero = fr::normal<double>({5}, g, 4.0, 0.0);
  CHECK(zero.to_vector() == std::vector<double>(5, 4.0));
}

TEST_CASE("truncated_normal never strays beyond 2 stddev and has the truncated moments") {
  fr::generator g{9};
  const index_t n = 1 << 20;
  const double a = 2, phi = std::exp(-a * a / 2) / std::sqrt(2 * std::numbers::pi), z = std::erf(a / std::sqrt(2.0));
  const double m2 = 1 - 2 * a * phi / z, m4 = 3 * m2 - 2 * a * a * a * phi / z;  // of the standard truncated normal

  auto f = fr::truncated_normal<float>({n}, g, 1.f, 0.5f);
  CHECK(std::all_of(f.data(), f.data() + n, [](float x) { return x >= 0.f && x <= 2.f; }));
  check_moments(f, 1.0, 0.25 * m2, 0.0625 * m4);
  auto d = fr::truncated_normal<double>({n}, g);
  CHECK(std::all_of(d.data(), d.data() + n, [](double x) { return std::abs(x) <= 2.0; }));
  check_moments(d, 0.0, m2, m4);

  const index_t m = 1 << 16;
  auto cdf = [z](double x) { return std::clamp((normal_cdf(x) - normal_cdf(-2)) / z, 0.0, 1.0); };
  CHECK(ks_statistic(fr::truncated_normal<float>({m}, g), cdf) < ks_critical(m));
  CHECK(ks_statistic(fr::truncated_normal<double>({m}, g), cdf) < ks_critical(m));
}

TEST_CASE("the global generator is reseeded by set_seed") {
  fr::set_seed(123);
  auto a = fr::normal<float>({10});
  auto b = fr::uniform<double>({10}, -1.0, 1.0);
  fr::generator g{123};
  CHECK(bitwise_equal(a, fr::normal<float>({10}, g)));
  CHECK(bitwise_equal(b, fr::uniform<double>({10}, g, -1.0, 1.0)));
  fr::set_seed(123);
  CHECK(bitwise_equal(a, fr::normal<float>({10})));
}

TEST_CASE("bad arguments name the op and the values") {
  fr::generator g{0};
  CHECK_THROWS_AS(fr::uniform<float>({3}, g, 1.f, 0.f), fx::invalid_argument);
  CHECK(message_of([&] { fr::uniform<float>({3}, g, 1.f, 0.f); }) == "uniform: minval = 1 must be less than maxval = 0");
  CHECK(message_of([&] { fr::uniform<std::int32_t>({3}, g, 4, 4); }) == "uniform: minval = 4 must be less than maxval = 4");
  CHECK(message_of([&] { fr::normal<double>({3}, g, 0.0, -1.5); }) ==
        "normal: stddev = -1.5 must be finite and non-negative");
  CHECK(message_of([&] { fr::truncated_normal<float>({3}, g, 0.f, -1.f); }) ==
        "truncated_normal: stddev = -1 must be finite and non-negative");
  CHECK(message_of([&] { fr::normal<float>({3}, g, std::numeric_limits<float>::infinity(), 1.f); }) ==
        "normal: mean = inf must be finite");
  CHECK(g.offset() == 0);  // a rejected call consumes nothing
}

}  // namespace random_test
