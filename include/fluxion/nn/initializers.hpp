// Keras's weight initializers that are more than one random draw.
//
//   fx::random::generator gen{42};
//   fx::tensor<float> r = fx::nn::initializers::orthogonal<float>({8, 32}, gen);
//   // the rows of r are orthonormal: r r^T = I (8 x 8)
//
// orthogonal is Keras's Orthogonal (the LSTM's recurrent kernel): a normal matrix of shape
// (max(rows, cols), min(rows, cols)), its reduced QR factorization, Q's columns multiplied by the
// signs of R's diagonal (which makes the factorization unique, so the result does not depend on how
// the QR is computed), transposed when rows < cols, times `gain`. Rows are the product of every
// extent but the last. Glorot's uniform initializer, the default kernel of dense and conv2d, is
// fluxion::nn::detail::glorot_uniform (nn/module.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/random.hpp"
#include "../tensor/tensor.hpp"

namespace fluxion::nn::initializers {

namespace detail {

/// The reduced QR factorization of the row-major m x n matrix `a` (m >= n) by Householder
/// reflections, in double: Q (m x n, row-major) with its columns multiplied by sign(diag(R)).
inline std::vector<double> sign_corrected_q(std::vector<double> a, index_t m, index_t n) {
  auto at = [&](index_t i, index_t j) -> double& { return a[static_cast<std::size_t>(i * n + j)]; };
  std::vector<std::vector<double>> reflectors;  // v_k, of length m - k, with |v_k| = 1
  std::vector<double> diag(static_cast<std::size_t>(n));
  for (index_t k = 0; k < n; ++k) {
    double norm = 0;
    for (index_t i = k; i < m; ++i) norm += at(i, k) * at(i, k);
    norm = std::sqrt(norm);
    // Reflect column k onto -sign(a_kk) |a_k| e_k, the choice without cancellation.
    const double alpha = at(k, k) >= 0 ? -norm : norm;
    std::vector<double> v(static_cast<std::size_t>(m - k));
    for (index_t i = k; i < m; ++i) v[static_cast<std::size_t>(i - k)] = at(i, k);
    v[0] -= alpha;
    double vn = 0;
    for (double e : v) vn += e * e;
    vn = std::sqrt(vn);
    if (vn > 0)
      for (double& e : v) e /= vn;
    for (index_t j = k; j < n; ++j) {  // A <- (I - 2 v v^T) A on rows k..m
      double dot = 0;
      for (index_t i = k; i < m; ++i) dot += v[static_cast<std::size_t>(i - k)] * at(i, j);
      for (index_t i = k; i < m; ++i) at(i, j) -= 2 * dot * v[static_cast<std::size_t>(i - k)];
    }
    diag[static_cast<std::size_t>(k)] = at(k, k);
    reflectors.push_back(std::move(v));
  }
  // Q = H_0 H_1 ... H_{n-1} applied to the first n columns of the identity.
  std::vector<double> q(static_cast<std::size_t>(m * n), 0.0);
  auto qat = [&](index_t i, index_t j) -> double& { return q[static_cast<std::size_t>(i * n + j)]; };
  for (index_t j = 0; j < n; ++j) qat(j, j) = 1;
  for (index_t k = n - 1; k >= 0; --k) {
    const auto& v = reflectors[static_cast<std::size_t>(k)];
    for (index_t j = 0; j < n; ++j) {
      double dot = 0;
      for (index_t i = k; i < m; ++i) dot += v[static_cast<std::size_t>(i - k)] * qat(i, j);
      for (index_t i = k; i < m; ++i) qat(i, j) -= 2 * dot * v[static_cast<std::size_t>(i - k)];
    }
  }
  for (index_t j = 0; j < n; ++j)
    if (diag[static_cast<std::size_t>(j)] < 0)
      for (index_t i = 0; i < m; ++i) qat(i, j) = -qat(i, j);
  return q;
}

}  // namespace detail

/// Keras's Orthogonal initializer: orthonormal rows or columns (whichever are fewer), times gain.
template <class T>
tensor<T> orthogonal(const fluxion::shape& s, random::generator& gen, double gain = 1.0) {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::initializers::orthogonal: T must be a floating-point type.");
  if (s.rank() < 2)
    throw invalid_argument("orthogonal: the shape must have at least two axes, got " + to_string(s));
  const index_t cols = s[s.rank() - 1];
  const index_t rows = s.size() / std::max<index_t>(cols, 1);
  if (rows == 0 || cols == 0) return tensor<T>(s);
  const index_t m = std::max(rows, cols), n = std::min(rows, cols);
  const std::vector<double> q = detail::sign_corrected_q(random::normal<double>({m, n}, gen).to_vector(), m, n);
  tensor<T> out(s);
  T* p = out.mutable_data();
  for (index_t r = 0; r < rows; ++r)
    for (index_t c = 0; c < cols; ++c) {
      // Q is (rows, cols) when rows >= cols; otherwise the result is Q^T, Q being (cols, rows).
      const double v = rows >= cols ? q[static_cast<std::size_t>(r * n + c)] : q[static_cast<std::size_t>(c * n + r)];
      p[r * cols + c] = static_cast<T>(gain * v);
    }
  return out;
}

}  // namespace fluxion::nn::initializers
