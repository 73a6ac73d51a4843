// nn::detail::channel_norm, the cpu kernel under batch_norm's training pass and group_norm: its
// statistics, output and backward pass against naive loops in double (the formulas written out),
// over several chunks of an example, channels past the last full vector, one group a channel
// (batch_norm) and groups of several, with and without the relu after it fused; the same bits for
// one thread and two; no positions.
// (The layers' gradients against finite differences: batch_norm_backward.test.cpp and
// group_norm.test.cpp.)
#include <fluxion/nn/channel_norm.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace fx = fluxion;
using fx::index_t;

namespace {

struct reference {
  std::vector<double> mean, variance, y, dx, dgamma, dbeta;
};

/// Each (example, group)'s statistics, y, and the backward pass, with the textbook formulas over
/// x (batch, positions, channels) in double, two passes each; with a relu mask, y = max(z, 0) of
/// the normalization's z, and the gradient reaching z is dy where the mask is set, else 0 (the
/// mask of the kernel's output, y > 0: a float z within rounding of 0 may take the other side
/// of it in double).
reference naive(const std::vector<double>& x, const std::vector<double>& dy, const std::vector<double>& gamma,
                const std::vector<double>& beta, index_t batch, index_t positions, index_t channels, index_t groups,
                double eps, const std::vector<bool>* relu_mask) {
  const index_t pg = channels / groups;
  const double m = static_cast<double>(positions * pg);
  reference r;
  r.y.assign(x.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dgamma.assign(static_cast<std::size_t>(channels), 0.0);
  r.dbeta.assign(static_cast<std::size_t>(channels), 0.0);
  auto at = [&](index_t b, index_t p, index_t c) { return static_cast<std::size_t>((b * positions + p) * channels + c); };
  for (index_t b = 0; b < batch; ++b)
    for (index_t g = 0; g < groups; ++g) {
      double mu = 0.0, var = 0.0;
      for (index_t p = 0; p < positions; ++p)
        for (index_t c = g * pg; c < (g + 1) * pg; ++c) mu += x[at(b, p, c)];
      mu /= m;
      for (index_t p = 0; p < positions; ++p)
        for (index_t c = g * pg; c < (g + 1) * pg; ++c) var += (x[at(b, p, c)] - mu) * (x[at(b, p, c)] - mu);
      var /= m;
      r.mean.push_back(mu);
      r.variance.push_back(var);
      const double rstd = 1.0 / std::sqrt(var + eps);
      double sum_gdy = 0.0, sum_gdy_xhat = 0.0;
      std::vector<double> dz(x.size(), 0.0);
      for (index_t p = 0; p < positions; ++p)
        for (index_t c = g * pg; c < (g + 1) * pg; ++c) {
          const std::size_t i = at(b, p, c);
          const double xhat = (x[i] - mu) * rstd;
          const double z = xhat * gamma[static_cast<std::size_t>(c)] + beta[static_cast<std::size_t>(c)];
          r.y[i] = relu_mask ? std::max(z, 0.0) : z;
          dz[i] = relu_mask && !(*relu_mask)[i] ? 0.0 : dy[i];
          sum_gdy += gamma[static_cast<std::size_t>(c)] * dz[i];
          sum_gdy_xhat += gamma[static_cast<std::size_t>(c)] * dz[i] * xhat;
          r.dgamma[static_cast<std::size_t>(c)] += dz[i] * xhat;
          r.dbeta[static_cast<std::size_t>(c)] += dz[i];
        }
      for (index_t p = 0; p < positions; ++p)
        for (index_t c = g * pg; c < (g + 1) * pg; ++c) {
          const std::size_t i = at(b, p, c);
          const double xhat = (x[i] - mu) * rstd;
          r.dx[i] = rstd * (gamma[static_cast<std::size_t>(c)] * dz[i] - sum_gdy / m - xhat * sum_gdy_xhat / m);
        }
    }
  return r;
}

template <class T>
struct run {
  std::vector<T> mean, variance, rstd, y, dx, dgamma, dbeta;
};

template <bool Relu, class T>
run<T> kernel(const fx::nn::detail::channel_norm<T>& k, const std::vector<T>& x, const std::vector<T>& dy,
              const std::vector<T>& gamma, const std::vector<T>& beta, T eps) {
  const std::size_t stats = static_cast<std::size_t>(k.batch * k.groups), c = static_cast<std::size_t>(k.channels);
  run<T> r{std::vector<T>(stats), std::vector<T>(stats), std::vector<T>(stats), std::vector<T>(x.size()),
           std::vector<T>(x.size()), std::vector<T>(c), std::vector<T>(c)};
  k.statistics(x.data(), r.mean.data(), r.variance.data());
  for (std::size_t i = 0; i < stats; ++i) r.rstd[i] = T(1) / std::sqrt(r.variance[i] + eps);
  k.template normalize<Relu>(x.data(), gamma.data(), beta.data(), r.mean.data(), r.rstd.data(), r.y.data());
  k.template backward<Relu>(x.data(), dy.data(), gamma.data(), beta.data(), r.mean.data(), r.rstd.data(),
                            r.dx.data(), r.dgamma.data(), r.dbeta.data());
  return r;
}

/// Every element of a within tol * max(1, |b|) of b.
template <class T>
void check_close(const std::string& what, const std::vector<T>& a, const std::vector<double>& b, double tol) {
  CAPTURE(what);
  REQUIRE(a.size() == b.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / std::max(1.0, std::abs(b[i])));
  CHECK(worst <= tol);
}

struct case_shape {
  index_t batch, positions, channels, groups;
};

template <class T, bool Relu>
void check_against_naive(double tol) {
  // (3, 10000, 4) in 2 groups: 4096 positions a chunk, three chunks an example, the last short;
  // (1, 37, 19), a group a channel (batch_norm's), channels past the last full vector; (2, 5, 40)
  // in 8 groups of 5; (1, 3000, 33), a group a channel, over one chunk and a short one; (2, 1001,
  // 40) in 8 groups: chunks of 409, 409 and 183 positions, each an odd count over several of the
  // statistics' and the backward sums' blocks of positions.
  std::mt19937 rng(11);
  std::normal_distribution<double> normal(0.0, 1.0);
  for (const case_shape s : {case_shape{3, 10000, 4, 2}, case_shape{1, 37, 19, 19}, case_shape{2, 5, 40, 8},
                             case_shape{1, 3000, 33, 33}, case_shape{2, 1001, 40, 8}}) {
    CAPTURE(s.batch);
    CAPTURE(s.positions);
    CAPTURE(s.channels);
    CAPTURE(s.groups);
    const fx::nn::detail::channel_norm<T> k{s.batch, s.positions, s.channels, s.groups};
    const std::size_t n = static_cast<std::size_t>(s.batch * s.positions * s.channels);
    // x far from 0 (mean 100, deviation 2): a float sum of squares without centering loses the
    // variance's digits; the kernel centers each chunk on its own mean.
    std::vector<T> x(n), dy(n), gamma(static_cast<std::size_t>(s.channels)), beta(gamma.size());
    for (T& v : x) v = static_cast<T>(100.0 + 2.0 * normal(rng));
    for (T& v : dy) v = static_cast<T>(normal(rng));
    for (T& v : gamma) v = static_cast<T>(1.0 + 0.5 * normal(rng));
    for (T& v : beta) v = static_cast<T>(normal(rng));
    const T eps = T(1e-3);
    auto wide = [](const std::vector<T>& v) { return std::vector<double>(v.begin(), v.end()); };
    const run<T> got = kernel<Relu>(k, x, dy, gamma, beta, eps);
    std::vector<bool> mask(n);
    for (std::size_t i = 0; i < n; ++i) mask[i] = got.y[i] > T(0);
    const reference want = naive(wide(x), wide(dy), wide(gamma), wide(beta), s.batch, s.positions, s.channels,
                                 s.groups, static_cast<double>(eps), Relu ? &mask : nullptr);
    if (Relu) {  // the mask is relu's: about half the outputs are positive
      const auto positive = std::count(mask.begin(), mask.end(), true);
      CHECK(positive > static_cast<std::ptrdiff_t>(n / 4));
      CHECK(positive < static_cast<std::ptrdiff_t>(3 * n / 4));
    }
    check_close("mean", got.mean, want.mean, tol);
    check_close("variance", got.variance, want.variance, tol);
    check_close("y", got.y, want.y, 10 * tol);
    check_close("dx", got.dx, want.dx, 10 * tol);
    check_close("dgamma", got.dgamma, want.dgamma, 100 * tol);
    check_close("dbeta", got.dbeta, want.dbeta, 100 * tol);

    // The same bits with one thread as with two: chunks depend on the shape only.
    const int threads = fx::get_num_threads();
    fx::set_num_threads(threads == 1 ? 2 : 1);
    const run<T> other = kernel<Relu>(k, x, dy, gamma, beta, eps);
    fx::set_num_threads(threads);
    CHECK(other.mean == got.mean);
    CHECK(other.variance == got.variance);
    CHECK(other.y == got.y);
    CHECK(other.dx == got.dx);
    CHECK(other.dgamma == got.dgamma);
    CHECK(other.dbeta == got.dbeta);
  }
}

}  // namespace

TEST_CASE("channel_norm: statistics, output and backward pass against naive loops, double") {
  check_against_naive<double, false>(1e-11);
}

TEST_CASE("channel_norm: statistics, output and backward pass against naive loops, float") {
  check_against_naive<float, false>(2e-5);
}

TEST_CASE("channel_norm: with the relu after it fused, against naive loops (relu's mask on the gradient)") {
  check_against_naive<double, true>(1e-11);
  check_against_naive<float, true>(2e-5);
}

TEST_CASE("channel_norm: chunks of whole positions of one example, about 16384 values each") {
  const fx::nn::detail::channel_norm<float> bn{1, 50176, 32, 32};  // batch_norm over (64, 28, 28, 32)
  CHECK(bn.chunk_rows() == 512);
  CHECK(bn.chunks() == 98);
  const fx::nn::detail::channel_norm<float> gn{16, 1024, 128, 32};  // group_norm<32> over (16, 32, 32, 128)
  CHECK(gn.chunk_rows() == 128);
  CHECK(gn.chunks() == 16 * 8);
  const fx::nn::detail::channel_norm<float> wide{2, 3, 40000, 4};  // a position over 16384 values
  CHECK(wide.chunk_rows() == 1);
  CHECK(wide.chunks() == 6);
}

TEST_CASE("channel_norm: no positions: NaN statistics, zero gradients for gamma and beta") {
  const fx::nn::detail::channel_norm<double> k{2, 0, 3, 1};
  std::vector<double> mean(2, 0.0), variance(2, 0.0), dgamma(3, 7.0), dbeta(3, 7.0);
  const std::vector<double> gamma(3, 1.0);
  k.statistics(nullptr, mean.data(), variance.data());
  CHECK(std::isnan(mean[0]));
  CHECK(std::isnan(variance[1]));
  const std::vector<double> rstd(2, NAN);  // 1 / sqrt(NaN + eps)
  k.backward(nullptr, nullptr, gamma.data(), gamma.data(), mean.data(), rstd.data(), nullptr, dgamma.data(),
             dbeta.data());
  CHECK(dgamma == std::vector<double>(3, 0.0));
  CHECK(dbeta == std::vector<double>(3, 0.0));
}
