// Keras's weight initializers, as values a layer's options take, and the orthogonal draw.
//
//   fx::nn::dense<256> fc{{.kernel_initializer = fx::nn::initializers::he_normal()}};
//   fx::nn::conv2d<32, 3, fx::nn::same> conv{{.use_bias = false,
//                                             .kernel_initializer = fx::nn::initializers::lecun_normal()}};
//   fx::random::generator gen{42};
//   fx::tensor<float> w = fx::nn::initializers::he_uniform()(fx::shape{784, 256}, gen);  // drawn alone
//   fx::tensor<float> r = fx::nn::initializers::orthogonal<float>({8, 32}, gen);
//   // the rows of r are orthonormal: r r^T = I (8 x 8)
//
// The set and the defaults are Keras 3's: zeros, ones, constant(0), random_uniform(-0.05, 0.05),
// random_normal(0, 0.05), truncated_normal(0, 0.05) (re-drawn beyond 2 standard deviations),
// identity(1) (rank 2), orthogonal(1), and variance_scaling(scale, mode, distribution) with its
// named cases glorot_uniform (the default kernel), glorot_normal, he_uniform, he_normal,
// lecun_uniform and lecun_normal. The fans are Keras's, from the shape: the last axis is fan_out's,
// the one before fan_in's, and the others (a kernel's window) multiply both; a vector's fan_in and
// fan_out are its length. variance_scaling's scale is divided by max(1, fan); its truncated normal
// has standard deviation sqrt(scale) / 0.8796 (the standard deviation of a unit normal truncated
// at 2), its normal sqrt(scale), its uniform the limit sqrt(3 scale). Values are drawn on the host
// in the element type, from the generator the model is built with (nn::sequential(gen, ...)).
//
// orthogonal is Keras's Orthogonal (the LSTM's recurrent kernel): a normal matrix of shape
// (max(rows, cols), min(rows, cols)), its reduced QR factorization, Q's columns multiplied by the
// signs of R's diagonal (which makes the factorization unique, so the result does not depend on how
// the QR is computed), transposed when rows < cols, times `gain`. Rows are the product of every
// extent but the last.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../tensor/creation.hpp"
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

/// variance_scaling's arguments, by Keras's names: which fan divides the scale, and the draw.
enum class fan_mode : unsigned char { fan_in, fan_out, fan_avg };
enum class distribution : unsigned char { truncated_normal, untruncated_normal, uniform };

}  // namespace fluxion::nn::initializers

namespace fluxion::nn {

/// One of Keras's initializers with its arguments: a value (copied into a layer's options) that
/// draws a tensor of a given shape from a generator. Make one with the functions of
/// fx::nn::initializers (he_normal(), constant(0.1) ...).
class initializer {
 public:
  enum class kind : unsigned char {
    zeros, ones, constant, random_uniform, random_normal, truncated_normal, identity, orthogonal, variance_scaling
  };

  constexpr initializer() = default;
  constexpr initializer(kind k, double a, double b, initializers::fan_mode mode = initializers::fan_mode::fan_in,
                        initializers::distribution dist = initializers::distribution::uniform, const char* name = "")
      : m_kind(k), m_a(a), m_b(b), m_mode(mode), m_distribution(dist), m_name(name) {}

  /// Keras's string identifiers, with their defaults: `.kernel_initializer = "he_normal"` (also
  /// Keras's class names, "HeNormal"); an unknown name throws fluxion::invalid_argument listing them.
  initializer(const char* keras_name);  // NOLINT: implicit, as Keras takes the name for the object

  /// A tensor of shape s, of element type T on the cpu, drawn from gen (zeros, ones, constant and
  /// identity draw nothing).
  template <class T>
  tensor<T> operator()(const fluxion::shape& s, random::generator& gen) const {
    static_assert(std::is_floating_point_v<T>, "fluxion::nn::initializer: T must be float or double.");
    switch (m_kind) {
      case kind::zeros: return zeros<T>(s);
      case kind::ones: return ones<T>(s);
      case kind::constant: return full<T>(s, static_cast<T>(m_a));
      case kind::random_uniform: return random::uniform<T>(s, gen, static_cast<T>(m_a), static_cast<T>(m_b));
      case kind::random_normal: return random::normal<T>(s, gen, static_cast<T>(m_a), static_cast<T>(m_b));
      case kind::truncated_normal: return random::truncated_normal<T>(s, gen, static_cast<T>(m_a), static_cast<T>(m_b));
      case kind::identity: {
        if (s.rank() != 2)
          throw invalid_argument("initializers::identity: the shape must have two axes, got " + to_string(s));
        tensor<T> out = zeros<T>(s);
        for (index_t i = 0; i < std::min(s[0], s[1]); ++i) out.mutable_data()[i * s[1] + i] = static_cast<T>(m_a);
        return out;
      }
      case kind::orthogonal: return initializers::orthogonal<T>(s, gen, m_a);
      case kind::variance_scaling: break;
    }
    return variance_scaled<T>(s, gen);
  }

  /// Keras's name of the initializer ("he_normal", "constant" ...).
  const char* name() const noexcept { return m_name; }
  kind which() const noexcept { return m_kind; }
  /// The arguments: variance_scaling's scale; random_uniform's minval and maxval; random_normal's
  /// and truncated_normal's mean and standard deviation; constant's value; identity's and
  /// orthogonal's gain.
  double first() const noexcept { return m_a; }
  double second() const noexcept { return m_b; }

  /// Keras's fans of a weight of shape s: (fan_in, fan_out).
  static std::pair<double, double> fans(const fluxion::shape& s) {
    if (s.rank() == 0) return {1, 1};
    if (s.rank() == 1) return {double(s[0]), double(s[0])};
    double window = 1;
    for (int d = 0; d + 2 < s.rank(); ++d) window *= static_cast<double>(s[d]);
    return {double(s[s.rank() - 2]) * window, double(s[s.rank() - 1]) * window};
  }

 private:
  template <class T>
  tensor<T> variance_scaled(const fluxion::shape& s, random::generator& gen) const {
    using initializers::distribution;
    using initializers::fan_mode;
    const auto [fan_in, fan_out] = fans(s);
    const double fan = m_mode == fan_mode::fan_in ? fan_in : m_mode == fan_mode::fan_out ? fan_out : (fan_in + fan_out) / 2;
    const double scale = m_a / std::max(1.0, fan);
    switch (m_distribution) {
      case distribution::uniform: {
        // 3 scale / fan in one division: glorot_uniform's limit is sqrt(6 / (fan_in + fan_out)) to the bit.
        const T limit = static_cast<T>(std::sqrt(3 * m_a / std::max(1.0, fan)));
        return random::uniform<T>(s, gen, -limit, limit);
      }
      case distribution::untruncated_normal:
        return random::normal<T>(s, gen, T(0), static_cast<T>(std::sqrt(scale)));
      case distribution::truncated_normal: break;
    }
    // The standard deviation of a unit normal truncated at +-2 (Keras's constant).
    return random::truncated_normal<T>(s, gen, T(0), static_cast<T>(std::sqrt(scale) / 0.87962566103423978));
  }

  kind m_kind = kind::variance_scaling;
  double m_a = 1, m_b = 0;  // the arguments: scale; minval, maxval; mean, stddev; the constant; gain
  initializers::fan_mode m_mode = initializers::fan_mode::fan_avg;
  initializers::distribution m_distribution = initializers::distribution::uniform;
  const char* m_name = "glorot_uniform";
};

namespace initializers {

namespace detail {
inline void check_initializer(bool ok, const char* name, const std::string& what) {
  if (!ok) throw invalid_argument(std::string("initializers::") + name + ": " + what);
}
inline std::string number(double v) { return fluxion::detail::value_text(v); }
}  // namespace detail

/// Keras's VarianceScaling: scale / max(1, fan) as the variance, fan by `mode`, drawn by `dist`.
inline initializer variance_scaling(double scale = 1.0, fan_mode mode = fan_mode::fan_in,
                                    distribution dist = distribution::truncated_normal) {
  detail::check_initializer(scale > 0 && std::isfinite(scale), "variance_scaling",
                            "scale = " + detail::number(scale) + " must be positive and finite");
  return {initializer::kind::variance_scaling, scale, 0, mode, dist, "variance_scaling"};
}
/// Glorot (Xavier) uniform, the default kernel of dense and the convolutions: U(-l, l) with
/// l = sqrt(6 / (fan_in + fan_out)).
inline initializer glorot_uniform() {
  return {initializer::kind::variance_scaling, 1, 0, fan_mode::fan_avg, distribution::uniform, "glorot_uniform"};
}
inline initializer glorot_normal() {
  return {initializer::kind::variance_scaling, 1, 0, fan_mode::fan_avg, distribution::truncated_normal, "glorot_normal"};
}
/// He (Kaiming): variance 2 / fan_in, for layers followed by relu.
inline initializer he_normal() {
  return {initializer::kind::variance_scaling, 2, 0, fan_mode::fan_in, distribution::truncated_normal, "he_normal"};
}
inline initializer he_uniform() {
  return {initializer::kind::variance_scaling, 2, 0, fan_mode::fan_in, distribution::uniform, "he_uniform"};
}
/// LeCun: variance 1 / fan_in, for selu.
inline initializer lecun_normal() {
  return {initializer::kind::variance_scaling, 1, 0, fan_mode::fan_in, distribution::truncated_normal, "lecun_normal"};
}
inline initializer lecun_uniform() {
  return {initializer::kind::variance_scaling, 1, 0, fan_mode::fan_in, distribution::uniform, "lecun_uniform"};
}
inline initializer zeros() { return {initializer::kind::zeros, 0, 0, {}, {}, "zeros"}; }
inline initializer ones() { return {initializer::kind::ones, 1, 0, {}, {}, "ones"}; }
inline initializer constant(double value = 0) {
  detail::check_initializer(std::isfinite(value), "constant", "value = " + detail::number(value) + " must be finite");
  return {initializer::kind::constant, value, 0, {}, {}, "constant"};
}
inline initializer random_uniform(double minval = -0.05, double maxval = 0.05) {
  detail::check_initializer(minval < maxval && std::isfinite(maxval - minval), "random_uniform",
                            "minval = " + detail::number(minval) + " must be less than maxval = " +
                                detail::number(maxval) + ", both finite");
  return {initializer::kind::random_uniform, minval, maxval, {}, {}, "random_uniform"};
}
inline initializer random_normal(double mean = 0, double stddev = 0.05) {
  detail::check_initializer(std::isfinite(mean) && stddev > 0 && std::isfinite(stddev), "random_normal",
                            "mean = " + detail::number(mean) + ", stddev = " + detail::number(stddev) +
                                ": the mean must be finite, the standard deviation positive and finite");
  return {initializer::kind::random_normal, mean, stddev, {}, {}, "random_normal"};
}
inline initializer truncated_normal(double mean = 0, double stddev = 0.05) {
  detail::check_initializer(std::isfinite(mean) && stddev > 0 && std::isfinite(stddev), "truncated_normal",
                            "mean = " + detail::number(mean) + ", stddev = " + detail::number(stddev) +
                                ": the mean must be finite, the standard deviation positive and finite");
  return {initializer::kind::truncated_normal, mean, stddev, {}, {}, "truncated_normal"};
}
/// Keras's Identity: gain on the diagonal of a matrix (rank 2 only), zeros elsewhere.
inline initializer identity(double gain = 1.0) {
  detail::check_initializer(std::isfinite(gain), "identity", "gain = " + detail::number(gain) + " must be finite");
  return {initializer::kind::identity, gain, 0, {}, {}, "identity"};
}
/// Keras's Orthogonal, as a value (the function template above draws it directly).
inline initializer orthogonal(double gain = 1.0) {
  detail::check_initializer(std::isfinite(gain), "orthogonal", "gain = " + detail::number(gain) + " must be finite");
  return {initializer::kind::orthogonal, gain, 0, {}, {}, "orthogonal"};
}

}  // namespace initializers

inline initializer::initializer(const char* keras_name) {
  const std::string given = keras_name ? keras_name : "";
  // Keras's identifiers, snake_case and CamelCase, and the factories that make them.
  static const std::pair<const char*, initializer (*)()> names[] = {
      {"glorot_uniform", initializers::glorot_uniform}, {"GlorotUniform", initializers::glorot_uniform},
      {"glorot_normal", initializers::glorot_normal},   {"GlorotNormal", initializers::glorot_normal},
      {"he_uniform", initializers::he_uniform},         {"HeUniform", initializers::he_uniform},
      {"he_normal", initializers::he_normal},           {"HeNormal", initializers::he_normal},
      {"lecun_uniform", initializers::lecun_uniform},   {"LecunUniform", initializers::lecun_uniform},
      {"lecun_normal", initializers::lecun_normal},     {"LecunNormal", initializers::lecun_normal},
      {"zeros", initializers::zeros},                   {"Zeros", initializers::zeros},
      {"ones", initializers::ones},                     {"Ones", initializers::ones},
      {"constant", [] { return initializers::constant(); }},
      {"Constant", [] { return initializers::constant(); }},
      {"random_uniform", [] { return initializers::random_uniform(); }},
      {"RandomUniform", [] { return initializers::random_uniform(); }},
      {"random_normal", [] { return initializers::random_normal(); }},
      {"RandomNormal", [] { return initializers::random_normal(); }},
      {"truncated_normal", [] { return initializers::truncated_normal(); }},
      {"TruncatedNormal", [] { return initializers::truncated_normal(); }},
      {"variance_scaling", [] { return initializers::variance_scaling(); }},
      {"VarianceScaling", [] { return initializers::variance_scaling(); }},
      {"identity", [] { return initializers::identity(); }},
      {"Identity", [] { return initializers::identity(); }},
      {"orthogonal", [] { return initializers::orthogonal(); }},
      {"Orthogonal", [] { return initializers::orthogonal(); }},
  };
  for (const auto& [name, make] : names)
    if (given == name) {
      *this = make();
      return;
    }
  std::string known;
  for (std::size_t i = 0; i < std::size(names); i += 2) known += (i ? ", " : "") + std::string(names[i].first);
  throw invalid_argument("initializer: unknown name '" + given + "'; Keras's names are " + known +
                         " (or their class names, \"HeNormal\"); for other arguments call the function, "
                         "fluxion::nn::initializers::random_normal(0, 0.01)");
}

}  // namespace fluxion::nn
