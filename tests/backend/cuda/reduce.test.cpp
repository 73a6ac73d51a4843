// Reductions on fx::cuda give the cpu evaluator's results: every op over every axis set of a
// rank-3 operand, with keepdims, fused operands, empty axes and empty tensors, argmax/argmin with
// ties and NaN, and each of the evaluator's strategies (one thread per output, parts of a long
// segment, parts of parts).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;
using fluxion_test::with_values;

// Every subset of the three axes, as axis lists (the empty list reduces over nothing).
const std::vector<std::vector<int>> all_axis_sets = {{}, {0}, {1}, {2}, {0, 1}, {0, 2}, {1, 2}, {0, 1, 2}, {-1}, {2, 0}};

template <class T>
double sum_rtol() {
  return std::is_floating_point_v<T> ? (std::is_same_v<T, float> ? 1e-5 : 1e-12) : 0.0;
}

}  // namespace

TEST_CASE_TEMPLATE("cuda reduce: every op over every axis set, with and without keepdims", T, float, double,
                   std::int32_t, std::int64_t) {
  // Sums of positive values have no cancellation, so a relative tolerance bounds reordering.
  auto x = filled<T>({6, 7, 8}, 1, 1, 9);
  // Products of values near one stay finite; integers get -1 and 1, so products stay exact.
  fx::tensor<T> near_one;
  if constexpr (std::is_floating_point_v<T>) near_one = filled<T>({6, 7, 8}, 2, 0.9, 1.1);
  else near_one = fx::where(filled<bool>({6, 7, 8}, 2), T(1), T(-1));
  auto signed_x = filled<T>({6, 7, 8}, 3, -50, 50);
  for (const auto& list : all_axis_sets) {
    for (bool keep : {false, true}) {
      CAPTURE(list.size());
      CAPTURE(keep);
      const fx::axes ax(list);
      same_on_both_devices(sum_rtol<T>(), [&](const auto& a) { return fx::reduce_sum(a, ax, keep); }, x);
      same_on_both_devices(sum_rtol<T>(), [&](const auto& a) { return fx::reduce_mean(a, ax, keep); }, x);
      same_on_both_devices(sum_rtol<T>(), [&](const auto& a) { return fx::reduce_prod(a, ax, keep); }, near_one);
      same_on_both_devices([&](const auto& a) { return fx::reduce_max(a, ax, keep); }, signed_x);
      same_on_both_devices([&](const auto& a) { return fx::reduce_min(a, ax, keep); }, signed_x);
      same_on_both_devices([&](const auto& a) { return fx::all(a > T(-45), ax, keep); }, signed_x);
      same_on_both_devices([&](const auto& a) { return fx::any(a > T(45), ax, keep); }, signed_x);
    }
  }
}

TEST_CASE("cuda reduce: values a naive loop computes") {
  auto x = with_values<std::int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto g = fx::to<fx::cuda>(x);
  CHECK(fx::reduce_sum(g).eval().item() == 21);
  CHECK(fx::eval(fx::reduce_sum(g, 0)).to_vector() == std::vector<std::int64_t>{5, 7, 9});
  CHECK(fx::eval(fx::reduce_sum(g, 1)).to_vector() == std::vector<std::int64_t>{6, 15});
  CHECK(fx::eval(fx::reduce_prod(g, 1)).to_vector() == std::vector<std::int64_t>{6, 120});
  CHECK(fx::eval(fx::reduce_max(g, 0)).to_vector() == std::vector<std::int64_t>{4, 5, 6});
  CHECK(fx::eval(fx::reduce_min(g, -1, fx::keepdims)).shape() == fx::shape{2, 1});
  CHECK(fx::eval(fx::reduce_mean(fx::cast<double>(g), 1)).to_vector() == std::vector<double>{2.0, 5.0});
  CHECK(fx::eval(fx::reduce_mean(g, 1)).to_vector() == std::vector<std::int64_t>{2, 5});  // integer mean truncates
  CHECK(fx::eval(fx::argmax(g, 1)).to_vector() == std::vector<std::int64_t>{2, 2});
  CHECK(fx::eval(fx::argmin(g, 0)).to_vector() == std::vector<std::int64_t>{0, 0, 0});
  CHECK(fx::all(g > 0).eval().item());
  CHECK_FALSE(fx::any(g > 6).eval().item());
}

TEST_CASE("cuda reduce: each strategy of the evaluator") {
  constexpr fx::index_t chunk = fx::detail::cuda_kernel::reduce_chunk;
  SUBCASE("short segments: one thread per output") {
    same_on_both_devices([](const auto& a) { return fx::reduce_max(a, {0, 2}); }, filled<float>({3, 50, 3}, 2));
    same_on_both_devices(1e-5, [](const auto& a) { return fx::reduce_sum(a, 1); },
                         filled<float>({1000, chunk}, 3, 0.5, 1.5));
  }
  SUBCASE("one output of many elements: parts, then parts of the partial results, to one") {
    auto x = filled<float>({1000, 37}, 1, 0.5, 1.5);  // 37000 elements: several levels of parts
    auto r = same_on_both_devices(1e-5, [](const auto& a) { return fx::reduce_sum(a); }, x);
    double naive = 0;
    for (fx::index_t i = 0; i < x.size(); ++i) naive += x.data()[i];
    CHECK(r.item() == doctest::Approx(naive).epsilon(1e-5));
  }
  SUBCASE("a segment one element longer than a part") {
    auto x = filled<std::int64_t>({3, chunk + 1}, 2, -1000, 1000);
    auto r = same_on_both_devices([](const auto& a) { return fx::reduce_sum(a, 1); }, x);
    for (int row = 0; row < 3; ++row) {
      std::int64_t naive = 0;
      for (fx::index_t j = 0; j <= chunk; ++j) naive += x.data()[row * (chunk + 1) + j];
      CHECK(r.to_vector()[static_cast<std::size_t>(row)] == naive);
    }
  }
  SUBCASE("few outputs of many elements: parts per output") {
    auto x = filled<float>({3, 5000}, 4, 0.5, 1.5);
    auto r = same_on_both_devices(1e-5, [](const auto& a) { return fx::reduce_mean(a, -1); }, x);
    for (int row = 0; row < 3; ++row) {
      double naive = 0;
      for (int j = 0; j < 5000; ++j) naive += x.data()[row * 5000 + j];
      CHECK(r.to_vector()[static_cast<std::size_t>(row)] == doctest::Approx(naive / 5000).epsilon(1e-5));
    }
    same_on_both_devices([](const auto& a) { return fx::reduce_min(a, 0); }, filled<std::int32_t>({5000, 3}, 5, -1e6, 1e6));
    same_on_both_devices([](const auto& a) { return fx::any(a > 1.49f, 1); }, x);
    same_on_both_devices([](const auto& a) { return fx::argmax(a, 1); }, x);
    same_on_both_devices([](const auto& a) { return fx::argmin(a, 0); }, filled<double>({5000, 3}, 6));
  }
  SUBCASE("segments longer than chunk * chunk: partial results are split again") {
    auto x = filled<std::int32_t>({2, chunk * chunk + 7}, 7, -100, 100);
    same_on_both_devices([](const auto& a) { return fx::reduce_sum(a, 1); }, x);
    same_on_both_devices([](const auto& a) { return fx::reduce_max(a, 1); }, x);
    same_on_both_devices([](const auto& a) { return fx::argmin(a, 1); }, x);
  }
  SUBCASE("partial results come from the device cache and go back to it") {
    auto g = fx::to<fx::cuda>(filled<float>({4, 10000}, 8));
    { fx::tensor<float, fx::cuda> warm = fx::reduce_sum(g, 1); }
    const auto before = fx::memory::stats<fx::cuda>();
    fx::tensor<float, fx::cuda> r = fx::reduce_sum(g, 1);
    const auto after = fx::memory::stats<fx::cuda>();
    int levels = 0;  // one scratch buffer for each level of partial results
    for (fx::index_t n = 10000; n > chunk; n = (n + chunk - 1) / chunk) ++levels;
    CHECK(after.allocations - before.allocations == 1 + levels);  // and the output
    CHECK(after.system_allocations == before.system_allocations);
    CHECK(after.buffers_in_use - before.buffers_in_use == 1);
  }
}

TEST_CASE("cuda reduce: the operand's elementwise tree fuses into the reduction") {
  auto a = filled<float>({40, 30}, 1, 0.5, 1.5), b = filled<float>({40, 30}, 2, 0.5, 1.5);
  auto row = filled<float>({30}, 3, 0.5, 1.5);
  auto ga = fx::to<fx::cuda>(a), gb = fx::to<fx::cuda>(b);
  const auto before = fx::memory::stats<fx::cuda>().allocations;
  fx::tensor<float, fx::cuda> dot = fx::reduce_sum(ga * gb, 1);
  CHECK(fx::memory::stats<fx::cuda>().allocations - before == 1);  // only the output
  same_on_both_devices(1e-5, [](const auto& a, const auto& b) { return fx::reduce_sum(a * b, 1); }, a, b);
  same_on_both_devices(1e-5, [](const auto& a, const auto& r) { return fx::reduce_mean(fx::exp(a - r), 0, fx::keepdims); },
                       a, row);
  same_on_both_devices([](const auto& a, const auto& b) { return fx::argmax(a * b, 0); }, a, b);
  CHECK(dot.shape() == fx::shape{40});
}

TEST_CASE("cuda reduce: bool operands count as int32, and comparisons reduce with all/any") {
  auto m = filled<bool>({9, 11}, 1);
  auto r = same_on_both_devices([](const auto& m) { return fx::reduce_sum(m, 1); }, m);
  static_assert(std::is_same_v<fx::value_type_t<decltype(r)>, std::int32_t>);
  same_on_both_devices([](const auto& m) { return fx::all(m, 0); }, m);
  same_on_both_devices([](const auto& m) { return fx::any(m, {0, 1}); }, m);
  same_on_both_devices([](const auto& m) { return fx::argmax(m, 1); }, m);
}

TEST_CASE("cuda reduce: empty tensors and empty axis lists") {
  SUBCASE("reducing an empty axis gives the identity, finalized") {
    auto e = filled<float>({0, 4}, 1);
    auto s = same_on_both_devices([](const auto& a) { return fx::reduce_sum(a, 0); }, e);
    CHECK(s.to_vector() == std::vector<float>(4, 0.f));
    auto p = same_on_both_devices([](const auto& a) { return fx::reduce_prod(a, 0); }, e);
    CHECK(p.to_vector() == std::vector<float>(4, 1.f));
    auto mx = same_on_both_devices([](const auto& a) { return fx::reduce_max(a, 0, fx::keepdims); }, e);
    CHECK(mx.shape() == fx::shape{1, 4});
    CHECK(mx.to_vector() == std::vector<float>(4, -std::numeric_limits<float>::infinity()));
    auto mean = same_on_both_devices([](const auto& a) { return fx::reduce_mean(a); }, e);
    CHECK(std::isnan(mean.item()));
    CHECK(same_on_both_devices([](const auto& a) { return fx::all(a > 0.f); }, e).item());
    CHECK_FALSE(same_on_both_devices([](const auto& a) { return fx::any(a > 0.f); }, e).item());
  }
  SUBCASE("keeping an empty axis gives an empty result") {
    auto r = same_on_both_devices([](const auto& a) { return fx::reduce_sum(a, 1); }, filled<float>({0, 4}, 2));
    CHECK(r.shape() == fx::shape{0});
    auto am = same_on_both_devices([](const auto& a) { return fx::argmax(a, 1); }, filled<float>({0, 4}, 3));
    CHECK(am.shape() == fx::shape{0});
  }
  SUBCASE("an empty axis list reduces nothing") {
    auto x = filled<float>({3, 4}, 4);
    auto r = same_on_both_devices([](const auto& a) { return fx::reduce_max(a, std::vector<int>{}); }, x);
    CHECK(r.to_vector() == x.to_vector());
  }
  SUBCASE("a rank-0 operand") {
    auto r = same_on_both_devices([](const auto& a) { return fx::reduce_sum(a); }, with_values<double>({}, {2.5}));
    CHECK(r.item() == 2.5);
  }
  SUBCASE("argmax over an empty axis throws on either device, naming the op") {
    auto g = fx::to<fx::cuda>(filled<float>({3, 0}, 5));
    CHECK_THROWS_WITH_AS(fx::argmax(g, 1), "argmax: axis 1 of shape (3, 0) is empty", fx::invalid_argument);
  }
}

TEST_CASE_TEMPLATE("cuda reduce: argmax and argmin over every axis", T, float, std::int32_t, std::int64_t) {
  auto x = filled<T>({5, 6, 7}, 1, -4, 4);  // integers in [-4, 4): many ties
  for (int axis : {0, 1, 2, -1}) {
    CAPTURE(axis);
    same_on_both_devices([axis](const auto& a) { return fx::argmax(a, axis); }, x);
    same_on_both_devices([axis](const auto& a) { return fx::argmin(a, axis); }, x);
  }
  auto flat = filled<T>({1001}, 2, -100, 100);
  same_on_both_devices([](const auto& a) { return fx::argmax(a); }, flat);
}

TEST_CASE("cuda reduce: argmax ties give the first index, and the first NaN wins") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = with_values<float>({4, 5}, {1, 3, 3, 0, 3,     //
                                       2, nan, 5, nan, 5,  //
                                       7, 7, 7, 7, 7,      //
                                       -1, -2, -2, -1, nan});
  auto mx = same_on_both_devices([](const auto& a) { return fx::argmax(a, 1); }, x);
  CHECK(mx.to_vector() == std::vector<std::int64_t>{1, 1, 0, 4});
  auto mn = same_on_both_devices([](const auto& a) { return fx::argmin(a, 1); }, x);
  CHECK(mn.to_vector() == std::vector<std::int64_t>{3, 1, 0, 4});
  auto cols = same_on_both_devices([](const auto& a) { return fx::argmax(a, 0); }, x);
  CHECK(cols.to_vector() == std::vector<std::int64_t>{2, 1, 2, 1, 3});
  // Long rows, so the parallel strategies (not only a sequential scan) meet the ties and NaNs.
  std::vector<float> v(3 * 4000, 1.f);
  v[2500] = 2.f, v[3000] = 2.f;                        // row 0: a tie at 2500 and 3000
  v[4000 + 3900] = nan, v[4000 + 100] = nan;           // row 1: NaNs at 100 and 3900
  v[8000 + 10] = 0.f, v[8000 + 3999] = 0.f;            // row 2: minimum tie at 10 and 3999
  auto long_rows = with_values<float>({3, 4000}, v);
  CHECK(same_on_both_devices([](const auto& a) { return fx::argmax(a, 1); }, long_rows).to_vector() ==
        std::vector<std::int64_t>{2500, 100, 0});
  CHECK(same_on_both_devices([](const auto& a) { return fx::argmin(a, 1); }, long_rows).to_vector() ==
        std::vector<std::int64_t>{0, 100, 10});
  auto one_row = with_values<float>({12000}, v);
  CHECK(same_on_both_devices([](const auto& a) { return fx::argmax(a); }, one_row).item() == 4100);
}

TEST_CASE("cuda reduce: column reductions give the same bits whichever threads take their parts") {
  // A bias gradient's shape: a sum over every axis but the last, in parts of parts (6 * 9 * 40 =
  // 2160 elements a column), read by part (neighbouring threads, neighbouring columns) or by column.
  const auto x = filled<float>({6, 9, 40, 7}, 11);
  const auto xd = fx::to<fx::cuda>(x);
  auto run = [&] {
    fx::tensor<float, fx::cuda> s = fx::reduce_sum(xd, {0, 1, 2});
    fx::tensor<float, fx::cuda> m = fx::reduce_max(xd * 2.f, {0, 1});
    fx::tensor<std::int64_t, fx::cuda> a = fx::argmax(xd, 0);
    return std::tuple{s.to_vector(), m.to_vector(), a.to_vector()};
  };
  const auto by_part = run();
  fluxion_test::check_values(std::get<0>(by_part), fx::tensor<float>(fx::reduce_sum(x, {0, 1, 2})).to_vector(), 1e-5);
  CHECK(std::get<1>(by_part) == fx::tensor<float>(fx::reduce_max(x * 2.f, {0, 1})).to_vector());
  CHECK(std::get<2>(by_part) == fx::tensor<std::int64_t>(fx::argmax(x, 0)).to_vector());
  fluxion_test::scoped_setting<bool> by_column(fx::detail::cuda_kernel::column_partials(), false);
  CHECK(run() == by_part);
}
