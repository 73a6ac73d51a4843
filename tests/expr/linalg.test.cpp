// fx::linalg's diagonal and band ops against naive loops over batches of square, wide and tall
// matrices, for float, double and int32; TensorFlow's example; inside statements, of variables and
// of empty extents; their errors. (Gradients against finite differences:
// tests/autodiff/rules_linalg.test.cpp.)
#include "../test_util.hpp"

#include <fluxion/tensor/creation.hpp>

namespace {

/// x (batch, m, n) as nested loops: f(b, i, j, value) for each element in order.
template <class T, class F>
void each_element(const std::vector<T>& x, fx::index_t batch, fx::index_t m, fx::index_t n, F&& f) {
  for (fx::index_t b = 0; b < batch; ++b)
    for (fx::index_t i = 0; i < m; ++i)
      for (fx::index_t j = 0; j < n; ++j) f(b, i, j, x[static_cast<std::size_t>((b * m + i) * n + j)]);
}

}  // namespace

TEST_CASE_TEMPLATE("linalg: band_part, diag_part, trace, diag and set_diag against naive loops", T, float, double,
                   std::int32_t) {
  for (auto [m, n] : {std::pair<fx::index_t, fx::index_t>{4, 4}, {3, 5}, {5, 2}, {1, 3}}) {
    CAPTURE(m);
    CAPTURE(n);
    const fx::index_t batch = 3, k = std::min(m, n);
    const fx::tensor<T> x = test::random_tensor<T>({batch, m, n}, 7, -9, 9);
    const auto xv = x.to_vector();
    for (fx::index_t lower : {-1, 0, 1, 2})
      for (fx::index_t upper : {-1, 0, 1, 3}) {
        CAPTURE(lower);
        CAPTURE(upper);
        std::vector<T> want;
        each_element(xv, batch, m, n, [&](fx::index_t, fx::index_t i, fx::index_t j, T v) {
          const bool in = (lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper);
          want.push_back(in ? v : T(0));
        });
        const fx::tensor<T> got = fx::linalg::band_part(x, lower, upper);
        CHECK(got.shape() == x.shape());
        CHECK(got.to_vector() == want);
      }
    std::vector<T> diagonal(static_cast<std::size_t>(batch * k)), traces(static_cast<std::size_t>(batch), T(0));
    each_element(xv, batch, m, n, [&](fx::index_t b, fx::index_t i, fx::index_t j, T v) {
      if (i != j) return;
      diagonal[static_cast<std::size_t>(b * k + i)] = v;
      traces[static_cast<std::size_t>(b)] += v;
    });
    const fx::tensor<T> d = fx::linalg::diag_part(x);
    CHECK(d.shape() == fx::shape{batch, k});
    CHECK(d.to_vector() == diagonal);
    const fx::tensor<T> t = fx::linalg::trace(x);
    CHECK(t.shape() == fx::shape{batch});
    CHECK(t.to_vector() == traces);
    // Of an expression (a view of it that computes the diagonal only, stop 82): the same numbers.
    std::vector<T> shifted = diagonal;
    for (T& e : shifted) e = e * T(2) + T(1);
    CHECK(fx::tensor<T>(fx::linalg::diag_part(x * T(2) + T(1))).to_vector() == shifted);
    CHECK(fx::tensor<T>(fx::linalg::diag_part(fx::transpose(x, {0, 2, 1}))).to_vector() == diagonal);
    // set_diag: x with diagonal element (b, k) replaced by 100 b + k.
    std::vector<T> fresh, want;
    for (fx::index_t b = 0; b < batch; ++b)
      for (fx::index_t i = 0; i < k; ++i) fresh.push_back(static_cast<T>(100 * b + i));
    each_element(xv, batch, m, n, [&](fx::index_t b, fx::index_t i, fx::index_t j, T v) {
      want.push_back(i == j ? fresh[static_cast<std::size_t>(b * k + i)] : v);
    });
    const fx::tensor<T> s = fx::linalg::set_diag(x, fx::from_vector(fresh, {batch, k}));
    CHECK(s.shape() == x.shape());
    CHECK(s.to_vector() == want);
  }
  // diag: (2, 3) -> (2, 3, 3), and back.
  const fx::tensor<T> v = test::random_tensor<T>({2, 3}, 8, -9, 9);
  const auto vv = v.to_vector();
  std::vector<T> want;
  for (fx::index_t b = 0; b < 2; ++b)
    for (fx::index_t i = 0; i < 3; ++i)
      for (fx::index_t j = 0; j < 3; ++j) want.push_back(i == j ? vv[static_cast<std::size_t>(b * 3 + i)] : T(0));
  const fx::tensor<T> md = fx::linalg::diag(v);
  CHECK(md.shape() == fx::shape{2, 3, 3});
  CHECK(md.to_vector() == want);
  CHECK(fx::tensor<T>(fx::linalg::diag_part(md)).to_vector() == vv);
}

TEST_CASE("linalg: TensorFlow's examples; expressions and variables; one matrix; empty extents") {
  // tf.linalg.band_part's documented example.
  const fx::tensor<float> x = {{0, 1, 2, 3}, {-1, 0, 1, 2}, {-2, -1, 0, 1}, {-3, -2, -1, 0}};
  CHECK(fx::tensor<float>(fx::linalg::band_part(x, 1, -1)).to_vector() ==
        std::vector<float>{0, 1, 2, 3, -1, 0, 1, 2, 0, -1, 0, 1, 0, 0, -1, 0});
  CHECK(fx::tensor<float>(fx::linalg::band_part(x, 2, 1)).to_vector() ==
        std::vector<float>{0, 1, 0, 0, -1, 0, 1, 0, -2, -1, 0, 1, 0, -2, -1, 0});
  // Of an expression, inside a statement: a causal mask and a scaled trace.
  const fx::tensor<float> ones = fx::ones<float>({3, 3});
  const fx::tensor<float> mask = fx::linalg::band_part(ones * 2.f, -1, 0) - 1.f;
  CHECK(mask.to_vector() == std::vector<float>{1, -1, -1, 1, 1, -1, 1, 1, 1});
  CHECK(fx::tensor<float>(fx::linalg::trace(x * x) + 1.f).item() == 1.f);
  fx::variable<double> w{fx::tensor<double>{{1, 2}, {3, 4}}, "w"};
  CHECK(fx::tensor<double>(fx::linalg::trace(w)).item() == 5.0);
  CHECK(fx::tensor<double>(fx::linalg::diag_part(w)).to_vector() == std::vector<double>{1, 4});
  CHECK(fx::tensor<double>(fx::linalg::set_diag(w, fx::tensor<double>{0, 0})).to_vector() ==
        std::vector<double>{0, 2, 3, 0});
  // Empty batches and matrices.
  CHECK(fx::tensor<float>(fx::linalg::trace(fx::zeros<float>({0, 3, 3}))).shape() == fx::shape{0});
  CHECK(fx::tensor<float>(fx::linalg::diag_part(fx::zeros<float>({2, 0, 3}))).shape() == fx::shape{2, 0});
  CHECK(fx::tensor<float>(fx::linalg::trace(fx::zeros<float>({2, 3, 0}))).to_vector() == std::vector<float>{0, 0});
}

TEST_CASE_TEMPLATE("linalg: l2_normalize along each axis against a naive loop; a zero vector stays zero", T, float,
                   double) {
  fx::tensor<T> x = test::random_tensor<T>({3, 4}, 9);
  x.mutable_data()[4] = x.mutable_data()[5] = x.mutable_data()[6] = x.mutable_data()[7] = T(0);  // row 1: zeros
  const auto xv = x.to_vector();
  for (int axis : {0, 1, -1}) {
    CAPTURE(axis);
    const int a = axis < 0 ? axis + 2 : axis;
    std::vector<T> want(xv.size());
    for (fx::index_t i = 0; i < 3; ++i)
      for (fx::index_t j = 0; j < 4; ++j) {
        double sum = 0;
        for (fx::index_t k = 0; k < (a == 0 ? 3 : 4); ++k) {
          const double v = xv[static_cast<std::size_t>(a == 0 ? k * 4 + j : i * 4 + k)];
          sum += v * v;
        }
        want[static_cast<std::size_t>(i * 4 + j)] =
            static_cast<T>(xv[static_cast<std::size_t>(i * 4 + j)] / std::sqrt(std::max(sum, 1e-12)));
      }
    const auto got = fx::tensor<T>(fx::linalg::l2_normalize(x, axis)).to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-6));
  }
  const auto rows = fx::tensor<T>(fx::linalg::l2_normalize(x)).to_vector();
  CHECK(std::vector<T>(rows.begin() + 4, rows.begin() + 8) == std::vector<T>(4, T(0)));
  // A larger epsilon floors the norm: tf's epsilon is on the squared sum.
  const fx::tensor<T> small = {{T(0.001), T(0)}};
  CHECK(fx::tensor<T>(fx::linalg::l2_normalize(small, -1, 1e-4)).to_vector()[0] == doctest::Approx(0.1));
}

TEST_CASE("linalg: errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS((void)fx::linalg::l2_normalize(fx::zeros<float>({2, 3}), 2),
                       "linalg::l2_normalize: axis 2 is out of range [-2, 2) for rank 2", fx::out_of_range);
  CHECK_THROWS_WITH_AS((void)fx::linalg::l2_normalize(fx::zeros<float>({2, 3}), -1, 0.0),
                       "linalg::l2_normalize: epsilon = 0.000000 must be positive and finite", fx::invalid_argument);
  const fx::tensor<float> v = {1.f, 2.f, 3.f};
  CHECK_THROWS_WITH_AS((void)fx::linalg::band_part(v, 0, 0),
                       "linalg::band_part: expects a batch of matrices (..., M, N) of rank 2 or more, got shape (3,)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS((void)fx::linalg::diag_part(v),
                       "linalg::diag_part: expects a batch of matrices (..., M, N) of rank 2 or more, got shape (3,)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS((void)fx::linalg::trace(fx::tensor<float>(2.f)),
                       "linalg::trace: expects a batch of matrices (..., M, N) of rank 2 or more, got shape ()",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS((void)fx::linalg::diag(fx::tensor<float>(2.f)),
                       "linalg::diag: expects a batch of diagonals (..., K) of rank 1 or more, got shape ()",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS((void)fx::linalg::set_diag(fx::zeros<float>({2, 3, 4}), fx::zeros<float>({2, 4})),
                       "linalg::set_diag: the diagonal of matrices (2, 3, 4) must have shape (2, 3), got (2, 4)",
                       fx::shape_error);
}
