// Elementwise expressions on fx::cuda give the cpu evaluator's results: arithmetic, broadcasting,
// scalars on either side, casts between element types, where, comparisons and unary math.
// Built with a host compiler, the cuda device runs on Thrust's OpenMP system; with nvcc, on a GPU.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;
using fluxion_test::with_values;

}  // namespace

TEST_CASE("cuda elementwise: a fused chain equals the cpu, and values a naive loop computes") {
  const fx::shape s{37, 53};
  auto a = filled<float>(s, 1), b = filled<float>(s, 2), c = filled<float>(s, 3), d = filled<float>(s, 4);
  auto e = filled<float>(s, 5);
  auto r = same_on_both_devices([](const auto& a, const auto& b, const auto& c, const auto& d,
                                   const auto& e) { return a * b + c * d - fx::sin(e); },
                                a, b, c, d, e);
  std::vector<float> naive(static_cast<std::size_t>(s.size()));
  for (fx::index_t i = 0; i < s.size(); ++i)
    naive[static_cast<std::size_t>(i)] =
        a.data()[i] * b.data()[i] + c.data()[i] * d.data()[i] - std::sin(e.data()[i]);
  fx::tensor<float, fx::cuda> g = fx::to<fx::cuda>(a) * fx::to<fx::cuda>(b) + fx::to<fx::cuda>(c) * fx::to<fx::cuda>(d) -
                                  fx::sin(fx::to<fx::cuda>(e));
  fluxion_test::check_values(g.to_vector(), naive, 1e-5);
}

TEST_CASE("cuda elementwise: a materialization allocates exactly its output on the device") {
  auto a = fx::to<fx::cuda>(filled<float>({1000}, 7));
  auto b = fx::to<fx::cuda>(filled<float>({1000}, 8));
  const auto before = fx::memory::stats<fx::cuda>();
  fx::tensor<float, fx::cuda> r = a * b + fx::exp(a) - 2.f * b;
  const auto after = fx::memory::stats<fx::cuda>();
  CHECK(after.allocations - before.allocations == 1);
  CHECK(after.buffers_in_use - before.buffers_in_use == 1);
  CHECK(r.shape() == fx::shape{1000});
}

TEST_CASE("cuda elementwise: broadcasting") {
  SUBCASE("(4, 1, 5) with (3, 1)") {
    auto r = same_on_both_devices([](const auto& x, const auto& y) { return x + y; }, filled<float>({4, 1, 5}, 1),
                                  filled<float>({3, 1}, 2));
    CHECK(r.shape() == fx::shape{4, 3, 5});
  }
  SUBCASE("a column times a row: an outer product, no axis can merge") {
    auto col = with_values<float>({3, 1}, {1, 2, 3});
    auto row = with_values<float>({1, 4}, {10, 20, 30, 40});
    auto r = same_on_both_devices([](const auto& x, const auto& y) { return x * y; }, col, row);
    CHECK(r.to_vector() == std::vector<float>{10, 20, 30, 40, 20, 40, 60, 80, 30, 60, 90, 120});
  }
  SUBCASE("a rank-0 tensor with a matrix, on either side") {
    auto s = with_values<double>({}, {0.5});
    auto m = filled<double>({6, 9}, 3);
    same_on_both_devices([](const auto& x, const auto& y) { return x / y - y * x; }, s, m);
  }
  SUBCASE("rank 5, with a middle axis of extent 1 on one side") {
    same_on_both_devices([](const auto& x, const auto& y) { return fx::maximum(x, y) * x; },
                         filled<float>({2, 3, 1, 4, 5}, 4), filled<float>({3, 7, 1, 5}, 5));
  }
  SUBCASE("an empty operand gives an empty result") {
    auto r = same_on_both_devices([](const auto& x, const auto& y) { return x + y; }, filled<float>({0, 3}, 1),
                                  filled<float>({3}, 2));
    CHECK(r.shape() == fx::shape{0, 3});
  }
  SUBCASE("shapes that do not broadcast throw, naming the op") {
    auto x = fx::to<fx::cuda>(filled<float>({2, 3}, 1));
    auto y = fx::to<fx::cuda>(filled<float>({4}, 2));
    CHECK_THROWS_WITH_AS(x * y, "multiply: shapes (2, 3) and (4,) cannot be broadcast", fx::shape_error);
  }
}

TEST_CASE("cuda elementwise: coordinates by 32-bit dividers and by 64-bit division agree") {
  using fx::detail::cuda_kernel::divider;
  SUBCASE("a divider gives n / d for d up to 2^31 and n below 2^31") {
    const std::uint32_t big = 0x7FFFFFFFu;
    for (fx::index_t d : {fx::index_t{1}, fx::index_t{2}, fx::index_t{3}, fx::index_t{7}, fx::index_t{32},
                          fx::index_t{196}, fx::index_t{784}, fx::index_t{65537}, fx::index_t{big},
                          fx::index_t{big} + 1}) {
      const divider div(d);
      for (std::uint32_t n : {0u, 1u, 2u, 31u, 32u, 33u, 783u, 784u, 785u, 123456789u, big - 1, big}) {
        CAPTURE(d);
        CAPTURE(n);
        CHECK(div.div(n) == static_cast<std::uint32_t>(n / static_cast<std::uint64_t>(d)));
      }
    }
  }
  SUBCASE("broadcast statements and reductions over several axes, both ways") {
    auto x = filled<float>({5, 7, 3, 6}, 1), b = filled<float>({6}, 2), r = filled<float>({7, 1, 1}, 3);
    auto run = [&] {
      return same_on_both_devices(
          [](const auto& x, const auto& b, const auto& r) {
            return fx::reduce_sum(fx::relu(x + b) * r, {0, 2}) + fx::reduce_max(x - r, {0, 2});
          },
          x, b, r);
    };
    const auto narrow = run().to_vector();
    fluxion_test::scoped_setting<fx::index_t> wide(fx::detail::cuda_kernel::narrow_limit(), 0);
    CHECK(run().to_vector() == narrow);
  }
}

TEST_CASE("cuda elementwise: scalars on either side keep the tensor's element type") {
  auto f = filled<float>({5, 7}, 1);
  auto i = filled<std::int32_t>({5, 7}, 2, -50, 50);
  same_on_both_devices([](const auto& x) { return 2.f * x - x / 3.f + 1.f; }, f);
  same_on_both_devices([](const auto& x) { return 1.f / (x * x + 1.f); }, f);
  auto ri = same_on_both_devices([](const auto& x) { return 3 - x * 2 + x / 7 + x % 5; }, i);
  static_assert(std::is_same_v<fx::value_type_t<decltype(ri)>, std::int32_t>);
  auto rd = same_on_both_devices([](const auto& x) { return 0.5 * x; }, i);
  static_assert(std::is_same_v<fx::value_type_t<decltype(rd)>, double>);
  CHECK(rd.to_vector()[0] == 0.5 * i.to_vector()[0]);
}

TEST_CASE("cuda elementwise: mixed element types through cast and promotion") {
  auto f = filled<float>({4, 6}, 1, -10, 10);
  auto i = filled<std::int32_t>({4, 6}, 2, -10, 10);
  auto l = filled<std::int64_t>({6}, 3, -1000, 1000);
  auto d = filled<double>({4, 1}, 4);
  same_on_both_devices([](const auto& f, const auto& i) { return fx::cast<float>(i) * f; }, f, i);
  same_on_both_devices([](const auto& f) { return fx::cast<std::int32_t>(f); }, f);
  same_on_both_devices([](const auto& i, const auto& l) { return i + l; }, i, l);            // int64
  same_on_both_devices([](const auto& f, const auto& d) { return f * d; }, f, d);            // double
  same_on_both_devices([](const auto& f) { return fx::cast<bool>(fx::floor(f)); }, f);
  auto r = same_on_both_devices([](const auto& f) { return fx::cast<double>(f > 0.f) * 2.0; }, f);
  static_assert(std::is_same_v<fx::value_type_t<decltype(r)>, double>);
}

TEST_CASE("cuda elementwise: where, comparisons and logic") {
  auto a = filled<float>({8, 9}, 1), b = filled<float>({8, 9}, 2);
  auto m = filled<bool>({9}, 3);
  same_on_both_devices([](const auto& a, const auto& b) { return fx::where(a > b, a, b); }, a, b);
  same_on_both_devices([](const auto& m, const auto& a) { return fx::where(m, 1.f, a); }, m, a);
  same_on_both_devices([](const auto& m, const auto& a) { return fx::where(m, a, -1.f); }, m, a);
  same_on_both_devices([](const auto& m) { return fx::where(m, 1, 0); }, m);
  // All six comparisons in one fused expression, on floored values so that ties occur.
  auto x = with_values<float>({5}, {1.f, 2.f, 3.f, -1.f, 0.f});
  auto y = with_values<float>({5}, {1.f, 3.f, 2.f, -1.f, -0.f});
  auto codes = same_on_both_devices(
      [](const auto& x, const auto& y) {
        using I = std::int32_t;
        return fx::cast<I>(x == y) + 2 * fx::cast<I>(x != y) + 4 * fx::cast<I>(x < y) + 8 * fx::cast<I>(x <= y) +
               16 * fx::cast<I>(x > y) + 32 * fx::cast<I>(x >= y);
      },
      x, y);
  CHECK(codes.to_vector() == std::vector<std::int32_t>{1 + 8 + 32, 2 + 4 + 8, 2 + 16 + 32, 1 + 8 + 32, 1 + 8 + 32});
  same_on_both_devices([](const auto& a, const auto& b) { return fx::floor(a) <= fx::floor(b); }, a, b);
  auto r = same_on_both_devices([](const auto& a, const auto& b, const auto& m) { return (a > 0.f && b < 0.f) || !m; },
                                a, b, m);
  static_assert(std::is_same_v<fx::value_type_t<decltype(r)>, bool>);
}

TEST_CASE_TEMPLATE("cuda elementwise: unary math", T, float, double) {
  auto x = filled<T>({13, 17}, 11, -3, 3);
  auto p = filled<T>({13, 17}, 12, 0.01, 5);
  same_on_both_devices([](const auto& x) { return fx::exp(x) + fx::expm1(x) - fx::tanh(x) + fx::sigmoid(x); }, x);
  same_on_both_devices([](const auto& p) { return fx::log(p) + fx::log1p(p) + fx::sqrt(p) + fx::rsqrt(p); }, p);
  same_on_both_devices([](const auto& x) { return fx::sin(x) * fx::cos(x) + fx::tan(x) / T(8) - fx::erf(x); }, x);
  same_on_both_devices([](const auto& x) { return fx::softplus(x) + fx::relu(x) - fx::square(x) + fx::abs(x); }, x);
  same_on_both_devices([](const auto& x) { return fx::floor(x) + fx::ceil(x) * T(2) + fx::round(x) * T(4) + fx::sign(x); },
                       x);
  same_on_both_devices([](const auto& x) { return fx::clip(-x, T(-1), T(0.5)); }, x);
  same_on_both_devices([](const auto& x, const auto& p) { return fx::pow(p, x) + fx::minimum(x, p); }, x, p);
}

TEST_CASE("cuda elementwise: NaN and infinity follow the cpu") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  auto a = with_values<float>({6}, {nan, 1.f, -inf, 0.f, inf, -2.f});
  auto b = with_values<float>({6}, {0.f, nan, 1.f, 0.f, inf, -3.f});
  auto r = same_on_both_devices([](const auto& a, const auto& b) { return fx::maximum(a, b); }, a, b);
  CHECK(std::isnan(r.to_vector()[0]));
  CHECK(std::isnan(r.to_vector()[1]));
  same_on_both_devices([](const auto& a, const auto& b) { return fx::minimum(a, b) + a / b; }, a, b);
  auto flags = same_on_both_devices([](const auto& a) { return fx::is_nan(a) || !fx::is_finite(a); }, a);
  CHECK(flags.to_vector() == std::vector<bool>{true, false, true, false, true, false});
}

TEST_CASE("cuda elementwise: integer division and remainder by zero give 0, pow is exact") {
  auto a = with_values<std::int64_t>({6}, {7, -7, 7, 0, 5, 9});
  auto b = with_values<std::int64_t>({6}, {2, 2, 0, 0, -3, 2});
  auto q = same_on_both_devices([](const auto& a, const auto& b) { return a / b; }, a, b);
  CHECK(q.to_vector() == std::vector<std::int64_t>{3, -3, 0, 0, -1, 4});
  auto m = same_on_both_devices([](const auto& a, const auto& b) { return a % b; }, a, b);
  CHECK(m.to_vector() == std::vector<std::int64_t>{1, -1, 0, 0, 2, 1});
  auto p = same_on_both_devices([](const auto& a, const auto& b) { return fx::pow(a, fx::abs(b)) - (-a); }, a, b);
  CHECK(p.to_vector() == std::vector<std::int64_t>{56, 42, 8, 1, 130, 90});
}

TEST_CASE("cuda elementwise: large tensors span many device threads") {
  auto a = filled<float>({3, 100003}, 21), b = filled<float>({100003}, 22);
  same_on_both_devices([](const auto& a, const auto& b) { return a * b - fx::tanh(a + b); }, a, b);
}

TEST_CASE("cuda elementwise: writing into a strided sub-block of a larger tensor") {
  // assign_into is how concat and pad write: offset and strides address the block [1:3, 2:5] of
  // a (4, 6) buffer, and everything outside it keeps its value.
  auto base = filled<float>({4, 6}, 31);
  auto src = filled<float>({2, 3}, 32);
  const fx::index_t strides[] = {6, 1};
  const fx::index_t offset = 1 * 6 + 2;
  fx::tensor<float> on_cpu = base * 1.f;
  fx::detail::assign_into(on_cpu, offset, strides, src * 2.f);
  auto on_cuda = fx::to<fx::cuda>(base);
  fx::detail::assign_into(on_cuda, offset, strides, fx::to<fx::cuda>(src) * 2.f);
  const auto got = on_cuda.to_vector(), want = on_cpu.to_vector(), old = base.to_vector();
  CHECK(got == want);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) {
      const bool inside = i >= 1 && i < 3 && j >= 2 && j < 5;
      const float expected = inside ? 2.f * src.data()[(i - 1) * 3 + (j - 2)] : old[static_cast<std::size_t>(i * 6 + j)];
      CHECK(got[static_cast<std::size_t>(i * 6 + j)] == expected);
    }
}

TEST_CASE("cuda elementwise: shape ops rewrite layouts and fuse on the device") {
  auto x = filled<float>({4, 5, 6}, 41);
  auto idx = with_values<std::int64_t>({3}, {4, 0, 2});
  same_on_both_devices([](const auto& x) { return fx::transpose(x) * 2.f; }, x);
  same_on_both_devices([](const auto& x) { return fx::transpose(x, {1, 2, 0}) + fx::reshape(x, {5, 6, 4}); }, x);
  same_on_both_devices([](const auto& x) { return fx::strided_slice(x, {3, 1}, {0, fx::end}, {-1, 2}) - 1.f; }, x);
  same_on_both_devices([](const auto& x) { return fx::slice(x, {1, 0, 2}, {2, -1, 3}); }, x);
  same_on_both_devices([](const auto& x) { return fx::expand_dims(fx::reduce_sum(x, 1), 1) + x; }, x);
  same_on_both_devices([](const auto& x) { return fx::broadcast_to(fx::slice(x, {0, 0, 0}, {1, 5, 1}), {4, 5, 6}); },
                       x);
  same_on_both_devices(
      [](const auto& x, const auto& i) { return fx::gather(x, i, 1) * fx::transpose(fx::gather(x, i, 2), {0, 2, 1}); },
      filled<float>({6, 6, 6}, 42), idx);
  same_on_both_devices([](const auto& i) { return fx::one_hot(i, 5); }, idx);
  same_on_both_devices([](const auto& x) { return fx::pad(x, {{1, 0}, {0, 2}, {3, 1}}, -7.f); }, x);
  same_on_both_devices(
      [](const auto& x) {
        using X = std::remove_cvref_t<decltype(x)>;
        return fx::concat(std::vector<X>{x, X(fx::sin(x))}, 1);
      },
      x);
}
