// Keras's regression, binary, top-k, precision and recall metrics against naive loops over the same
// numbers (several updates, per-example weights, ties at the k-th score, labels that are not
// classes), the fit interface (update_state) agreeing with update, and the errors that name the
// metric and the shapes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <fluxion/metrics.hpp>

namespace metrics_keras_test {

namespace fx = fluxion;
namespace metrics = fx::metrics;

namespace {

/// Deterministic values in [lo, hi).
std::vector<double> values(std::size_t n, std::uint64_t seed, double lo, double hi) {
  std::vector<double> v(n);
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

struct batch {
  std::vector<double> y, p, w;  // w per example
  fx::index_t rows, cols;
};

std::vector<batch> batches(fx::index_t cols, double lo, double hi, bool binary_labels) {
  std::vector<batch> out;
  for (std::uint64_t b = 0; b < 3; ++b) {
    const fx::index_t rows = 3 + static_cast<fx::index_t>(b);
    const auto n = static_cast<std::size_t>(rows * cols);
    batch x{values(n, 10 + b, lo, hi), values(n, 20 + b, lo, hi), values(static_cast<std::size_t>(rows), 30 + b, 0, 2), rows, cols};
    if (binary_labels)
      for (auto& y : x.y) y = y > (lo + hi) / 2 ? 1 : 0;
    out.push_back(x);
  }
  return out;
}

/// The weighted mean over every element of f(y, p), each weighted by its example's weight (or 1).
template <class F>
double reference_mean(const std::vector<batch>& bs, bool weighted, F f) {
  double total = 0, count = 0;
  for (const auto& b : bs)
    for (fx::index_t r = 0; r < b.rows; ++r)
      for (fx::index_t c = 0; c < b.cols; ++c) {
        const auto i = static_cast<std::size_t>(r * b.cols + c);
        const double w = weighted ? b.w[static_cast<std::size_t>(r)] : 1.0;
        total += w * f(b.y[i], b.p[i]);
        count += w;
      }
  return count == 0 ? 0 : total / count;
}

/// Runs m over the batches, through update() or through the fit interface (update_state).
template <class M>
double run(M& m, const std::vector<batch>& bs, bool weighted, bool interface) {
  m.reset();
  for (const auto& b : bs) {
    const auto y = fx::from_vector(b.y, {b.rows, b.cols});
    const auto p = fx::from_vector(std::vector<float>(b.p.begin(), b.p.end()), {b.rows, b.cols});
    const auto w = fx::from_vector(b.w, {b.rows});
    if (interface) {
      metrics::metric& as_metric = m;
      const fx::tensor<double> pd(fx::cast<double>(p));
      as_metric.update_state(y, pd, weighted ? &w : nullptr);
    } else if (weighted) {
      m.update(y, p, w);
    } else {
      m.update(y, p);
    }
  }
  return m.result();
}

}  // namespace

TEST_CASE("metrics: Keras's mean squared, absolute, percentage and root mean squared errors") {
  const auto bs = batches(4, -2, 2, false);
  const auto f32 = [](double x) { return static_cast<double>(static_cast<float>(x)); };  // y_pred is float
  metrics::mean_squared_error mse;
  metrics::mean_absolute_error mae;
  metrics::mean_absolute_percentage_error mape;
  metrics::root_mean_squared_error rmse;
  CHECK(mse.name() == "mean_squared_error");
  CHECK(rmse.name() == "root_mean_squared_error");
  CHECK(rmse.result() == 0.0);
  for (bool weighted : {false, true})
    for (bool interface : {false, true}) {
      CAPTURE(weighted);
      CAPTURE(interface);
      const double want_mse = reference_mean(bs, weighted, [&](double y, double p) { return (y - f32(p)) * (y - f32(p)); });
      CHECK(run(mse, bs, weighted, interface) == doctest::Approx(want_mse).epsilon(1e-12));
      CHECK(run(rmse, bs, weighted, interface) == doctest::Approx(std::sqrt(want_mse)).epsilon(1e-12));
      CHECK(run(mae, bs, weighted, interface) ==
            doctest::Approx(reference_mean(bs, weighted, [&](double y, double p) { return std::abs(y - f32(p)); })).epsilon(1e-12));
      CHECK(run(mape, bs, weighted, interface) ==
            doctest::Approx(reference_mean(bs, weighted, [&](double y, double p) {
              return 100 * std::abs(y - f32(p)) / std::max(std::abs(y), 1e-7);
            })).epsilon(1e-12));
    }
  // (batch,) labels fit (batch, 1) predictions, and the other way round.
  metrics::mean_absolute_error column;
  column.update(fx::tensor<double>{1.0, 2.0, 3.0}, fx::from_vector(std::vector<float>{1.5f, 2.f, 2.f}, {3, 1}));
  column.update(fx::from_vector(std::vector<double>{0.0, 0.0}, {2, 1}), fx::tensor<float>{1.f, -3.f});
  CHECK(column.result() == doctest::Approx((0.5 + 0 + 1 + 1 + 3) / 5.0));
  // A percentage of a zero label divides by 1e-7, as Keras's epsilon.
  metrics::mean_absolute_percentage_error zero;
  zero.update(fx::tensor<double>{0.0}, fx::tensor<double>{1e-9});
  CHECK(zero.result() == doctest::Approx(1.0));
}

TEST_CASE("metrics: Keras's binary_accuracy, precision and recall at a threshold") {
  const auto bs = batches(3, 0, 1, true);
  const auto f32 = [](double x) { return static_cast<double>(static_cast<float>(x)); };
  for (double threshold : {0.5, 0.3}) {
    CAPTURE(threshold);
    metrics::binary_accuracy acc{threshold};
    metrics::precision prec{threshold};
    metrics::recall rec{threshold};
    for (bool weighted : {false, true})
      for (bool interface : {false, true}) {
        CAPTURE(weighted);
        CAPTURE(interface);
        CHECK(run(acc, bs, weighted, interface) ==
              doctest::Approx(reference_mean(bs, weighted, [&](double y, double p) {
                return (f32(p) > threshold ? 1.0 : 0.0) == y ? 1.0 : 0.0;
              })).epsilon(1e-12));
        // tp / (tp + fp) and tp / (tp + fn), with the examples' weights.
        double tp = 0, fp = 0, fn = 0;
        for (const auto& b : bs)
          for (fx::index_t i = 0; i < b.rows * b.cols; ++i) {
            const double w = weighted ? b.w[static_cast<std::size_t>(i / b.cols)] : 1.0;
            const bool predicted = f32(b.p[static_cast<std::size_t>(i)]) > threshold;
            const bool positive = b.y[static_cast<std::size_t>(i)] != 0;
            tp += w * (predicted && positive);
            fp += w * (predicted && !positive);
            fn += w * (!predicted && positive);
          }
        CHECK(run(prec, bs, weighted, interface) == doctest::Approx(tp / (tp + fp)).epsilon(1e-12));
        CHECK(run(rec, bs, weighted, interface) == doctest::Approx(tp / (tp + fn)).epsilon(1e-12));
      }
  }
  // Nothing predicted positive, or no positive label: 0, not NaN (Keras's divide_no_nan).
  metrics::precision none;
  none.update(fx::tensor<double>{1.0, 0.0}, fx::tensor<double>{0.1, 0.2});
  CHECK(none.result() == 0.0);
  metrics::recall no_positive;
  no_positive.update(fx::tensor<double>{0.0, 0.0}, fx::tensor<double>{0.9, 0.2});
  CHECK(no_positive.result() == 0.0);
  // Logits with threshold 0; a scalar weight.
  metrics::binary_accuracy logits{0.0};
  logits.update(fx::tensor<std::int32_t>{1, 0, 1, 0}, fx::tensor<float>{2.f, -1.f, -0.5f, 0.5f}, 2.0);
  CHECK(logits.result() == 0.5);
  metrics::precision scalar_weight;
  scalar_weight.update(fx::tensor<double>{1.0, 0.0, 1.0}, fx::tensor<double>{0.9, 0.8, 0.1}, 3.0);
  CHECK(scalar_weight.result() == 0.5);
}

TEST_CASE("metrics: Keras's top-k categorical accuracies, ties at the k-th score counting in") {
  // 6 examples of 5 classes; scores with ties.
  const std::vector<float> scores{0.1f, 0.5f, 0.2f, 0.9f, 0.3f,   // order: 3, 1, 4, 2, 0
                                  1.0f, 1.0f, 1.0f, 0.0f, 0.0f,   // a three-way tie at the top
                                  0.0f, 0.0f, 0.0f, 0.0f, 0.0f,   // all tied
                                  0.5f, 0.4f, 0.3f, 0.2f, 0.1f,
                                  0.2f, 0.2f, 0.9f, 0.2f, 0.1f,
                                  0.3f, 0.1f, 0.2f, 0.5f, 0.4f};
  const std::vector<std::int64_t> labels{4, 2, 3, 4, 1, 7};  // 7 is not a class
  auto naive = [&](int k) {
    std::vector<double> hits;
    for (std::size_t r = 0; r < labels.size(); ++r) {
      const std::int64_t l = labels[r];
      if (l < 0 || l >= 5) {
        hits.push_back(0);
        continue;
      }
      int higher = 0;
      for (std::size_t c = 0; c < 5; ++c) higher += scores[r * 5 + c] > scores[r * 5 + static_cast<std::size_t>(l)];
      hits.push_back(higher < k ? 1 : 0);
    }
    return hits;
  };
  const auto logits = fx::from_vector(scores, {6, 5});
  const auto y = fx::from_vector(labels, {6});
  for (int k : {1, 2, 3, 5}) {
    CAPTURE(k);
    const auto hits = naive(k);
    double want = 0;
    for (double h : hits) want += h;
    want /= static_cast<double>(hits.size());
    metrics::sparse_top_k_categorical_accuracy sparse{k};
    sparse.update(y, logits);
    CHECK(sparse.result() == doctest::Approx(want).epsilon(1e-12));
    metrics::sparse_top_k_categorical_accuracy column{k};
    column.update(fx::from_vector(labels, {6, 1}), logits);
    CHECK(column.result() == sparse.result());
    // One-hot labels of the same classes (the row of label 7 is all zero: its argmax is class 0).
    std::vector<float> onehot(30, 0.f);
    for (std::size_t r = 0; r < 6; ++r)
      if (labels[r] < 5) onehot[r * 5 + static_cast<std::size_t>(labels[r])] = 1.f;
    metrics::top_k_categorical_accuracy dense{k};
    dense.update(fx::from_vector(onehot, {6, 5}), logits);
    const double row5_as_class0 = (naive(k)[5] == 0 && [&] {
      int higher = 0;
      for (std::size_t c = 0; c < 5; ++c) higher += scores[25 + c] > scores[25];
      return higher < k;
    }()) ? 1.0 : 0.0;
    CHECK(dense.result() == doctest::Approx(want + row5_as_class0 / 6.0).epsilon(1e-12));
    // Weighted: example weights.
    metrics::sparse_top_k_categorical_accuracy weighted{k};
    const std::vector<double> w{1, 2, 0, 1, 3, 1};
    weighted.update(y, logits, fx::from_vector(w, {6}));
    double wt = 0, ws = 0;
    for (std::size_t r = 0; r < 6; ++r) {
      wt += w[r] * hits[r];
      ws += w[r];
    }
    CHECK(weighted.result() == doctest::Approx(wt / ws).epsilon(1e-12));
  }
  metrics::sparse_top_k_categorical_accuracy default_k;
  CHECK(default_k.k() == 5);
  CHECK(default_k.name() == "sparse_top_k_categorical_accuracy");
}

TEST_CASE("metrics: Keras's metrics refuse what does not fit, naming the metric and the values") {
  metrics::mean_squared_error mse;
  CHECK_THROWS_WITH_AS(mse.update(fx::zeros<double>({3, 2}), fx::zeros<float>({3, 4})),
                       "mean_squared_error.update: y_true of shape (3, 2) and y_pred of shape (3, 4) must have the same "
                       "shape (or differ by a last axis of 1)",
                       fx::shape_error);
  metrics::sparse_top_k_categorical_accuracy top{2};
  CHECK_THROWS_WITH_AS(top.update(fx::zeros<std::int32_t>({4}), fx::zeros<float>({3, 5})),
                       "sparse_top_k_categorical_accuracy.update: y_true of shape (4,) does not fit y_pred of shape (3, "
                       "5): expected (3,) or (3, 1)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(metrics::top_k_categorical_accuracy(0), "top_k_categorical_accuracy: k = 0 must be at least 1",
                       fx::invalid_argument);
  metrics::precision p;
  CHECK_THROWS_WITH_AS(p.update(fx::zeros<double>({3}), fx::zeros<double>({3}), fx::zeros<double>({2})),
                       "precision.update: sample_weight of shape (2,) does not broadcast to the values' shape (3,)",
                       fx::shape_error);
  // A failed update changes nothing.
  p.update(fx::tensor<double>{1.0}, fx::tensor<double>{0.9});
  CHECK(p.result() == 1.0);
}

}  // namespace metrics_keras_test
