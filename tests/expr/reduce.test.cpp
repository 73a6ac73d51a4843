#include "../test_util.hpp"

#include <functional>

namespace {

// Naive reduction over the axes in `mask` with a fold function, in double.
std::vector<double> naive_reduce(const std::vector<double>& x, const fx::shape& s, unsigned mask,
                                 std::function<double(double, double)> f, double init) {
  fx::shape out;
  for (int d = 0; d < s.rank(); ++d)
    if (!(mask >> d & 1u)) out.push_back(s[d]);
  std::vector<double> r(static_cast<std::size_t>(out.size()), init);
  for (fx::index_t i = 0; i < s.size(); ++i) {
    auto c = test::unravel(i, s);
    fx::index_t o = 0;
    for (int d = 0; d < s.rank(); ++d)
      if (!(mask >> d & 1u)) o = o * s[d] + c[static_cast<std::size_t>(d)];
    r[static_cast<std::size_t>(o)] = f(r[static_cast<std::size_t>(o)], x[static_cast<std::size_t>(i)]);
  }
  return r;
}

std::vector<int> axes_of(unsigned mask, int rank) {
  std::vector<int> a;
  for (int d = 0; d < rank; ++d)
    if (mask >> d & 1u) a.push_back(d);
  return a;
}

}  // namespace

TEST_CASE_TEMPLATE("reduce: every reduction over every axis set matches a naive loop", T, float, double) {
  for (const fx::shape& s : {fx::shape{7}, fx::shape{3, 5}, fx::shape{2, 3, 4}, fx::shape{4, 1, 33}, fx::shape{2, 0, 3}}) {
    auto x = test::random_tensor<T>(s, 3, 0.5, 1.5);
    std::vector<double> xd;
    for (T v : x.to_vector()) xd.push_back(v);
    for (unsigned mask = 0; mask < (1u << s.rank()); ++mask) {
      CAPTURE(fx::to_string(s));
      CAPTURE(mask);
      const auto ax = axes_of(mask, s.rank());
      const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
      auto sum = naive_reduce(xd, s, mask, std::plus<>(), 0.0);
      test::check_close(fx::tensor<T>(fx::reduce_sum(x, ax)).to_vector(), std::vector<T>(sum.begin(), sum.end()), tol);
      auto prod = naive_reduce(xd, s, mask, std::multiplies<>(), 1.0);
      test::check_close(fx::tensor<T>(fx::reduce_prod(x, ax)).to_vector(), std::vector<T>(prod.begin(), prod.end()), tol);
      auto mx = naive_reduce(xd, s, mask, [](double a, double b) { return std::max(a, b); }, -INFINITY);
      test::check_close(fx::tensor<T>(fx::reduce_max(x, ax)).to_vector(), std::vector<T>(mx.begin(), mx.end()));
      auto mn = naive_reduce(xd, s, mask, [](double a, double b) { return std::min(a, b); }, INFINITY);
      test::check_close(fx::tensor<T>(fx::reduce_min(x, ax)).to_vector(), std::vector<T>(mn.begin(), mn.end()));
      fx::index_t n = 1;
      for (int a : ax) n *= s[a];
      std::vector<T> mean;
      for (double v : sum) mean.push_back(static_cast<T>(v / static_cast<double>(n)));
      test::check_close(fx::tensor<T>(fx::reduce_mean(x, ax)).to_vector(), mean, tol);
      auto lse = naive_reduce(xd, s, mask, [](double a, double b) { return a + std::exp(b); }, 0.0);
      std::vector<T> lsev;
      for (double v : lse) lsev.push_back(static_cast<T>(std::log(v)));
      test::check_close(fx::tensor<T>(fx::reduce_logsumexp(x, ax)).to_vector(), lsev, tol);
    }
  }
}

TEST_CASE("reduce: keepdims, negative axes, default = all axes") {
  fx::tensor<float> x = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  fx::tensor<float> k = fx::reduce_sum(x, -1, fx::keepdims);
  CHECK(k.shape() == fx::shape{2, 1});
  CHECK(k.to_vector() == std::vector<float>{6, 15});
  fx::tensor<float> all = fx::reduce_sum(x);
  CHECK(all.shape() == fx::shape{});
  CHECK(all.item() == 21.f);
  fx::tensor<float> all_keep = fx::reduce_max(x, {}, fx::keepdims);
  CHECK(all_keep.shape() == fx::shape{1, 1});
  CHECK(all_keep.item() == 6.f);
}

TEST_CASE("reduce: reductions consume expressions without materializing them") {
  auto a = test::random_tensor<float>({1000}, 1), b = test::random_tensor<float>({1000}, 2);
  const auto before = fx::memory::stats().allocations;
  fx::tensor<float> dot = fx::reduce_sum(a * b);
  CHECK(fx::memory::stats().allocations - before == 1);  // the output only
  double want = 0;
  const auto av = a.to_vector(), bv = b.to_vector();
  for (std::size_t i = 0; i < av.size(); ++i) want += double(av[i]) * bv[i];
  CHECK(dot.item() == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE("reduce: all, any, argmax, argmin") {
  fx::tensor<int> a = {{3, 1, 3}, {0, 2, 2}};
  CHECK(fx::tensor<bool>(fx::all(a > 0, 1)).to_vector() == std::vector<bool>{true, false});
  CHECK(fx::tensor<bool>(fx::any(a == 0, 1)).to_vector() == std::vector<bool>{false, true});
  CHECK(fx::tensor<bool>(fx::all(a >= 0)).item());
  CHECK(fx::tensor<std::int64_t>(fx::argmax(a, 1)).to_vector() == std::vector<std::int64_t>{0, 1});  // first of ties
  CHECK(fx::tensor<std::int64_t>(fx::argmin(a, 1)).to_vector() == std::vector<std::int64_t>{1, 0});
  CHECK(fx::tensor<std::int64_t>(fx::argmax(a, 0)).to_vector() == std::vector<std::int64_t>{0, 1, 0});
  fx::tensor<std::int64_t> kept = fx::argmax(a, 1, /*keep=*/true);
  CHECK(kept.shape() == fx::shape{2, 1});
  CHECK(kept.to_vector() == std::vector<std::int64_t>{0, 1});
  fx::tensor<std::int64_t> kept0 = fx::argmin(a, -2, true);
  CHECK(kept0.shape() == fx::shape{1, 3});
  CHECK(kept0.to_vector() == std::vector<std::int64_t>{1, 0, 1});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  fx::tensor<float> n = {1.f, nan, 3.f};
  CHECK(fx::tensor<std::int64_t>(fx::argmax(n)).item() == 1);
  CHECK(std::isnan(fx::tensor<float>(fx::reduce_max(n)).item()));
  CHECK(std::isnan(fx::tensor<float>(fx::reduce_min(n)).item()));
  fx::tensor<bool> empty(fx::shape{0});
  CHECK(fx::tensor<bool>(fx::all(empty)).item());
  CHECK(!fx::tensor<bool>(fx::any(empty)).item());
  CHECK(fx::tensor<int>(fx::reduce_sum(fx::tensor<bool>{true, true, false})).item() == 2);
}

TEST_CASE("reduce: logsumexp is stable and handles -inf") {
  fx::tensor<double> big = {1000.0, 1000.0};
  CHECK(fx::tensor<double>(fx::reduce_logsumexp(big)).item() == doctest::Approx(1000.0 + std::log(2.0)));
  fx::tensor<double> ninf = {-INFINITY, -INFINITY};
  CHECK(fx::tensor<double>(fx::reduce_logsumexp(ninf)).item() == -INFINITY);
}

TEST_CASE("reduce: errors name the op and the axis") {
  fx::tensor<float> x(fx::shape{2, 3});
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::reduce_sum(x, 2); }, "reduce_sum: axis 2 is out of range [-2, 2)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::reduce_max(x, {0, -2}); }, "reduce_max: axis -2 is repeated");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::argmax(fx::tensor<float>(fx::shape{0, 2}), 0); },
                                                "argmax: axis 0 of shape (0, 2) is empty");
}

TEST_CASE("reduce: bitwise identical for any thread count, large and column reductions") {
  auto x = test::random_tensor<float>({3, 1 << 18}, 9);
  auto y = test::random_tensor<float>({1 << 12, 64}, 10);
  std::vector<std::vector<float>> r;
  for (int th : {1, 2, 3}) {
    fx::set_num_threads(th);
    std::vector<float> v = fx::tensor<float>(fx::reduce_sum(x * x)).to_vector();
    auto c = fx::tensor<float>(fx::reduce_sum(y, 0)).to_vector();
    auto rr = fx::tensor<float>(fx::reduce_sum(x, 1)).to_vector();
    v.insert(v.end(), c.begin(), c.end());
    v.insert(v.end(), rr.begin(), rr.end());
    r.push_back(v);
  }
  fx::set_num_threads(2);
  CHECK(r[0] == r[1]);
  CHECK(r[0] == r[2]);
  double want = 0;
  for (float v : x.to_vector()) want += double(v) * v;
  CHECK(r[0][0] == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE_TEMPLATE("reduce_sum and reduce_mean over leading axes of a contiguous tensor match a naive loop", T, float,
                   double) {
  // The column path (rows added into an accumulator row, in chunks of 16384 elements): several
  // chunks, ragged vectors, and any thread count give the naive result.
  for (const auto& [s, lead] : std::vector<std::pair<fx::shape, int>>{
           {fx::shape{300, 7, 5}, 2}, {fx::shape{70000, 3}, 1}, {fx::shape{5, 33}, 1}, {fx::shape{2, 3, 4, 17}, 3}}) {
    const fx::tensor<T> x = test::random_tensor<T>(s, 11);
    std::vector<int> axes;
    for (int d = 0; d < lead; ++d) axes.push_back(d);
    fx::index_t rows = 1, cols = 1;
    for (int d = 0; d < s.rank(); ++d) (d < lead ? rows : cols) *= s[d];
    std::vector<double> want(static_cast<std::size_t>(cols), 0.0);
    const auto v = x.to_vector();
    for (fx::index_t r = 0; r < rows; ++r)
      for (fx::index_t j = 0; j < cols; ++j) want[static_cast<std::size_t>(j)] += v[static_cast<std::size_t>(r * cols + j)];
    const int before = fx::get_num_threads();
    for (int threads : {1, 2}) {
      fx::set_num_threads(threads);
      const auto sum = fx::tensor<T>(fx::reduce_sum(x, axes)).to_vector();
      const auto mean = fx::tensor<T>(fx::reduce_mean(x, axes)).to_vector();
      REQUIRE(sum.size() == want.size());
      for (std::size_t j = 0; j < want.size(); ++j) {
        CHECK(sum[j] == doctest::Approx(want[j]).epsilon(std::is_same_v<T, float> ? 1e-4 : 1e-12));
        CHECK(mean[j] == doctest::Approx(want[j] / static_cast<double>(rows)).epsilon(std::is_same_v<T, float> ? 1e-4 : 1e-12));
      }
    }
    fx::set_num_threads(before);
  }
}

TEST_CASE_TEMPLATE("reduce: reductions of expressions (contiguous, transposed, broadcast, cast) match a naive loop", T,
                   float, double) {
  // A reduction of anything but a tensor fills blocks of its values (cpu_kernel::fill_flat) and
  // combines them; shapes here cross the block (2048 values), the chunk (16384) and the vector width.
  for (const fx::shape& s : {fx::shape{7}, fx::shape{3, 5}, fx::shape{2, 3, 4}, fx::shape{4, 1, 33}, fx::shape{2, 0, 3},
                             fx::shape{3, 2100}, fx::shape{2, 17000}, fx::shape{700, 37}, fx::shape{2, 1100, 9}}) {
    const auto x = test::random_tensor<T>(s, 5, 0.5, 1.5);
    fx::shape row_shape;
    for (int d = 0; d < s.rank(); ++d) row_shape.push_back(d + 1 == s.rank() ? s[d] : 1);
    const auto r = test::random_tensor<T>(row_shape, 6, 0.5, 1.5);
    const auto xi = test::random_tensor<int>(s, 7, -20, 20);
    const auto xv = x.to_vector(), rv = r.to_vector();
    const auto xiv = xi.to_vector();
    const fx::index_t cols = s[s.rank() - 1];
    // The transposed operand: y with its axes reversed, transposed back, reads x's values strided.
    std::vector<int> rev;
    for (int d = s.rank() - 1; d >= 0; --d) rev.push_back(d);
    const fx::tensor<T> y = fx::transpose(x, rev);
    std::vector<double> scaled, broadcast, cast;
    for (std::size_t i = 0; i < xv.size(); ++i) {
      scaled.push_back(2.0 * xv[i]);
      broadcast.push_back(double(xv[i]) * rv[i % static_cast<std::size_t>(cols)]);
      cast.push_back(static_cast<double>(static_cast<T>(xiv[i])));
    }
    for (unsigned mask = 0; mask < (1u << s.rank()); ++mask) {
      CAPTURE(fx::to_string(s));
      CAPTURE(mask);
      const auto ax = axes_of(mask, s.rank());
      fx::index_t n = 1;
      for (int a : ax) n *= s[a];
      const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
      auto check_all = [&](const auto& e, const std::vector<double>& values) {
        auto sum = naive_reduce(values, s, mask, std::plus<>(), 0.0);
        test::check_close(fx::tensor<T>(fx::reduce_sum(e, ax)).to_vector(), std::vector<T>(sum.begin(), sum.end()), tol);
        std::vector<T> mean;
        for (double v : sum) mean.push_back(static_cast<T>(v / static_cast<double>(n)));
        test::check_close(fx::tensor<T>(fx::reduce_mean(e, ax)).to_vector(), mean, tol);
        auto mx = naive_reduce(values, s, mask, [](double a, double b) { return std::max(a, b); }, -INFINITY);
        test::check_close(fx::tensor<T>(fx::reduce_max(e, ax)).to_vector(), std::vector<T>(mx.begin(), mx.end()));
        auto mn = naive_reduce(values, s, mask, [](double a, double b) { return std::min(a, b); }, INFINITY);
        test::check_close(fx::tensor<T>(fx::reduce_min(e, ax)).to_vector(), std::vector<T>(mn.begin(), mn.end()));
      };
      check_all(x * T(2), scaled);
      check_all(fx::transpose(y, rev) * T(2), scaled);
      check_all(x * r, broadcast);
      check_all(fx::cast<T>(xi), cast);
      if (s.size() <= 100) {  // products of many values leave the range of float
        auto prod = naive_reduce(scaled, s, mask, std::multiplies<>(), 1.0);
        test::check_close(fx::tensor<T>(fx::reduce_prod(x * T(2), ax)).to_vector(), std::vector<T>(prod.begin(), prod.end()),
                          tol);
      }
      auto isum = naive_reduce(std::vector<double>(xiv.begin(), xiv.end()), s, mask, std::plus<>(), 0.0);
      CHECK(fx::tensor<int>(fx::reduce_sum(xi * 1, ax)).to_vector() == std::vector<int>(isum.begin(), isum.end()));
    }
  }
}

TEST_CASE("reduce: reductions of expressions are bitwise identical for any thread count") {
  auto x = test::random_tensor<float>({3000, 40}, 12), r = test::random_tensor<float>({40}, 13);
  std::vector<std::vector<float>> out;
  const int before = fx::get_num_threads();
  for (int th : {1, 2, 3}) {
    fx::set_num_threads(th);
    std::vector<float> v = fx::tensor<float>(fx::reduce_sum(x * r, 0)).to_vector();       // every axis but the last
    const auto rows = fx::tensor<float>(fx::reduce_max(fx::exp(x), 1)).to_vector();     // the last axis
    const auto all = fx::tensor<float>(fx::reduce_mean(fx::square(x - r))).to_vector();  // every axis
    const auto col = fx::tensor<float>(fx::reduce_sum(fx::transpose(x) * 2.f, 1)).to_vector();  // strided
    for (const auto* part : {&rows, &all, &col}) v.insert(v.end(), part->begin(), part->end());
    out.push_back(v);
  }
  fx::set_num_threads(before);
  CHECK(out[0] == out[1]);
  CHECK(out[0] == out[2]);
}

TEST_CASE_TEMPLATE("reduce: a run of axes before kept axes (a global average pool, a middle axis) matches a naive loop", T,
                   float, double) {
  // Outer blocks of rows combined into rows of accumulators: several blocks, several chunks per
  // block (16384 values), ragged vectors; tensors and expressions; any thread count, bitwise.
  for (const auto& [s_, axes] : std::vector<std::pair<fx::shape, std::vector<int>>>{
           {fx::shape{4, 30, 30, 16}, {1, 2}}, {fx::shape{3, 5000, 8}, {1}}, {fx::shape{2, 3, 700, 13}, {1, 2}},
           {fx::shape{5, 40, 9}, {1}}}) {
    const auto& s = s_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(fx::to_string(s));
    const auto x = test::random_tensor<T>(s, 21, -1.5, 1.5);
    std::vector<double> xd;
    for (T v : x.to_vector()) xd.push_back(v);
    unsigned mask = 0;
    for (int a : axes) mask |= 1u << a;
    fx::index_t n = 1;
    for (int a : axes) n *= s[a];
    const auto sum = naive_reduce(xd, s, mask, std::plus<>(), 0.0);
    const auto mx = naive_reduce(xd, s, mask, [](double a, double b) { return std::max(a, b); }, -INFINITY);
    std::vector<T> mean, twice;
    for (double v : sum) {
      mean.push_back(static_cast<T>(v / static_cast<double>(n)));
      twice.push_back(static_cast<T>(2 * v));
    }
    const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
    std::vector<std::vector<T>> runs;
    const int before = fx::get_num_threads();
    for (int threads : {1, 2, 3}) {
      fx::set_num_threads(threads);
      const auto m = fx::tensor<T>(fx::reduce_mean(x, axes)).to_vector();
      const auto e = fx::tensor<T>(fx::reduce_sum(x * T(2), axes)).to_vector();
      const auto mxv = fx::tensor<T>(fx::reduce_max(x, axes)).to_vector();
      test::check_close(m, mean, tol, tol);
      test::check_close(e, twice, tol, tol);
      test::check_close(mxv, std::vector<T>(mx.begin(), mx.end()));
      std::vector<T> all = m;
      all.insert(all.end(), e.begin(), e.end());
      runs.push_back(all);
    }
    fx::set_num_threads(before);
    CHECK(runs[0] == runs[1]);
    CHECK(runs[0] == runs[2]);
  }
}
