// GEMM against a naive triple loop in long double, over shapes that hit every edge of the blocking:
// sizes below one register tile, odd sizes, several KC slices, empty dimensions, every transpose
// combination, padded leading dimensions, alpha/beta and the fused epilogue. Also checks that the
// result does not depend on the thread count.
#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fluxion/backend/cpu/gemm.hpp>

namespace cpu = fluxion::detail::kernels;
using fluxion::index_t;

namespace {

struct gemm_case {
  index_t m, n, k;
  bool ta, tb;
  double alpha, beta;
  bool bias, relu;
  index_t pad;  // extra columns in every leading dimension
};

template <class T>
std::vector<T> random_vector(std::size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// Runs one case and returns the largest error in units of the error bound (<= 1 passes).
template <class T>
double run_case(const gemm_case& g, std::mt19937& rng) {
  const index_t a_rows = g.ta ? g.k : g.m, a_cols = g.ta ? g.m : g.k;
  const index_t b_rows = g.tb ? g.n : g.k, b_cols = g.tb ? g.k : g.n;
  const index_t lda = std::max<index_t>(1, a_cols) + g.pad, ldb = std::max<index_t>(1, b_cols) + g.pad,
                ldc = std::max<index_t>(1, g.n) + g.pad;
  auto a = random_vector<T>(static_cast<std::size_t>(a_rows * lda), rng);
  auto b = random_vector<T>(static_cast<std::size_t>(b_rows * ldb), rng);
  auto c = random_vector<T>(static_cast<std::size_t>(g.m * ldc), rng);
  auto bias = random_vector<T>(static_cast<std::size_t>(g.n), rng);
  // beta == 0 must not read C: NaN there would leak into the result.
  if (g.beta == 0.0)
    for (auto& x : c) x = std::numeric_limits<T>::quiet_NaN();
  const auto c0 = c;
  cpu::gemm_epilogue<T> ep{g.bias ? bias.data() : nullptr, g.relu ? cpu::activation::relu : cpu::activation::none};
  cpu::gemm<T>(g.ta ? cpu::transpose::yes : cpu::transpose::no, g.tb ? cpu::transpose::yes : cpu::transpose::no, g.m,
               g.n, g.k, static_cast<T>(g.alpha), a.data(), lda, b.data(), ldb, static_cast<T>(g.beta), c.data(), ldc,
               ep);
  double worst = 0;
  const double eps = std::numeric_limits<T>::epsilon();
  for (index_t i = 0; i < g.m; ++i)
    for (index_t j = 0; j < ldc; ++j) {
      const T got = c[static_cast<std::size_t>(i * ldc + j)];
      if (j >= g.n) {  // padding columns stay untouched
        const T before = c0[static_cast<std::size_t>(i * ldc + j)];
        if (!(got == before || (std::isnan(got) && std::isnan(before)))) return 1e9;
        continue;
      }
      long double sum = 0, mag = 0;
      for (index_t p = 0; p < g.k; ++p) {
        const long double x = a[static_cast<std::size_t>(g.ta ? p * lda + i : i * lda + p)];
        const long double y = b[static_cast<std::size_t>(g.tb ? j * ldb + p : p * ldb + j)];
        sum += x * y;
        mag += std::fabs(x * y);
      }
      long double want = g.alpha * sum;
      mag = std::fabs(g.alpha) * mag;
      if (g.beta != 0.0) {
        want += g.beta * static_cast<long double>(c0[static_cast<std::size_t>(i * ldc + j)]);
        mag += std::fabs(g.beta * c0[static_cast<std::size_t>(i * ldc + j)]);
      }
      if (g.bias) {
        want += bias[static_cast<std::size_t>(j)];
        mag += std::fabs(bias[static_cast<std::size_t>(j)]);
      }
      if (g.relu && want < 0) want = 0;
      if (std::isnan(got)) return 1e9;
      const double bound = (static_cast<double>(g.k) + 4) * eps * static_cast<double>(mag) + 1e-30;
      worst = std::max(worst, static_cast<double>(std::fabs(got - want)) / bound);
    }
  return worst;
}

std::string describe(const gemm_case& g) {
  return "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " ta=" + std::to_string(g.ta) + " tb=" + std::to_string(g.tb) + " alpha=" + std::to_string(g.alpha) +
         " beta=" + std::to_string(g.beta) + " bias=" + std::to_string(g.bias) + " relu=" + std::to_string(g.relu) +
         " pad=" + std::to_string(g.pad);
}

}  // namespace

TEST_CASE_TEMPLATE("gemm matches a naive loop", T, float, double) {
  std::mt19937 rng(42);
  const index_t shapes[][3] = {{1, 1, 1},      {2, 3, 4},      {5, 7, 3},    {6, 16, 8},    {7, 17, 9},
                               {13, 1, 31},    {1, 33, 17},    {31, 29, 37}, {64, 10, 256}, {50, 70, 300},
                               {97, 35, 513},  {200, 90, 40},  {7, 12, 600}, {20, 13, 9},   {40, 200, 520},
                               {300, 41, 300}, {170, 150, 300},
                               // a few rows (the streaming path): matrix-vector shapes, long k, odd n
                               {1, 16, 20000}, {2, 300, 50},   {4, 1000, 7}, {3, 37, 129}, {16, 1, 5000},
                               // ... in several column panels and chunks of k, and narrow ones
                               {1, 1030, 1100}, {3, 2100, 530}, {4, 10, 1030}, {2, 7, 3}, {1, 9, 2000},
                               // bottom edges of 4 and 8 rows read in place (AVX-512: 14-row tiles)
                               {32, 40, 50},   {36, 20, 64},   {22, 100, 33},
                               // at most one vector of columns (the narrow path): every row-tile size
                               {64, 10, 256},  {29, 16, 70},   {7, 9, 40},   {5, 1, 300},
                               // dot tiles with a k % W tail and op(A) transposed column tiles: every
                               // column remainder (n % 4), full and single-vector row tiles, leftover rows
                               {256, 10, 64},  {70, 11, 100},  {45, 6, 77},  {40, 3, 50},   {97, 7, 129},
                               {33, 2, 66},    {130, 13, 17},  {81, 16, 65},
                               // column tiles wider than one AVX2 vector, and the rows they leave
                               {75, 9, 33},    {83, 12, 45},   {256, 10, 64},
                               // the same with parallel row blocks, the last one leaving rows behind
                               {1501, 10, 300}, {1333, 12, 257}};
  const double alphas[] = {1.0, -0.5};
  const double betas[] = {0.0, 1.0, 0.75};
  int count = 0;
  for (const auto& s : shapes)
    for (int t = 0; t < 4; ++t)
      for (double alpha : alphas)
        for (double beta : betas) {
          ++count;
          // Big shapes exercise blocking, not scalars: two alpha/beta pairs keep the test fast.
          const bool big = s[0] * s[1] * s[2] > 500000;
          if (big && !((alpha == 1.0 && beta == 0.0) || (alpha != 1.0 && beta == 0.75))) continue;
          gemm_case g{s[0],  s[1], s[2],           (t & 1) != 0,   (t & 2) != 0,
                      alpha, beta, count % 3 == 0, count % 4 == 0, count % 5 == 0 ? 3 : 0};
          const double err = run_case<T>(g, rng);
          INFO(describe(g));
          CHECK(err <= 1.0);
        }
}

TEST_CASE_TEMPLATE("gemm's relu epilogue keeps NaN", T, float, double) {
  // relu(NaN) is NaN in the fused epilogue too (as ops::relu and TensorFlow): a NaN bias entry makes
  // its column NaN, and a NaN in A its row, on every kernel (few rows, dot tiles, micro tiles).
  std::mt19937 rng(5);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (const auto& s : {std::array<index_t, 3>{1, 40, 300}, {3, 7, 50}, {4, 1000, 7}, {64, 10, 256},
                        {40, 200, 520}, {31, 29, 37}, {300, 41, 300}})
    for (int t = 0; t < 4; ++t) {
      const index_t m = s[0], n = s[1], k = s[2];
      const bool ta = t & 1, tb = t & 2;
      INFO("m=" << m << " n=" << n << " k=" << k << " ta=" << ta << " tb=" << tb);
      auto a = random_vector<T>(static_cast<std::size_t>(m * k), rng);
      auto b = random_vector<T>(static_cast<std::size_t>(k * n), rng);
      auto bias = random_vector<T>(static_cast<std::size_t>(n), rng);
      const index_t nan_col = n / 2, nan_row = m - 1;
      bias[static_cast<std::size_t>(nan_col)] = nan;
      a[static_cast<std::size_t>(ta ? (k / 2) * m + nan_row : nan_row * k + k / 2)] = nan;
      std::vector<T> c(static_cast<std::size_t>(m * n), T(7));
      cpu::gemm<T>(ta ? cpu::transpose::yes : cpu::transpose::no, tb ? cpu::transpose::yes : cpu::transpose::no, m,
                   n, k, T(1), a.data(), ta ? m : k, b.data(), tb ? k : n, T(0), c.data(), n,
                   {bias.data(), cpu::activation::relu});
      int wrong = 0;
      for (index_t i = 0; i < m; ++i)
        for (index_t j = 0; j < n; ++j) {
          const T v = c[static_cast<std::size_t>(i * n + j)];
          if ((i == nan_row || j == nan_col) != std::isnan(v) || (!std::isnan(v) && v < T(0))) ++wrong;
        }
      CHECK(wrong == 0);
    }
}

TEST_CASE_TEMPLATE("gemm bottom edges of every height, packed and read in place", T, float, double) {
  // A last row tile of h < MR rows runs a 4- or 8-row kernel where the full tile is taller (AVX2:
  // 6 rows, AVX-512: 14), on a sliver pack_a lays out that short, or on A's rows in place. n = 40
  // reads A in place, n = 150 packs it (and ends in a right-edge tile); m above one row block
  // (about 150 rows) takes the tall path, where each block of rows has its own edge.
  std::mt19937 rng(11);
  int count = 0;
  for (index_t n : {40, 150})
    for (index_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 15, 17, 18, 19, 22, 23, 26, 27, 30, 301, 305, 309}) {
      ++count;
      gemm_case g{m, n, 37, (count & 1) != 0, (count & 2) != 0, count % 3 ? 1.0 : -0.5, count % 4 ? 0.0 : 0.75,
                  count % 5 == 0, count % 7 == 0, count % 6 == 0 ? 2 : 0};
      INFO(describe(g));
      CHECK(run_case<T>(g, rng) <= 1.0);
    }
}

TEST_CASE_TEMPLATE("gemm dot-product tiles: every column count and every row remainder", T, float, double) {
  // The dot kernel (op(A) not transposed, n <= 6, or n up to one vector with k of 4 vectors or
  // more) tiles W / n rows for n < 4, else W / 4 rows by 4, 2 and 1 columns, then the leftover rows
  // W / 4 and one at a time. k = 64 and 70 (a k % W tail), with and without the whole epilogue.
  std::mt19937 rng(5);
  int count = 0;
  for (index_t k : {64, 70})
    for (index_t n = 1; n <= 16; ++n)
      for (index_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 21, 33}) {
        ++count;
        const bool full = count % 2 == 0;
        gemm_case g{m, n, k, false, (count & 4) != 0, full ? -0.5 : 1.0, full ? 0.75 : 0.0, full, full, count % 3 ? 0 : 3};
        INFO(describe(g));
        CHECK(run_case<T>(g, rng) <= 1.0);
      }
}

TEST_CASE_TEMPLATE("gemm handles empty dimensions", T, float, double) {
  std::mt19937 rng(1);
  for (int t = 0; t < 4; ++t)
    for (const auto& s : {std::array<index_t, 3>{0, 5, 3}, {4, 0, 3}, {4, 5, 0}, {0, 0, 0}})
      for (double beta : {0.0, 0.5}) {
        gemm_case g{s[0], s[1], s[2], (t & 1) != 0, (t & 2) != 0, 2.0, beta, true, true, 0};
        INFO(describe(g));
        CHECK(run_case<T>(g, rng) <= 1.0);
      }
}

TEST_CASE_TEMPLATE("gemm_strided_batched matches gemm per matrix", T, float, double) {
  std::mt19937 rng(7);
  for (index_t batch : {0, 1, 3}) {
    const index_t m = 9, n = 20, k = 11;
    auto a = random_vector<T>(static_cast<std::size_t>(batch * m * k + 1), rng);
    auto b = random_vector<T>(static_cast<std::size_t>(k * n), rng);  // stride_b = 0: shared weights
    auto c = random_vector<T>(static_cast<std::size_t>(batch * m * n + 1), rng);
    auto want = c;
    cpu::gemm_strided_batched<T>(cpu::transpose::no, cpu::transpose::yes, m, n, k, T(1.5), a.data(), k, m * k, b.data(),
                                 k, 0, T(0.5), c.data(), n, m * n, batch);
    for (index_t i = 0; i < batch; ++i)
      cpu::gemm<T>(cpu::transpose::no, cpu::transpose::yes, m, n, k, T(1.5), a.data() + i * m * k, k, b.data(), k,
                   T(0.5), want.data() + i * m * n, n);
    CHECK(c == want);
  }
}

TEST_CASE("gemm rejects bad arguments with the values in the message") {
  float x[16] = {};
  auto msg = [&](auto&& f) {
    try {
      f();
    } catch (const fluxion::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  CHECK(msg([&] { cpu::gemm<float>(cpu::transpose::no, cpu::transpose::no, 2, 2, 4, 1, x, 3, x, 2, 0, x, 2); }) ==
        "gemm: lda = 3 is smaller than k = 4");
  CHECK(msg([&] { cpu::gemm<float>(cpu::transpose::yes, cpu::transpose::no, 3, 2, 2, 1, x, 2, x, 2, 0, x, 2); }) ==
        "gemm: lda = 2 is smaller than m = 3");
  CHECK(msg([&] { cpu::gemm<float>(cpu::transpose::no, cpu::transpose::yes, 2, 2, 3, 1, x, 3, x, 2, 0, x, 2); }) ==
        "gemm: ldb = 2 is smaller than k = 3");
  CHECK(msg([&] { cpu::gemm<float>(cpu::transpose::no, cpu::transpose::no, 2, 3, 2, 1, x, 2, x, 3, 0, x, 2); }) ==
        "gemm: ldc = 2 is smaller than n = 3");
  CHECK(msg([&] { cpu::gemm<float>(cpu::transpose::no, cpu::transpose::no, -1, 2, 2, 1, x, 2, x, 2, 0, x, 2); }) ==
        "gemm: sizes must be non-negative, got m = -1, n = 2, k = 2");
  CHECK(msg([&] {
          cpu::gemm_strided_batched<float>(cpu::transpose::no, cpu::transpose::no, 1, 1, 1, 1, x, 1, 1, x, 1, 1, 0, x,
                                           1, 1, -2);
        }) == "gemm_strided_batched: batch_count = -2 is negative");
}

TEST_CASE_TEMPLATE("gemm is bitwise identical for 1, 2 and 3 threads", T, float, double) {
  std::mt19937 rng(3);
  const int saved = fluxion::get_num_threads();
  // Big enough for several tasks and several KC slices; odd so edges land inside tasks.
  const index_t m = 301, n = 203, k = 611;
  auto a = random_vector<T>(static_cast<std::size_t>(k * m), rng);
  auto b = random_vector<T>(static_cast<std::size_t>(k * n), rng);
  auto bias = random_vector<T>(static_cast<std::size_t>(n), rng);
  auto matrix = random_vector<T>(static_cast<std::size_t>(150 * 4096), rng);
  std::vector<std::vector<T>> results;
  for (int threads : {1, 2, 3}) {
    fluxion::set_num_threads(threads);
    std::vector<T> c(static_cast<std::size_t>(m * n), T(0.25));
    cpu::gemm<T>(cpu::transpose::yes, cpu::transpose::no, m, n, k, T(0.5), a.data(), m, b.data(), n, T(2), c.data(), n,
                 {bias.data(), cpu::activation::relu});
    // A short, wide product (column tasks) and a few-column one (transposed product).
    std::vector<T> wide(static_cast<std::size_t>(60 * 300)), narrow(static_cast<std::size_t>(300 * 10));
    cpu::gemm<T>(cpu::transpose::no, cpu::transpose::no, 60, 300, 400, T(1), a.data(), 400, b.data(), 300, T(0),
                 wide.data(), 300);
    cpu::gemm<T>(cpu::transpose::yes, cpu::transpose::no, 300, 10, 400, T(1), a.data(), 300, b.data(), 10, T(0),
                 narrow.data(), 10);
    // A matrix-vector product big enough to run in parallel column blocks (the few-rows path).
    std::vector<T> row(static_cast<std::size_t>(4096));
    cpu::gemm<T>(cpu::transpose::no, cpu::transpose::no, 1, 4096, 150, T(1), a.data(), 150, matrix.data(), 4096, T(0),
                 row.data(), 4096);
    c.insert(c.end(), row.begin(), row.end());
    // Three rows in two chunks of k, summed in chunk order whatever the thread count.
    std::vector<T> rows3(static_cast<std::size_t>(3 * 600));
    cpu::gemm<T>(cpu::transpose::no, cpu::transpose::no, 3, 600, 1000, T(1), a.data(), 1000, matrix.data(), 600, T(0),
                 rows3.data(), 600, {nullptr, cpu::activation::relu});
    c.insert(c.end(), rows3.begin(), rows3.end());
    // One vector of columns, big enough for parallel row blocks (the narrow path).
    std::vector<T> tall(static_cast<std::size_t>(1500 * 10));
    cpu::gemm<T>(cpu::transpose::no, cpu::transpose::yes, 1500, 10, 300, T(1), matrix.data(), 300, b.data(), 300, T(0),
                 tall.data(), 10);
    c.insert(c.end(), tall.begin(), tall.end());
    c.insert(c.end(), wide.begin(), wide.end());
    c.insert(c.end(), narrow.begin(), narrow.end());
    std::vector<T> cb(static_cast<std::size_t>(4 * 20 * 30));
    cpu::gemm_strided_batched<T>(cpu::transpose::no, cpu::transpose::no, 20, 30, 40, T(1), a.data(), 40, 800, b.data(),
                                 30, 1200, T(0), cb.data(), 30, 600, 4);
    c.insert(c.end(), cb.begin(), cb.end());
    results.push_back(std::move(c));
  }
  fluxion::set_num_threads(saved);
  CHECK(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(T)) == 0);
  CHECK(std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(T)) == 0);
}
