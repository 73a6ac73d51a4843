// Keras's AUC and IoU metrics: the numbers of Keras's own docstrings, hand-computed curves for every
// curve and summation method, the ROC area against the (weighted) Mann-Whitney statistic counted by
// a naive double loop, the IoU metrics against a naive confusion matrix, and the errors that name
// the metric and the value.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fluxion/metrics.hpp>

namespace metrics_confusion_test {

namespace fx = fluxion;
namespace metrics = fx::metrics;

namespace {

/// Deterministic values in [0, 1).
std::vector<double> uniform(std::size_t n, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>(s >> 11) / 9007199254740992.0;
  }
  return v;
}

/// The weighted Mann-Whitney statistic: the weighted share of (positive, negative) pairs whose
/// positive scores higher, a tie counting half. The ROC curve through every distinct score has
/// this area.
double mann_whitney(const std::vector<double>& y, const std::vector<double>& p, const std::vector<double>& w) {
  double wins = 0, pos = 0, neg = 0;
  for (std::size_t i = 0; i < y.size(); ++i) (y[i] != 0 ? pos : neg) += w[i];
  for (std::size_t i = 0; i < y.size(); ++i)
    for (std::size_t j = 0; j < y.size(); ++j)
      if (y[i] != 0 && y[j] == 0) wins += w[i] * w[j] * (p[i] > p[j] ? 1.0 : p[i] == p[j] ? 0.5 : 0.0);
  return wins / (pos * neg);
}

/// Every distinct score, ascending, rounded to four decimals (so ties occur): thresholds at each.
std::vector<double> rounded(std::vector<double> p) {
  for (auto& x : p) x = std::round(x * 1e4) / 1e4;
  return p;
}

}  // namespace

TEST_CASE("metrics: auc gives Keras's docstring numbers and hand-computed areas of every curve and summation") {
  // Keras's AUC docstring: thresholds -1e-7, 0.5, 1 + 1e-7; tp = [2, 1, 0], fp = [2, 0, 0].
  const fx::tensor<double> y{0.0, 0.0, 1.0, 1.0};
  const fx::tensor<float> p{0.f, 0.5f, 0.3f, 0.9f};
  metrics::auc m({.num_thresholds = 3});
  CHECK(m.result() == 0.0);
  m.update(y, p);
  CHECK(m.result() == doctest::Approx(0.75));
  const auto c = m.confusion();
  CHECK(c.labels == 1);
  CHECK(c.true_positives == std::vector<double>{2, 1, 0});
  CHECK(c.false_positives == std::vector<double>{2, 0, 0});
  CHECK(c.false_negatives == std::vector<double>{0, 1, 2});
  CHECK(c.true_negatives == std::vector<double>{0, 2, 2});
  m.reset();
  m.update(y, p, fx::tensor<double>{1.0, 0.0, 0.0, 1.0});
  CHECK(m.result() == doctest::Approx(1.0));

  // ROC: fpr = [1, 0, 0], recall = [1, 0.5, 0]. PR: recall = [1, 0.5, 0], precision = [0.5, 1, 0].
  using metrics::auc_curve;
  using metrics::auc_summation;
  struct expected_area {
    auc_curve curve;
    auc_summation summation;
    double area;
  };
  const double davis_goadrich = (1 + 2.0 / 3.0 * std::log(4.0)) / 6 + 0.5;  // slopes 1/3 and 1
  for (const auto& e : {expected_area{auc_curve::roc, auc_summation::interpolation, 0.75},
                        expected_area{auc_curve::roc, auc_summation::minoring, 0.5},
                        expected_area{auc_curve::roc, auc_summation::majoring, 1.0},
                        expected_area{auc_curve::pr, auc_summation::interpolation, davis_goadrich},
                        expected_area{auc_curve::pr, auc_summation::minoring, 0.25},
                        expected_area{auc_curve::pr, auc_summation::majoring, 1.0}}) {
    CAPTURE(static_cast<int>(e.curve));
    CAPTURE(static_cast<int>(e.summation));
    metrics::auc a({.num_thresholds = 3, .curve = e.curve, .summation_method = e.summation});
    a.update(y, p);
    CHECK(a.result() == doctest::Approx(e.area).epsilon(1e-12));
  }
  metrics::auc defaults;
  CHECK(defaults.name() == "auc");
  REQUIRE(defaults.thresholds().size() == 200);
  CHECK(defaults.thresholds()[0] == -1e-7);
  CHECK(defaults.thresholds()[1] == doctest::Approx(1.0 / 199));
  CHECK(defaults.thresholds()[199] == 1 + 1e-7);
}

TEST_CASE("metrics: auc's ROC through every distinct score is the weighted Mann-Whitney statistic") {
  // Three batches of (rows, 2), weights per example; thresholds at every distinct score.
  std::vector<double> all_y, all_p, all_w;
  std::vector<std::vector<double>> ys, ps, ws;
  for (std::uint64_t b = 0; b < 3; ++b) {
    const std::size_t rows = 5 + b;
    auto y = uniform(rows * 2, 10 + b), p = rounded(uniform(rows * 2, 20 + b)), w = uniform(rows, 30 + b);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = y[i] < 0.1 + 0.8 * p[i] ? 1.0 : 0.0;  // informative
    for (auto& x : w) x *= 2;
    ys.push_back(y);
    ps.push_back(p);
    ws.push_back(w);
    all_y.insert(all_y.end(), y.begin(), y.end());
    all_p.insert(all_p.end(), p.begin(), p.end());
    for (std::size_t i = 0; i < y.size(); ++i) all_w.push_back(w[i / 2]);
  }
  std::vector<double> thresholds = all_p;
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  for (bool weighted : {false, true})
    for (bool interface : {false, true}) {
      CAPTURE(weighted);
      CAPTURE(interface);
      metrics::auc m({.thresholds = thresholds});
      for (std::size_t b = 0; b < ys.size(); ++b) {
        const auto rows = static_cast<fx::index_t>(ws[b].size());
        const auto yt = fx::from_vector(ys[b], {rows, 2}), pt = fx::from_vector(ps[b], {rows, 2});
        const auto wt = fx::from_vector(ws[b], {rows});
        if (interface) {
          metrics::metric& as_metric = m;
          as_metric.update_state(yt, pt, weighted ? &wt : nullptr);
        } else if (weighted) {
          m.update(yt, pt, wt);
        } else {
          m.update(yt, pt);
        }
      }
      const std::vector<double> ones(all_w.size(), 1.0);
      const double want = mann_whitney(all_y, all_p, weighted ? all_w : ones);
      CHECK(want > 0.55);
      CHECK(m.result() == doctest::Approx(want).epsilon(1e-12));
    }
}

TEST_CASE("metrics: auc with multi_label, label_weights and from_logits agrees with single-label AUCs") {
  const std::size_t rows = 40;
  auto y = uniform(rows * 3, 1), p = uniform(rows * 3, 2);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = y[i] < 0.3 + 0.4 * p[i] ? 1.0 : 0.0;
  const auto yt = fx::from_vector(y, {40, 3}), pt = fx::from_vector(p, {40, 3});
  std::vector<double> single;
  for (std::size_t l = 0; l < 3; ++l) {
    std::vector<double> yl, pl;
    for (std::size_t r = 0; r < rows; ++r) {
      yl.push_back(y[r * 3 + l]);
      pl.push_back(p[r * 3 + l]);
    }
    for (auto curve : {metrics::auc_curve::roc, metrics::auc_curve::pr}) {
      metrics::auc one({.curve = curve});
      one.update(fx::from_vector(yl, {40}), fx::from_vector(pl, {40}));
      single.push_back(one.result());
    }
  }
  metrics::auc roc({.multi_label = true}), pr({.curve = metrics::auc_curve::pr, .multi_label = true});
  roc.update(yt, pt);
  pr.update(yt, pt);
  CHECK(roc.result() == doctest::Approx((single[0] + single[2] + single[4]) / 3).epsilon(1e-12));
  CHECK(pr.result() == doctest::Approx((single[1] + single[3] + single[5]) / 3).epsilon(1e-12));
  CHECK(roc.confusion().labels == 3);
  metrics::auc weighted_labels({.multi_label = true, .label_weights = {1, 0, 3}});
  weighted_labels.update(yt, pt);
  CHECK(weighted_labels.result() == doctest::Approx((single[0] + 3 * single[4]) / 4).epsilon(1e-12));
  // Without multi_label, label_weights weigh each element by its label, as (1, 3) sample weights.
  metrics::auc flat({.label_weights = {1, 0, 3}}), as_weights;
  flat.update(yt, pt);
  as_weights.update(yt, pt, fx::tensor<double>(fx::from_vector(std::vector<double>{1, 0, 3}, {1, 3})));
  CHECK(flat.result() == doctest::Approx(as_weights.result()).epsilon(1e-12));
  // from_logits: a sigmoid first.
  std::vector<double> logits(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) logits[i] = std::log(p[i] / (1 - p[i]));
  metrics::auc from_logits({.from_logits = true}), probabilities;
  from_logits.update(yt, fx::from_vector(logits, {40, 3}));
  probabilities.update(yt, pt);
  CHECK(from_logits.result() == doctest::Approx(probabilities.result()).epsilon(1e-9));
}

TEST_CASE("metrics: auc refuses what it cannot count, naming the value, and changes nothing") {
  metrics::auc m;
  m.update(fx::tensor<double>{1.0, 0.0}, fx::tensor<double>{0.8, 0.1});
  const double before = m.result();
  CHECK(before == 1.0);
  CHECK_THROWS_WITH_AS(m.update(fx::tensor<double>{1.0, 0.0, 1.0}, fx::tensor<double>{0.5, 1.5, 0.2}),
                       "auc.update: y_pred = 1.5 at flat index 1 is not a probability in [0, 1] (give from_logits = "
                       "true for logits)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(m.update(fx::tensor<double>{1.0}, fx::tensor<double>{std::numeric_limits<double>::quiet_NaN()}),
                       "auc.update: y_pred = nan at flat index 0 is not a probability in [0, 1] (give from_logits = "
                       "true for logits)",
                       fx::invalid_argument);
  CHECK(m.result() == before);
  CHECK(m.confusion().true_positives[0] == 1.0);
  CHECK_THROWS_WITH_AS(metrics::auc({.num_thresholds = 1}), "auc: num_thresholds = 1 must be greater than 1",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::auc({.thresholds = {0.2, 0.2}}),
                       "auc: thresholds[1] = 0.2 does not exceed thresholds[0] = 0.2; give them in ascending order",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::auc({.thresholds = {1.5}}), "auc: thresholds[0] = 1.5 is not in [0, 1]",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::auc({.label_weights = {1, -1}}),
                       "auc: label_weights[1] = -1 must be finite and non-negative", fx::invalid_argument);
  metrics::auc two_labels({.label_weights = {1, 2}});
  CHECK_THROWS_WITH_AS(two_labels.update(fx::zeros<double>({4, 3}), fx::zeros<double>({4, 3})),
                       "auc.update: 2 label_weights do not fit y_pred of shape (4, 3), whose last axis has 3 labels",
                       fx::shape_error);
  metrics::auc multi({.multi_label = true});
  multi.update(fx::zeros<double>({4, 3}), fx::zeros<double>({4, 3}));
  CHECK_THROWS_WITH_AS(multi.update(fx::zeros<double>({4, 2}), fx::zeros<double>({4, 2})),
                       "auc.update: y_pred of shape (4, 2) has 2 labels, but the updates since the last reset had 3 "
                       "(reset() to count other labels)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(m.update(fx::zeros<double>({3}), fx::zeros<double>({4})),
                       "auc.update: y_true of shape (3,) and y_pred of shape (4,) must have the same shape (or differ "
                       "by a last axis of 1)",
                       fx::shape_error);
}

namespace {
/// The mean IoU of `targets` from a confusion matrix counted by a loop (rows: true classes).
double naive_iou(const std::vector<std::vector<double>>& cm, const std::vector<int>& targets) {
  double sum = 0, valid = 0;
  for (int k : targets) {
    double row = 0, column = 0;
    for (std::size_t j = 0; j < cm.size(); ++j) {
      row += cm[static_cast<std::size_t>(k)][j];
      column += cm[j][static_cast<std::size_t>(k)];
    }
    const double tp = cm[static_cast<std::size_t>(k)][static_cast<std::size_t>(k)], d = row + column - tp;
    if (d > 0) {
      sum += tp / d;
      ++valid;
    }
  }
  return valid == 0 ? 0 : sum / valid;
}
}  // namespace

TEST_CASE("metrics: the IoU metrics give Keras's docstring numbers") {
  const fx::tensor<double> y{0.0, 0.0, 1.0, 1.0};
  const fx::tensor<std::int32_t> p{0, 1, 0, 1};
  const fx::tensor<double> w{0.3, 0.3, 0.3, 0.1};
  metrics::mean_iou mean(2);
  CHECK(mean.name() == "mean_iou");
  CHECK(mean.result() == 0.0);
  mean.update(y, p);
  CHECK(mean.result() == doctest::Approx(1.0 / 3));
  mean.reset();
  mean.update(y, p, w);
  CHECK(mean.result() == doctest::Approx(5.0 / 21));  // Keras: 0.23809525
  const auto cm = mean.confusion_matrix().to_vector();
  CHECK(cm == std::vector<double>{0.3, 0.3, 0.3, 0.1});

  metrics::iou first(2, {.target_class_ids = {0}});
  first.update(y, p);
  CHECK(first.result() == doctest::Approx(1.0 / 3));
  first.reset();
  first.update(y, p, w);
  CHECK(first.result() == doctest::Approx(1.0 / 3));

  metrics::binary_iou binary({.threshold = 0.3});
  CHECK(binary.name() == "binary_iou");
  const fx::tensor<double> scores{0.1, 0.2, 0.4, 0.7};
  binary.update(fx::tensor<double>{0.0, 1.0, 0.0, 1.0}, scores);
  CHECK(binary.result() == doctest::Approx(1.0 / 3));
  binary.reset();
  binary.update(fx::tensor<double>{0.0, 1.0, 0.0, 1.0}, scores, fx::tensor<double>{0.2, 0.3, 0.4, 0.1});
  CHECK(binary.result() == doctest::Approx(0.17361112).epsilon(1e-6));  // (0.2/0.9 + 0.1/0.8) / 2

  const auto onehot = fx::from_vector(std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0}, {4, 3});
  const auto pred = fx::from_vector(std::vector<float>{0.2f, 0.3f, 0.5f, 0.1f, 0.2f, 0.7f, 0.5f, 0.3f, 0.1f, 0.1f, 0.4f, 0.5f}, {4, 3});
  const fx::tensor<double> ow{0.1, 0.2, 0.3, 0.4};
  metrics::one_hot_iou two_targets(3, {.target_class_ids = {0, 2}});
  two_targets.update(onehot, pred, ow);
  CHECK(two_targets.result() == doctest::Approx((0 + 0.1 / 0.7) / 2));  // Keras: 0.07142857
  metrics::one_hot_mean_iou all(3);
  all.update(onehot, pred, ow);
  CHECK(all.result() == doctest::Approx((0.1 / 0.7) / 3));  // Keras: 0.047619
  // mean_iou with sparse_y_true = false, sparse_y_pred = false is the same.
  metrics::mean_iou dense(3, {.sparse_y_true = false, .sparse_y_pred = false});
  dense.update(onehot, pred, ow);
  CHECK(dense.result() == all.result());
}

TEST_CASE("metrics: mean_iou of scores over images against a naive confusion matrix, ignoring a void class") {
  // Two batches of (2, 3, 4) pixels of 4 classes (scores), labels with a void class 255, weights per image.
  const int classes = 4;
  std::vector<std::vector<double>> cm(4, std::vector<double>(4, 0.0));
  for (bool interface : {false, true}) {
    CAPTURE(interface);
    metrics::mean_iou m(classes, {.ignore_class = 255, .sparse_y_pred = false});
    for (auto& row : cm) std::fill(row.begin(), row.end(), 0.0);
    for (std::uint64_t b = 0; b < 2; ++b) {
      const auto scores = uniform(2 * 3 * 4 * 4, 40 + b), raw = uniform(2 * 3 * 4, 50 + b), w = uniform(2, 60 + b);
      std::vector<double> labels(raw.size());
      for (std::size_t i = 0; i < raw.size(); ++i) labels[i] = raw[i] < 0.1 ? 255 : std::floor(raw[i] * classes);
      for (std::size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] == 255) continue;
        std::size_t best = 0;
        for (std::size_t c = 1; c < 4; ++c)
          if (scores[i * 4 + c] > scores[i * 4 + best]) best = c;
        cm[static_cast<std::size_t>(labels[i])][best] += w[i / 12];
      }
      const auto yt = fx::from_vector(labels, {2, 3, 4}), pt = fx::from_vector(scores, {2, 3, 4, 4});
      const auto wt = fx::from_vector(w, {2});
      if (interface) {
        metrics::metric& as_metric = m;
        as_metric.update_state(yt, pt, &wt);
      } else {
        m.update(yt, pt, wt);
      }
    }
    CHECK(m.result() == doctest::Approx(naive_iou(cm, {0, 1, 2, 3})).epsilon(1e-12));
    const auto got = m.confusion_matrix().to_vector();
    for (std::size_t i = 0; i < 16; ++i) CHECK(got[i] == doctest::Approx(cm[i / 4][i % 4]).epsilon(1e-12));
  }
}

TEST_CASE("metrics: the IoU metrics refuse class ids that are not classes, naming the value, and change nothing") {
  metrics::mean_iou m(3);
  m.update(fx::tensor<double>{0.0, 1.0}, fx::tensor<double>{0.0, 2.0});
  const double before = m.result();
  CHECK_THROWS_WITH_AS(m.update(fx::tensor<double>{0.0, 3.0}, fx::tensor<double>{0.0, 1.0}),
                       "mean_iou.update: y_true = 3 at flat index 1 is not a class: an integer in [0, 3)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(m.update(fx::tensor<double>{0.0, 1.0}, fx::tensor<double>{1.5, 1.0}),
                       "mean_iou.update: y_pred = 1.5 at flat index 0 is not a class: an integer in [0, 3)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(m.update(fx::tensor<double>{-1.0}, fx::tensor<double>{1.0}),
                       "mean_iou.update: y_true = -1 at flat index 0 is not a class: an integer in [0, 3)",
                       fx::invalid_argument);
  CHECK(m.result() == before);
  // The ignored class need not be a class, and its y_pred is not checked.
  metrics::mean_iou ignoring(3, {.ignore_class = -1});
  ignoring.update(fx::tensor<double>{-1.0, 1.0}, fx::tensor<double>{7.0, 1.0});
  CHECK(ignoring.result() == 1.0);
  CHECK_THROWS_WITH_AS(metrics::iou(3), "iou: target_class_ids is empty; give the classes whose IoU to average (mean_iou "
                                        "averages every class)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::iou(3, {.target_class_ids = {0, 3}}), "iou: target_class_ids[1] = 3 is not a class in [0, 3)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::mean_iou(3, {.target_class_ids = {1}}),
                       "mean_iou: target_class_ids are for iou and one_hot_iou; mean_iou averages every class",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(metrics::mean_iou(0), "mean_iou: num_classes = 0 must be at least 1", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(m.update(fx::zeros<double>({2}), fx::zeros<double>({2, 3})),
                       "mean_iou.update: y_true of shape (2,) and y_pred of shape (2, 3) must have the same shape (or "
                       "differ by a last axis of 1)",
                       fx::shape_error);
}

}  // namespace metrics_confusion_test
