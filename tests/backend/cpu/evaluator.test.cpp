#include "../../test_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

// The CPU evaluator runs where(mask, x, y) (every kinked derivative: relu, abs, max, clip, as
// where(compare(a, b), x, y); a user's bool tensors; masks composed with &&, ||, !, is_nan and
// is_finite) and cast<T>(mask) with SIMD selects. These check it against a scalar loop: every
// comparison, NaN on either side, tails around the vector width, a broadcast bias (the relu backward
// of a dense or conv layer) and a strided (transposed) operand, which take the contiguous, flat and
// row paths.

namespace {

template <class T, class Cmp, class F>
void check_where(Cmp cmp, F ref, const std::string& name) {
  CAPTURE(name);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (fx::index_t n : {1, 7, 16, 17, 33, 100, 40000}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({n}, 3), b = test::random_tensor<T>({n}, 4), x = test::random_tensor<T>({n}, 5);
    a.mutable_data()[0] = nan;
    if (n > 2) b.mutable_data()[2] = nan;
    if (n > 3) b.mutable_data()[3] = a(3);  // equal operands
    fx::tensor<T> r = fx::where(cmp(a + b, b), x, T(0));
    for (fx::index_t i = 0; i < n; ++i) {
      const T s = a(i) + b(i);
      const T want = ref(s, b(i)) ? x(i) : T(0);
      CHECK_MESSAGE((r(i) == want || (std::isnan(r(i)) && std::isnan(want))), "element " << i);
    }
  }
}

}  // namespace

TEST_CASE_TEMPLATE("evaluator: where(compare(a, b), x, y) agrees with a scalar loop, NaN included", T, float, double) {
  check_where<T>([](const auto& a, const auto& b) { return a > b; }, [](T a, T b) { return a > b; }, "greater");
  check_where<T>([](const auto& a, const auto& b) { return a >= b; }, [](T a, T b) { return a >= b; }, "greater_equal");
  check_where<T>([](const auto& a, const auto& b) { return a < b; }, [](T a, T b) { return a < b; }, "less");
  check_where<T>([](const auto& a, const auto& b) { return a <= b; }, [](T a, T b) { return a <= b; }, "less_equal");
  check_where<T>([](const auto& a, const auto& b) { return a == b; }, [](T a, T b) { return a == b; }, "equal");
  check_where<T>([](const auto& a, const auto& b) { return a != b; }, [](T a, T b) { return a != b; }, "not_equal");
}

TEST_CASE_TEMPLATE("evaluator: where(mask, x, y) with a bool tensor mask agrees with a scalar loop: contiguous, "
                   "broadcast and strided masks, NaN in the branches",
                   T, float, double) {
  // The SIMD select on the mask's bytes (stop 85; until then such a statement took the scalar loop).
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (fx::index_t n : {1, 7, 16, 17, 33, 100, 40000}) {
    CAPTURE(n);
    auto x = test::random_tensor<T>({3, n}, 6), y = test::random_tensor<T>({3, n}, 7);
    x.mutable_data()[0] = nan;
    if (n > 2) y.mutable_data()[2] = nan;
    const fx::tensor<bool> mask = test::random_tensor<T>({3, n}, 8) > T(0);           // contiguous
    const fx::tensor<bool> column = test::random_tensor<T>({3, 1}, 9) > T(0);         // broadcast along rows
    const fx::tensor<bool> strided = fx::transpose(test::random_tensor<T>({n, 3}, 10) > T(0));
    const fx::tensor<T> a = fx::where(mask, x * T(2), y), b = fx::where(column, x, T(0) * y + T(1)),
                        c = fx::where(fx::transpose(strided), fx::transpose(x), T(2));
    for (fx::index_t r = 0; r < 3; ++r)
      for (fx::index_t i = 0; i < n; ++i) {
        const T want_a = mask(r, i) ? x(r, i) * T(2) : y(r, i), want_b = column(r, 0) ? x(r, i) : T(0) * y(r, i) + T(1),
                want_c = strided(r, i) ? x(r, i) : T(2);
        CHECK_MESSAGE((a(r, i) == want_a || (std::isnan(a(r, i)) && std::isnan(want_a))), "a " << r << ", " << i);
        CHECK_MESSAGE((b(r, i) == want_b || (std::isnan(b(r, i)) && std::isnan(want_b))), "b " << r << ", " << i);
        CHECK_MESSAGE((c(i, r) == want_c || (std::isnan(c(i, r)) && std::isnan(want_c))), "c " << r << ", " << i);
      }
  }
}

namespace evaluator_test {

/// Whether a statement's view takes the SIMD loop for T.
template <class T, class E>
constexpr bool simd_statement(const E& e) {
  return fx::detail::simd::enabled<decltype(e.make_view()), T>::value;
}

template <class T>
bool same_value(T got, T want) {
  return got == want || (std::isnan(got) && std::isnan(want));
}

}  // namespace evaluator_test

TEST_CASE_TEMPLATE("evaluator: composed masks (and, or, not, is_nan, is_finite, bool tensors) and casts of masks take "
                   "the SIMD loop and agree with a scalar loop",
                   T, float, double) {
  // Stop 86: until then any of these sent the whole statement to the scalar loop, which branches
  // on each mask value (10-14x slower on a random mask).
  using evaluator_test::same_value;
  using evaluator_test::simd_statement;
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (fx::index_t n : {1, 7, 16, 17, 33, 100, 40000}) {
    CAPTURE(n);
    auto x = test::random_tensor<T>({2, n}, 11), y = test::random_tensor<T>({2, n}, 12);
    x.mutable_data()[0] = nan;
    if (n > 1) x.mutable_data()[1] = inf;
    if (n > 2) y.mutable_data()[2] = -inf;
    if (n > 3) y.mutable_data()[3] = nan;
    const fx::tensor<bool> m = test::random_tensor<T>({2, n}, 13) > T(0);
    const fx::tensor<bool> strided = fx::transpose(test::random_tensor<T>({n, 2}, 14) > T(0));
    const fx::tensor<bool> column = test::random_tensor<T>({2, 1}, 15) > T(0);

    const auto both = fx::where((x > T(0)) && (y > T(0)), x, y);
    const auto either = fx::where((x > T(0)) || !(y <= T(0.5)), x * y, T(3));
    const auto masked = fx::where((m && !fx::is_nan(y) && column) || false, y, T(0));  // a bool scalar too
    const auto finite = fx::where(fx::is_finite(x * T(2)), x, T(-7));
    const auto counted = fx::cast<T>(x > y) * T(2) + fx::cast<T>(strided) + fx::cast<T>(x);
    static_assert(simd_statement<T>(both) && simd_statement<T>(either) && simd_statement<T>(masked) &&
                  simd_statement<T>(finite) && simd_statement<T>(counted));
    const fx::tensor<T> r_both = both, r_either = either, r_masked = masked, r_finite = finite, r_counted = counted;
    const fx::tensor<T> sum = fx::reduce_sum(fx::cast<T>(fx::is_nan(x) || (x < y)), 1);
    for (fx::index_t r = 0; r < 2; ++r) {
      T want_sum = 0;
      for (fx::index_t i = 0; i < n; ++i) {
        const T a = x(r, i), b = y(r, i);
        CHECK_MESSAGE(same_value(r_both(r, i), (a > T(0) && b > T(0)) ? a : b), "both " << r << ", " << i);
        CHECK_MESSAGE(same_value(r_either(r, i), (a > T(0) || !(b <= T(0.5))) ? a * b : T(3)), "either " << r << ", " << i);
        CHECK_MESSAGE(same_value(r_masked(r, i), (m(r, i) && !std::isnan(b) && column(r, 0)) ? b : T(0)),
                      "masked " << r << ", " << i);
        CHECK_MESSAGE(same_value(r_finite(r, i), std::isfinite(a * T(2)) ? a : T(-7)), "finite " << r << ", " << i);
        CHECK_MESSAGE(same_value(r_counted(r, i), T(a > b) * T(2) + T(strided(r, i)) + a), "counted " << r << ", " << i);
        want_sum += T(std::isnan(a) || a < b);
      }
      CHECK(sum(r) == want_sum);
    }
  }
}

TEST_CASE_TEMPLATE("evaluator: relu's backward with a broadcast bias and a strided gradient", T, float, double) {
  // (batch, rows, cols, channels) + (channels): the pattern of a conv layer's relu backward.
  for (fx::index_t c : {3, 16, 32, 37}) {
    CAPTURE(c);
    const fx::shape s{4, 5, 6, c};
    auto z = test::random_tensor<T>(s, 7), bias = test::random_tensor<T>({c}, 8), dy = test::random_tensor<T>(s, 9);
    fx::tensor<T> r = fx::where(z + bias > T(0), dy, T(0));
    for (fx::index_t i = 0; i < s.size(); ++i) {
      const T want = z.data()[i] + bias(i % c) > T(0) ? dy.data()[i] : T(0);
      CHECK(r.data()[i] == want);
    }
    // A transposed operand: not contiguous, so the row path gathers it.
    auto m = test::random_tensor<T>({c, 9}, 10), g = test::random_tensor<T>({9, c}, 11);
    fx::tensor<T> mt = fx::where(fx::transpose(m) > g, g, fx::transpose(m));
    for (fx::index_t i = 0; i < 9; ++i)
      for (fx::index_t j = 0; j < c; ++j) CHECK(mt(i, j) == (m(j, i) > g(i, j) ? g(i, j) : m(j, i)));
  }
}

namespace evaluator_test {

/// The sequential combination of each row of `values` (rows of n), from the identity, in order.
template <class T, class F>
std::vector<T> rows_in_order(const std::vector<T>& values, fx::index_t n, T identity, F combine) {
  std::vector<T> out;
  for (std::size_t r = 0; r * static_cast<std::size_t>(n) < values.size(); ++r) {
    T acc = identity;
    for (fx::index_t j = 0; j < n; ++j) acc = combine(acc, values[r * static_cast<std::size_t>(n) + static_cast<std::size_t>(j)]);
    out.push_back(acc);
  }
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) return false;
  return true;
}

}  // namespace evaluator_test

TEST_CASE_TEMPLATE("evaluator: reductions over short innermost rows (classes) combine each row in order: bitwise a "
                   "sequential loop, NaN included, for any thread count",
                   T, float, double) {
  // Stop 86: rows shorter than four vectors take W rows at a time in the lanes of a batch.
  using evaluator_test::rows_in_order;
  using evaluator_test::same_bits;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T lowest = -std::numeric_limits<T>::infinity(), highest = std::numeric_limits<T>::infinity();
  auto add = [](T a, T b) { return a + b; };
  auto mul = [](T a, T b) { return a * b; };
  auto max = [](T a, T b) { return (a > b || a != a) ? a : b; };
  auto min = [](T a, T b) { return (a < b || a != a) ? a : b; };
  const int saved = fx::get_num_threads();
  // Rows from 4 vectors up are folded by vectors first (a different order: the test case below).
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  for (fx::index_t c : {1, 3, 7, 10, 16, 17, 31, 33, 63}) {
    if (c >= 4 * W) continue;
    for (fx::index_t n : {1, 5, 16, 37, 300}) {
      CAPTURE(c);
      CAPTURE(n);
      auto x = test::random_tensor<T>({n, c}, 31);
      if (n * c > 5) x.mutable_data()[5] = nan;
      const auto xs = x.to_vector();
      for (int threads : {1, 2}) {
        fx::set_num_threads(threads);
        CHECK(same_bits(fx::tensor<T>(fx::reduce_sum(x, -1)).to_vector(), rows_in_order(xs, c, T(0), add)));
        CHECK(same_bits(fx::tensor<T>(fx::reduce_prod(x, -1)).to_vector(), rows_in_order(xs, c, T(1), mul)));
        CHECK(same_bits(fx::tensor<T>(fx::reduce_max(x, -1)).to_vector(), rows_in_order(xs, c, lowest, max)));
        CHECK(same_bits(fx::tensor<T>(fx::reduce_min(x, -1, true)).to_vector(), rows_in_order(xs, c, highest, min)));
        auto mean = rows_in_order(xs, c, T(0), add);
        for (auto& v : mean) v /= static_cast<T>(c);
        CHECK(same_bits(fx::tensor<T>(fx::reduce_mean(x, -1)).to_vector(), mean));
        // An expression (its values computed with SIMD or scalar ops, which may differ in the last
        // bit: within a tolerance), a transposed tensor (filled through its strides) and two
        // innermost axes (bitwise): against the same loop over the materialized values.
        const auto e_max = fx::tensor<T>(fx::reduce_max(fx::exp(x) * T(0.5) + T(1), -1)).to_vector();
        const auto e_want = rows_in_order(fx::tensor<T>(fx::exp(x) * T(0.5) + T(1)).to_vector(), c, lowest, max);
        REQUIRE(e_max.size() == e_want.size());
        for (std::size_t i = 0; i < e_max.size(); ++i)
          CHECK((e_max[i] == doctest::Approx(e_want[i]).epsilon(1e-6) || (std::isnan(e_max[i]) && std::isnan(e_want[i]))));
        const fx::tensor<T> xt = fx::transpose(test::random_tensor<T>({c, n}, 32));
        CHECK(same_bits(fx::tensor<T>(fx::reduce_sum(xt, -1)).to_vector(),
                        rows_in_order(fx::tensor<T>(xt + T(0)).to_vector(), c, T(0), add)));
        const fx::tensor<T> x3 = fx::reshape(x, {n, 1, c});
        CHECK(same_bits(fx::tensor<T>(fx::reduce_max(x3, {1, 2})).to_vector(), rows_in_order(xs, c, lowest, max)));
      }
      fx::set_num_threads(saved);
    }
  }
}

TEST_CASE_TEMPLATE("evaluator: reductions over every axis but the last (per-channel statistics) against a naive loop", T,
                   float, double) {
  // (batch, h, w, c) with c at, below and above the vector width; enough rows for several chunks.
  for (fx::index_t c : {8, 16, 17, 37, 64}) {
    CAPTURE(c);
    const fx::shape s{6, 9, 10, c};
    auto x = test::random_tensor<T>(s, 21), m = test::random_tensor<T>({c}, 22);
    const fx::index_t rows = s.size() / c;
    fx::tensor<T> sum = fx::reduce_sum(fx::square(x - m), {0, 1, 2});
    fx::tensor<T> mean = fx::reduce_mean(x * m, {0, 1, 2});
    fx::tensor<T> mx = fx::reduce_max(x + m, {0, 1, 2});
    fx::tensor<T> mn = fx::reduce_min(x - m, {0, 1, 2}, /*keepdims=*/true);
    CHECK(mn.shape() == fx::shape{1, 1, 1, c});
    for (fx::index_t j = 0; j < c; ++j) {
      double ws = 0, wm = 0, wmax = -1e300, wmin = 1e300;
      for (fx::index_t r = 0; r < rows; ++r) {
        const double v = x.data()[r * c + j], b = m(j);
        ws += (v - b) * (v - b);
        wm += v * b;
        wmax = std::max(wmax, v + b);
        wmin = std::min(wmin, v - b);
      }
      CHECK(sum(j) == doctest::Approx(ws).epsilon(1e-5));
      CHECK(mean(j) == doctest::Approx(wm / static_cast<double>(rows)).epsilon(1e-5).scale(1));
      CHECK(mx(j) == static_cast<T>(static_cast<T>(wmax)));
      CHECK(mn.data()[j] == static_cast<T>(wmin));
    }
  }
}

TEST_CASE("evaluator: per-channel reductions propagate NaN and do not depend on the thread count") {
  const fx::shape s{64, 14, 14, 32};
  auto x = test::random_tensor<float>(s, 31), m = test::random_tensor<float>({32}, 32);
  x.mutable_data()[5 * 32 + 3] = std::numeric_limits<float>::quiet_NaN();
  const int saved = fx::get_num_threads();
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    fx::set_num_threads(threads);
    fx::tensor<float> v = fx::reduce_mean(fx::square(x - m), {0, 1, 2});
    fx::tensor<float> mx = fx::reduce_max(x * m, {0, 1, 2});
    CHECK(std::isnan(v(3)));
    CHECK(std::isnan(mx(3)));
    CHECK_FALSE(std::isnan(v(4)));
    auto r = v.to_vector();
    const auto rm = mx.to_vector();
    r.insert(r.end(), rm.begin(), rm.end());
    results.push_back(r);
  }
  fx::set_num_threads(saved);
  auto bits = [](const std::vector<float>& v) {
    std::vector<std::uint32_t> b(v.size());
    std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
    return b;
  };
  CHECK(bits(results[0]) == bits(results[1]));
  CHECK(bits(results[0]) == bits(results[2]));
}

TEST_CASE_TEMPLATE("evaluator: maximum, minimum and reduce_max propagate NaN in the SIMD paths too", T, float, double) {
  // xsimd's != is an ordered comparison (false on NaN), so `a != a` does not detect NaN in a batch.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (fx::index_t n : {16, 40, 1000}) {
    CAPTURE(n);
    auto a = test::random_tensor<T>({n}, 41), b = test::random_tensor<T>({n}, 42);
    a.mutable_data()[1] = nan;
    b.mutable_data()[2] = nan;
    fx::tensor<T> mx = fx::maximum(a, b), mn = fx::minimum(a, b);
    for (fx::index_t i : {1, 2}) {
      CHECK(std::isnan(mx(i)));
      CHECK(std::isnan(mn(i)));
    }
    CHECK(mx(3) == std::max(a(3), b(3)));
    CHECK(std::isnan(fx::tensor<T>(fx::reduce_max(a * T(2))).item()));
    CHECK(std::isnan(fx::tensor<T>(fx::reduce_min(b + T(1))).item()));
  }
}

TEST_CASE_TEMPLATE("evaluator: a reduction over a middle axis reads a contiguous tensor in place, and a sliced one "
                   "through the buffer, as a naive loop", T, float, double) {
  // (outer, rows, cols): group_norm's per-channel means over the positions. A contiguous tensor is
  // read in place (no copy into the fill buffer); a slice of one goes through the buffer.
  for (fx::index_t cols : {8, 16, 37, 128}) {
    CAPTURE(cols);
    const fx::index_t outer = 5, rows = 300;
    auto whole = test::random_tensor<T>({outer, rows + 2, cols}, 41);
    const fx::tensor<T> values(fx::slice(whole, {0, 1, 0}, {outer, rows, cols}));  // contiguous
    auto check = [&](const fx::tensor<T>& sum, const fx::tensor<T>& mx) {
      REQUIRE(mx.shape() == fx::shape{outer, 1, cols});
      for (fx::index_t o = 0; o < outer; ++o)
        for (fx::index_t c = 0; c < cols; ++c) {
          double want = 0, want_max = -1e300;
          for (fx::index_t r = 0; r < rows; ++r) {
            const double v = values(o, r, c);
            want += v;
            want_max = std::max(want_max, v);
          }
          CHECK(sum(o, c) == doctest::Approx(want).epsilon(1e-5));
          CHECK(mx(o, 0, c) == static_cast<T>(want_max));
        }
    };
    check(fx::reduce_sum(values, {1}), fx::reduce_max(values, {1}, /*keepdims=*/true));
    const auto sliced = fx::slice(whole, {0, 1, 0}, {outer, rows, cols});  // strided: through the buffer
    check(fx::reduce_sum(sliced, {1}), fx::reduce_max(sliced, {1}, /*keepdims=*/true));
  }
}

TEST_CASE("evaluator: statements over short broadcast rows (the row odometer across tasks) as a naive loop") {
  // Rows of 1-16 values over several tasks (32768 values each), so that tasks start inside a row;
  // a per-(batch, channel) operand broadcast over the positions, as a normalization's scale.
  for (fx::index_t c : {1, 3, 4, 16}) {
    CAPTURE(c);
    const fx::index_t batch = 7, positions = 12289;
    auto x = test::random_tensor<float>({batch, positions, c}, 51);
    auto scale = test::random_tensor<float>({batch, 1, c}, 52);
    auto shift = test::random_tensor<float>({c}, 53);
    const fx::tensor<float> y = x * scale + shift;
    const fx::tensor<float> v = fx::reduce_sum(fx::square(x - scale), {1});
    for (fx::index_t b = 0; b < batch; ++b)
      for (fx::index_t j = 0; j < c; ++j) {
        double want_v = 0;
        for (fx::index_t p = 0; p < positions; ++p) {
          const float want = x(b, p, j) * scale(b, 0, j) + shift(j);
          if (y(b, p, j) != doctest::Approx(want).epsilon(1e-6)) {
            FAIL_CHECK("y(" << b << ", " << p << ", " << j << ") = " << y(b, p, j) << ", want " << want);
            return;
          }
          const double d = static_cast<double>(x(b, p, j)) - scale(b, 0, j);
          want_v += d * d;
        }
        CHECK(v(b, j) == doctest::Approx(want_v).epsilon(1e-4));
      }
  }
}

TEST_CASE_TEMPLATE("evaluator: statements over short rows run flat in lanes: per-row, per-column, transposed, reversed "
                   "and bool operands as a naive loop, for any thread count",
                   T, float, double) {
  // Stop 87: a rank-2 statement with rows under two vectors walks its elements flat, each leaf
  // read at every lane's (row, column): a load, a broadcast or a gather; longer rows keep the row
  // path. Rows of 2 to 4W values, tails, tasks that start inside a row (n * c over 32768), and a
  // destination that is not row-major (concat's), which keeps the row path.
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  const int saved = fx::get_num_threads();
  const T tol = std::is_same_v<T, float> ? T(1e-6) : T(1e-14);
  for (fx::index_t c : std::initializer_list<fx::index_t>{2, 3, 7, 10, W - 1, W, W + 1, 2 * W + 3, 4 * W - 1, 4 * W}) {
    for (fx::index_t n : {1, 5, 37, 5000}) {
      CAPTURE(c);
      CAPTURE(n);
      auto x = test::random_tensor<T>({n, c}, 61), m = test::random_tensor<T>({n, 1}, 62);
      auto bias = test::random_tensor<T>({c}, 63);
      const fx::tensor<T> xt = fx::transpose(test::random_tensor<T>({c, n}, 64));
      const fx::tensor<bool> keep = test::random_tensor<T>({n, c}, 65) > T(0);
      const fx::tensor<bool> row_keep = test::random_tensor<T>({n, 1}, 66) > T(0);
      std::vector<T> first[3];
      for (int threads : {1, 2}) {
        fx::set_num_threads(threads);
        const fx::tensor<T> e = fx::exp(x - m);
        const fx::tensor<T> w = fx::where(keep && x > bias, x * m, xt);
        const fx::tensor<T> r = fx::where(row_keep, x, bias) + fx::reverse(x, 1) * T(2);
        const fx::tensor<T> joined = fx::concat({fx::tensor<T>(x * m), fx::tensor<T>(bias + m)}, 1);
        for (fx::index_t i = 0; i < n; ++i)
          for (fx::index_t j = 0; j < c; ++j) {
            const T want_e = std::exp(x(i, j) - m(i, 0));
            const T want_w = (keep(i, j) && x(i, j) > bias(j)) ? x(i, j) * m(i, 0) : xt(i, j);
            const T want_r = (row_keep(i, 0) ? x(i, j) : bias(j)) + x(i, c - 1 - j) * T(2);
            if (std::abs(e(i, j) - want_e) > tol * want_e || w(i, j) != want_w || r(i, j) != want_r ||
                joined(i, j) != x(i, j) * m(i, 0) || joined(i, c + j) != bias(j) + m(i, 0)) {
              FAIL_CHECK("at (" << i << ", " << j << "): exp " << e(i, j) << " want " << want_e << ", where " << w(i, j)
                                << " want " << want_w << ", reverse " << r(i, j) << " want " << want_r);
              fx::set_num_threads(saved);
              return;
            }
          }
        // The same values as a reduction's operand (its fill), and the same bits for any thread count.
        const fx::tensor<T> sums = fx::reduce_sum(fx::exp(x - m), -1), maxes = fx::reduce_max(x * m + bias, -1);
        for (fx::index_t i = 0; i < n; ++i) {
          T want_sum = 0, want_max = -std::numeric_limits<T>::infinity();
          for (fx::index_t j = 0; j < c; ++j) {
            want_sum += std::exp(x(i, j) - m(i, 0));
            want_max = std::max(want_max, x(i, j) * m(i, 0) + bias(j));
          }
          CHECK(sums(i) == doctest::Approx(want_sum).epsilon(1e-5));
          CHECK(maxes(i) == doctest::Approx(want_max).epsilon(tol));  // the compiler may fuse x * m + b
        }
        const std::vector<T> got[3] = {e.to_vector(), w.to_vector(), sums.to_vector()};
        for (int k = 0; k < 3; ++k) {
          if (threads == 1) first[k] = got[k];
          else CHECK(evaluator_test::same_bits(got[k], first[k]));
        }
      }
      fx::set_num_threads(saved);
    }
  }
}

TEST_CASE_TEMPLATE("evaluator: integer compares (one_hot, labels against labels) take the SIMD loop and agree with a "
                   "naive loop",
                   T, float, double) {
  // Stop 87: int32 with float and int64 with double compare in the lanes of T's mask; an integer
  // of the other width keeps the scalar loop. Labels outside [0, classes) give a row of zeros.
  using I = std::conditional_t<std::is_same_v<T, float>, std::int32_t, std::int64_t>;
  using fx::detail::leaf_view;
  using fx::detail::iota_view;
  static_assert(fx::detail::simd::mask<fx::detail::binary_view<fx::ops::equal, leaf_view<I>, iota_view<I>>, T>::value);
  static_assert(!fx::detail::simd::mask<fx::detail::binary_view<fx::ops::equal, leaf_view<std::int16_t>,
                                                                iota_view<std::int16_t>>, T>::value);
  static_assert(!fx::detail::simd::mask<fx::detail::binary_view<fx::ops::less, leaf_view<std::uint32_t>,
                                                                leaf_view<std::uint32_t>>, float>::value);
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  for (fx::index_t c : std::initializer_list<fx::index_t>{1, 3, 10, W, W + 3, 4 * W + 1, 100}) {
    for (fx::index_t n : {1, 7, 3000}) {
      CAPTURE(c);
      CAPTURE(n);
      std::vector<I> raw(static_cast<std::size_t>(n)), other(static_cast<std::size_t>(n));
      for (fx::index_t i = 0; i < n; ++i) {
        raw[static_cast<std::size_t>(i)] = static_cast<I>((i * 7 + 3) % (c + 2)) - 1;  // -1 and c: out of range
        other[static_cast<std::size_t>(i)] = static_cast<I>((i * 5) % (c + 2)) - 1;
      }
      fx::tensor<I> labels(fx::shape{n}), others(fx::shape{n});
      std::copy(raw.begin(), raw.end(), labels.mutable_data());
      std::copy(other.begin(), other.end(), others.mutable_data());
      auto x = test::random_tensor<T>({n, c}, 71);
      const fx::tensor<T> hot = fx::one_hot<T>(labels, c);
      const fx::tensor<T> hot_first = fx::one_hot<T>(labels, c, T(2), T(-1), 0);  // (c, n): the new axis first
      const fx::tensor<T> picked = fx::where(fx::expand_dims(labels, -1) == fx::iota_expr<I, fx::cpu>{{}, {n, c}, 1}, x, T(0));
      const fx::tensor<T> same = fx::where(labels < others, fx::reduce_sum(x, -1), T(-1));
      const fx::tensor<T> sums = fx::reduce_sum(fx::one_hot<T>(labels, c) * x, -1);
      for (fx::index_t i = 0; i < n; ++i) {
        const I l = raw[static_cast<std::size_t>(i)];
        T want_sum = 0;
        for (fx::index_t j = 0; j < c; ++j) {
          const bool on = l == j;
          if (hot(i, j) != (on ? T(1) : T(0)) || hot_first(j, i) != (on ? T(2) : T(-1)) || picked(i, j) != (on ? x(i, j) : T(0))) {
            FAIL_CHECK("at (" << i << ", " << j << "), label " << l << ": one_hot " << hot(i, j) << ", axis 0 "
                              << hot_first(j, i) << ", picked " << picked(i, j));
            return;
          }
          want_sum += on ? x(i, j) : T(0);
        }
        CHECK(sums(i) == doctest::Approx(want_sum));
        CHECK(same(i) == (l < other[static_cast<std::size_t>(i)] ? doctest::Approx(fx::tensor<T>(fx::reduce_sum(x, -1))(i)) : doctest::Approx(-1)));
      }
    }
  }
}

TEST_CASE_TEMPLATE("evaluator: spread_rows puts p[rows[k]] in lane k for every row count, as a naive loop", T, float, double) {
  // Stop 88: a per-row operand along rows shorter than a vector is a masked load of the rows the
  // lanes span and a permute (AVX-512, AVX2), else a gather. Rows are non-decreasing, as a cursor's.
  using I = fx::detail::simd::lane_index<T>;
  using E = fx::detail::simd::lane_int<T>;
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  std::vector<T> values(static_cast<std::size_t>(W));
  for (fx::index_t i = 0; i < W; ++i) values[static_cast<std::size_t>(i)] = T(10) + static_cast<T>(i) / T(4);
  int checked = 0, wrong = 0;
  for (fx::index_t n = 1; n <= W; ++n) {
    for (fx::index_t cols = 1; cols <= W; ++cols) {  // lanes k at row (first + k) / cols, n rows
      for (fx::index_t first = 0; first < cols; ++first) {
        alignas(64) E rows[W];
        for (fx::index_t k = 0; k < W; ++k) rows[k] = static_cast<E>(std::min((first + k) / cols, n - 1));
        const fx::index_t used = rows[W - 1] + 1;
        alignas(64) T got[W];
        fx::detail::simd::spread_rows(values.data(), I::load_aligned(rows), used).store_aligned(got);
        for (fx::index_t k = 0; k < W; ++k, ++checked)
          if (got[k] != values[static_cast<std::size_t>(rows[k])] && wrong++ == 0)
            FAIL_CHECK("n " << n << ", cols " << cols << ", first " << first << ": lane " << k << " is " << got[k]
                            << ", not p[" << rows[k] << "] = " << values[static_cast<std::size_t>(rows[k])]);
      }
    }
  }
  CHECK(wrong == 0);
  CHECK(checked == W * W * W * (W + 1) / 2);
}

TEST_CASE_TEMPLATE("evaluator: reduce_max and reduce_min over rows of 2 to 16 vectors (each row folded into a vector "
                   "first) as a naive loop, NaN and infinities included",
                   T, float, double) {
  // Stop 88: max and min over rows of two vectors or more fold each row into one vector, the last
  // vector overlapping the one before it, before a row per lane.
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  const int saved = fx::get_num_threads();
  int rows_checked = 0;
  for (fx::index_t c : {2 * W, 2 * W + 1, 3 * W - 1, 4 * W, 5 * W + 3, 16 * W - 1}) {
    for (fx::index_t n : std::initializer_list<fx::index_t>{std::max<fx::index_t>(W, 5), 3 * W + 2, 200}) {  // rows 0-4 set below
      CAPTURE(c);
      CAPTURE(n);
      auto x = test::random_tensor<T>({n, c}, 91);
      T* d = x.mutable_data();
      d[0 * c + c - 1] = nan;          // row 0: NaN in the overlapped last vector
      d[1 * c + 0] = nan;              // row 1: NaN first
      for (fx::index_t j = 0; j < c; ++j) d[2 * c + j] = -inf;  // row 2: all -inf
      d[3 * c + c / 2] = inf;          // row 3: +inf inside
      d[4 * c + c - 1] = T(9);         // row 4: the maximum last, the minimum first
      d[4 * c] = T(-9);
      for (int threads : {1, 2}) {
        fx::set_num_threads(threads);
        const fx::tensor<T> mx = fx::reduce_max(x, -1), mn = fx::reduce_min(x, -1);
        for (fx::index_t i = 0; i < n; ++i, ++rows_checked) {
          T want_max = -inf, want_min = inf;
          bool has_nan = false;
          for (fx::index_t j = 0; j < c; ++j) {
            const T v = d[i * c + j];
            has_nan = has_nan || std::isnan(v);
            want_max = std::max(want_max, v);
            want_min = std::min(want_min, v);
          }
          if (has_nan) {
            CHECK(std::isnan(mx(i)));
            CHECK(std::isnan(mn(i)));
          } else {
            CHECK(mx(i) == want_max);
            CHECK(mn(i) == want_min);
          }
        }
      }
      fx::set_num_threads(saved);
    }
  }
  CHECK(rows_checked > 0);
}

TEST_CASE_TEMPLATE("evaluator: sums, means and products over rows of 4 to 16 vectors fold each row by vectors, in one "
                   "order for any batch and thread count: bitwise a naive loop in that order, near a double sum",
                   T, float, double) {
  // Stop 89: from four vectors, lane m of a row's fold combines x[m], x[W + m], ... of its whole
  // vectors; then the lanes in order from the identity, then the values after the last whole
  // vector. Batches of fewer rows than a vector take the same order (the rows after the last W).
  constexpr fx::index_t W = static_cast<fx::index_t>(fx::detail::simd::batch<T>::size);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto folded = [](const T* row, fx::index_t c, T identity, auto combine) {
    std::vector<T> lane(static_cast<std::size_t>(W));
    for (fx::index_t m = 0; m < W; ++m) lane[static_cast<std::size_t>(m)] = row[m];
    fx::index_t j = W;
    for (; j + W <= c; j += W)
      for (fx::index_t m = 0; m < W; ++m) lane[static_cast<std::size_t>(m)] = combine(lane[static_cast<std::size_t>(m)], row[j + m]);
    T acc = identity;
    for (fx::index_t m = 0; m < W; ++m) acc = combine(acc, lane[static_cast<std::size_t>(m)]);
    for (; j < c; ++j) acc = combine(acc, row[j]);
    return acc;
  };
  auto add = [](T a, T b) { return a + b; };
  auto mul = [](T a, T b) { return a * b; };
  const int saved = fx::get_num_threads();
  int rows_checked = 0;
  for (fx::index_t c : {4 * W, 4 * W + 1, 5 * W - 1, 7 * W + 3, 16 * W - 1}) {
    for (fx::index_t n : std::initializer_list<fx::index_t>{1, 3, W - 1, W + 2, 130}) {
      CAPTURE(c);
      CAPTURE(n);
      auto x = test::random_tensor<T>({n, c}, 93);
      T* d = x.mutable_data();
      if (n > 2) d[2 * c + c - 1] = nan;  // row 2: NaN after the last whole vector (or in it)
      // Products of values near 1, so that they stay finite and their bits mean something.
      const fx::tensor<T> near_one = x * T(0.01) + T(1);
      const auto p = near_one.to_vector();
      for (int threads : {1, 2}) {
        fx::set_num_threads(threads);
        const fx::tensor<T> sum = fx::reduce_sum(x, -1), mean = fx::reduce_mean(x, {1}), prod = fx::reduce_prod(near_one, -1);
        // An expression (filled with SIMD) and a transposed tensor (filled through its strides).
        const fx::tensor<T> e_sum = fx::reduce_sum(fx::exp(x * T(0.5)) - T(1), -1);
        const fx::tensor<T> e_values = fx::exp(x * T(0.5)) - T(1);
        const fx::tensor<T> xt = fx::transpose(fx::tensor<T>(fx::transpose(x) + T(0)));
        const fx::tensor<T> t_sum = fx::reduce_sum(xt, -1);
        for (fx::index_t i = 0; i < n; ++i, ++rows_checked) {
          CAPTURE(i);
          const T want = folded(d + i * c, c, T(0), add);
          if (std::isnan(want)) {
            CHECK(std::isnan(sum(i)));
            CHECK(std::isnan(t_sum(i)));
            continue;
          }
          CHECK(sum(i) == want);
          CHECK(t_sum(i) == want);
          CHECK(mean(i) == want / static_cast<T>(c));
          CHECK(prod(i) == folded(p.data() + i * c, c, T(1), mul));
          // SIMD and scalar exp may differ in the last bit: within a tolerance.
          CHECK(e_sum(i) == doctest::Approx(folded(e_values.data() + i * c, c, T(0), add)).epsilon(1e-5));
          long double exact = 0, magnitude = 0;
          for (fx::index_t j = 0; j < c; ++j) exact += d[i * c + j], magnitude += std::abs(d[i * c + j]);
          CHECK(std::abs(static_cast<long double>(sum(i)) - exact) <=
                static_cast<long double>(c) * std::numeric_limits<T>::epsilon() * magnitude);
        }
      }
      fx::set_num_threads(saved);
    }
  }
  CHECK(rows_checked > 0);
}
