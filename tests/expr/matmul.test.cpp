#include "../test_util.hpp"

namespace {
template <class T>
std::vector<T> naive(const fx::tensor<T>& a, const fx::tensor<T>& b, bool ta, bool tb) {
  const fx::index_t m = ta ? a.shape()[1] : a.shape()[0], k = ta ? a.shape()[0] : a.shape()[1];
  const fx::index_t n = tb ? b.shape()[0] : b.shape()[1];
  std::vector<T> c(static_cast<std::size_t>(m * n));
  for (fx::index_t i = 0; i < m; ++i)
    for (fx::index_t j = 0; j < n; ++j) {
      double s = 0;
      for (fx::index_t p = 0; p < k; ++p) s += double(ta ? a(p, i) : a(i, p)) * double(tb ? b(j, p) : b(p, j));
      c[static_cast<std::size_t>(i * n + j)] = static_cast<T>(s);
    }
  return c;
}
}  // namespace

TEST_CASE_TEMPLATE("matmul: every transpose combination and odd sizes", T, float, double) {
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, std::tuple{3, 5, 7}, std::tuple{17, 9, 33}, std::tuple{70, 65, 130}}) {
    for (int f = 0; f < 4; ++f) {
      const bool ta = f & 1, tb = f & 2;
      auto a = test::random_tensor<T>(ta ? fx::shape{k, m} : fx::shape{m, k}, 1);
      auto b = test::random_tensor<T>(tb ? fx::shape{n, k} : fx::shape{k, n}, 2);
      fx::tensor<T> c = fx::matmul(a, b, {ta, tb});
      CHECK(c.shape() == fx::shape{m, n});
      test::check_close(c.to_vector(), naive(a, b, ta, tb), std::is_same_v<T, float> ? 1e-4 : 1e-12, 1e-4);
    }
  }
}

TEST_CASE("matmul: batched with broadcast batch dimensions") {
  auto a = test::random_tensor<double>({2, 1, 3, 4}, 1);
  auto b = test::random_tensor<double>({3, 4, 5}, 2);
  fx::tensor<double> c = fx::matmul(a, b);
  CHECK(c.shape() == fx::shape{2, 3, 3, 5});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      fx::tensor<double> ai = fx::squeeze(fx::slice(a, {i, 0, 0, 0}, {1, 1, -1, -1}));
      fx::tensor<double> bj = fx::squeeze(fx::slice(b, {j, 0, 0}, {1, -1, -1}));
      fx::tensor<double> cij = fx::squeeze(fx::slice(c, {i, j, 0, 0}, {1, 1, -1, -1}));
      test::check_close(cij.to_vector(), naive(ai, bj, false, false), 1e-12);
    }
}

TEST_CASE("matmul: the design's example, empty inner dimension, integers, errors") {
  fx::tensor<float> x = {{2.f}};
  CHECK(fx::tensor<float>(fx::matmul(x, x)).item() == 4.f);
  fx::tensor<float> z = fx::matmul(fx::tensor<float>(fx::shape{2, 0}), fx::tensor<float>(fx::shape{0, 3}));
  CHECK(z.to_vector() == std::vector<float>(6, 0.f));
  fx::tensor<int> i = {{1, 2}, {3, 4}};
  CHECK(fx::tensor<int>(fx::matmul(i, i)).to_vector() == std::vector<int>{7, 10, 15, 22});
  test::check_throws_with<fx::shape_error>(
      [] { (void)fx::matmul(fx::tensor<float>(fx::shape{32, 784}), fx::tensor<float>(fx::shape{128, 10})); },
      "matmul: inner dimensions differ: (32, 784) x (128, 10)");
  test::check_throws_with<fx::shape_error>(
      [] { (void)fx::matmul(fx::tensor<float>(fx::shape{3}), fx::tensor<float>(fx::shape{3, 2})); },
      "matmul: operands need rank >= 2 (as tf.linalg.matmul), got shapes (3,) and (3, 2); make a vector a row or a "
      "column first (fx::reshape(v, {1, n}) or {n, 1}), or contract it with fx::einsum(\"i,ij->j\", v, m)");
  test::check_throws_with<fx::shape_error>(
      [] { (void)fx::matmul(fx::tensor<float>(fx::shape{2, 2, 3}), fx::tensor<float>(fx::shape{3, 3, 2})); },
      "matmul: batch dimensions of shapes (2, 2, 3) and (3, 3, 2) cannot be broadcast");
}
