// Keras's metrics built on counts rather than a mean: AUC (the area under the ROC or the
// precision-recall curve) and the IoU family (IoU, MeanIoU, BinaryIoU, OneHotIoU, OneHotMeanIoU).
// Included by <fluxion/metrics.hpp>.
//
//   fx::metrics::auc roc;                                            // ROC, 200 thresholds
//   fx::metrics::auc pr({.curve = fx::metrics::auc_curve::pr, .name = "pr_auc"});
//   fx::metrics::mean_iou segments(21, {.sparse_y_pred = false});   // labels, and scores per class
//   roc.update(y_true, probabilities);                               // (batch,) or (batch, k)
//   std::cout << roc.result();
//
// Each keeps weighted counts, in double: the true and false positives at each threshold, or the
// confusion matrix. On the cpu an update adds them at once; on a device (fx::cuda) they are
// computed and kept there, and only result() or the accessors read them back (one wait for the
// device, however many updates), as the metrics of metrics.hpp do. Inputs a metric cannot count
// (AUC's y_pred outside [0, 1] or NaN; a class id that is not an integer in [0, num_classes))
// throw fluxion::invalid_argument naming the metric and the value: on the cpu at the update,
// which then adds nothing; on a device at the next read, since checking earlier would wait for
// the device at each update (reset() clears the counts).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../metrics.hpp"

namespace fluxion::metrics {

namespace detail {

/// Sums kept on a device between reads (count_table).
struct pending_table {
  virtual ~pending_table() = default;
  virtual std::vector<double> read() const = 0;
};
template <class D>
struct device_table final : pending_table {
  tensor<double, D> sums;
  explicit device_table(tensor<double, D> s) : sums(std::move(s)) {}
  std::vector<double> read() const override { return sums.to_vector(); }
};

/// Running sums of a fixed number of counts, kept where the updates ran: on the host, or on their
/// device until values() reads them. Immutable on the device, as weighted_mean's sums: copies of
/// a metric never share a running total. A template (of the metric that owns it), so that a program
/// compiles its members only where it makes such a metric.
template <class Owner>
class count_table {
 public:
  /// Adds counts of any shape, flattened (every add gives the same number).
  template <class D>
  void add(const tensor<double, D>& counts) {
    if constexpr (std::is_same_v<D, cpu>) {
      add(counts.to_vector());
    } else {
      fluxion::detail::materialize_depth hidden_from_autodiff;
      const tensor<double, D> flat(counts, shape{counts.size()}, fluxion::detail::same_buffer);
      if (const auto* p = dynamic_cast<const device_table<D>*>(m_pending.get())) {
        m_pending = std::make_shared<const device_table<D>>(tensor<double, D>(p->sums + flat));
      } else {
        flush();
        m_pending = std::make_shared<const device_table<D>>(flat);
      }
    }
  }
  /// Adds counts counted on the host.
  void add(const std::vector<double>& counts) {
    flush();
    if (m_host.empty()) m_host.assign(counts.size(), 0.0);
    for (std::size_t i = 0; i < counts.size(); ++i) m_host[i] += counts[i];
  }
  /// The sums, empty before any add: one wait for the device where updates are pending there.
  const std::vector<double>& values() const {
    flush();
    return m_host;
  }
  void reset() {
    m_host.clear();
    m_pending.reset();
  }

 private:
  void flush() const {
    if (!m_pending) return;
    const auto v = m_pending->read();
    if (m_host.empty()) m_host.assign(v.size(), 0.0);
    for (std::size_t i = 0; i < v.size(); ++i) m_host[i] += v[i];
    m_pending.reset();
  }
  mutable std::vector<double> m_host;
  mutable std::shared_ptr<const pending_table> m_pending;
};

/// sample_weight (a number or a tensor-like) as doubles on D, broadcast to `values` (the leading
/// axes rule of leading_weights_shape) and flattened.
template <class D, class W>
tensor<double, D> flat_weights(const W* sample_weight, const shape& values, const std::string& metric) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  if (!sample_weight) return fluxion::ones<double, D>(shape{values.size()});
  if constexpr (std::is_arithmetic_v<W>) {
    return fluxion::full<double, D>(shape{values.size()}, static_cast<double>(*sample_weight));
  } else {
    const auto given = hidden_value(*sample_weight);
    using G = std::remove_cvref_t<decltype(given)>;
    const tensor<double, D> w(cast<double>(on_device_of<tensor<double, D>>(G(given, leading_weights_shape(values, given.shape(), metric), fluxion::detail::same_buffer))));
    return tensor<double, D>(tensor<double, D>(broadcast_to(w, values)), shape{values.size()}, fluxion::detail::same_buffer);
  }
}

/// The updates of a metric of counts: Derived::add(y_true, y_pred, sample_weight or null) adds a
/// batch to m_table.
template <class Derived>
class counting_metric : public metric {
 public:
  template <tensor_like Y, tensor_like P>
  void update(const Y& y_true, const P& y_pred) {
    self().template add<Y, P, double>(y_true, y_pred, nullptr);
  }
  template <tensor_like Y, tensor_like P, tensor_or_scalar W>
  void update(const Y& y_true, const P& y_pred, const W& sample_weight) {
    self().add(y_true, y_pred, &sample_weight);
  }
  void update_state(const tensor<double>& y_true, const tensor<double>& y_pred, const tensor<double>* sample_weight) override {
    self().add(y_true, y_pred, sample_weight);
  }

 protected:
  count_table<Derived> m_table;

 private:
  Derived& self() { return static_cast<Derived&>(*this); }
};

/// sample_weight (null, a number or a tensor-like) read to the host and spread over the elements of
/// values of shape `values` (spread_weights).
template <class W>
std::vector<double> host_weights(const W* sample_weight, const shape& values, const std::string& metric) {
  if (!sample_weight) return std::vector<double>(static_cast<std::size_t>(values.size()), 1.0);
  return spread_weights(read(*sample_weight), values, metric);
}

/// x / y, or 0 where y is 0 (Keras's divide_no_nan).
inline double divide_no_nan(double x, double y) { return y == 0 ? 0.0 : x / y; }

/// The first value of `values` that `bad` picks, with its flat index, for an error message.
template <class Bad>
std::string first_bad(const std::vector<double>& values, Bad bad) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (bad(values[i])) return fluxion::detail::describe_scalar(values[i]) + " at flat index " + std::to_string(i);
  return "?";
}

}  // namespace detail

/// The curve whose area fx::metrics::auc computes.
enum class auc_curve {
  roc,  ///< the receiver operating characteristic: the true positive rate against the false positive rate
  pr,   ///< precision against recall
};
/// How fx::metrics::auc sums the area between two thresholds (Keras's summation_method).
enum class auc_summation {
  interpolation,  ///< trapezoids; for PR, Davis and Goadrich's interpolation of precision
  minoring,       ///< rectangles under the lower of the two heights
  majoring,       ///< rectangles under the higher
};

/// fx::metrics::auc's options, Keras's AUC arguments by the same names. A class template behind
/// the alias auc_options, as the metrics are: a program that uses no AUC compiles none of its
/// members.
template <class Unused = void>
struct basic_auc_options {
  /// Evenly spaced thresholds over [0, 1], the first just below 0 and the last just above 1
  /// (more than 1).
  int num_thresholds = 200;
  auc_curve curve = auc_curve::roc;
  auc_summation summation_method = auc_summation::interpolation;
  /// Thresholds of your own in [0, 1], ascending, instead of num_thresholds' (one just below 0
  /// and one just above 1 are added).
  std::vector<double> thresholds = {};
  /// y_pred's last axis holds independent labels, each with its own curve, and the result is the
  /// mean of their areas; otherwise every element counts on one curve.
  bool multi_label = false;
  /// One weight per label (y_pred's last axis): with multi_label the weights of the labels' areas
  /// in their mean; otherwise a factor on each element's sample weight by its label.
  std::vector<double> label_weights = {};
  /// y_pred holds logits: a sigmoid makes them probabilities.
  bool from_logits = false;
  std::string name = "auc";
};
using auc_options = basic_auc_options<>;

/// Keras's AUC: the area under the ROC (or the precision-recall) curve, from weighted counts of
/// true and false positives at fixed thresholds, y_pred > threshold counting as positive. y_true
/// and y_pred have one shape (or differ by a last axis of 1); y_true's nonzero values are the
/// positives; y_pred holds probabilities in [0, 1] (or logits with from_logits). 0 before any
/// update.
template <class Unused = void>
class basic_auc : public detail::counting_metric<basic_auc<Unused>> {
  friend class detail::counting_metric<basic_auc>;

 public:
  using options_type = basic_auc_options<Unused>;
  basic_auc() : basic_auc(options_type{}) {}
  explicit basic_auc(options_type options) : m_options(std::move(options)) {
    const std::string& n = m_options.name;
    constexpr double epsilon = 1e-7;  // Keras's backend.epsilon()
    m_thresholds.push_back(-epsilon);
    if (!m_options.thresholds.empty()) {
      for (std::size_t i = 0; i < m_options.thresholds.size(); ++i) {
        const double t = m_options.thresholds[i];
        if (!(t >= 0 && t <= 1))
          throw invalid_argument(n + ": thresholds[" + std::to_string(i) + "] = " + fluxion::detail::describe_scalar(t) + " is not in [0, 1]");
        if (i > 0 && !(t > m_options.thresholds[i - 1]))
          throw invalid_argument(n + ": thresholds[" + std::to_string(i) + "] = " + fluxion::detail::describe_scalar(t) +
                                 " does not exceed thresholds[" + std::to_string(i - 1) + "] = " +
                                 fluxion::detail::describe_scalar(m_options.thresholds[i - 1]) + "; give them in ascending order");
        m_thresholds.push_back(t);
      }
    } else {
      const int k = m_options.num_thresholds;
      if (k <= 1) throw invalid_argument(n + ": num_thresholds = " + std::to_string(k) + " must be greater than 1");
      for (int i = 1; i < k - 1; ++i) m_thresholds.push_back(static_cast<double>(i) / (k - 1));
    }
    m_thresholds.push_back(1 + epsilon);
    for (std::size_t i = 0; i < m_options.label_weights.size(); ++i) {
      const double w = m_options.label_weights[i];
      if (!(w >= 0 && std::isfinite(w)))
        throw invalid_argument(n + ": label_weights[" + std::to_string(i) + "] = " + fluxion::detail::describe_scalar(w) +
                               " must be finite and non-negative");
    }
  }

  const std::string& name() const override { return m_options.name; }
  const options_type& options() const noexcept { return m_options; }
  /// Every threshold, ascending: -1e-7, the options', 1 + 1e-7.
  const std::vector<double>& thresholds() const noexcept { return m_thresholds; }

  /// The weighted counts at each threshold, (labels, thresholds) row-major: one label unless
  /// multi_label. Empty before any update.
  struct counts {
    std::vector<double> true_positives, false_positives, true_negatives, false_negatives;
    index_t labels = 0;
  };
  counts confusion() const {
    const auto& v = checked_values();
    counts c;
    if (v.empty()) return c;
    const std::size_t t = m_thresholds.size(), g = static_cast<std::size_t>(m_labels);
    c.labels = m_labels;
    c.true_positives.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(g * t));
    c.false_positives.assign(v.begin() + static_cast<std::ptrdiff_t>(g * t), v.begin() + static_cast<std::ptrdiff_t>(2 * g * t));
    c.true_negatives.resize(g * t);
    c.false_negatives.resize(g * t);
    for (std::size_t l = 0; l < g; ++l)
      for (std::size_t i = 0; i < t; ++i) {
        c.false_negatives[l * t + i] = v[2 * g * t + l] - c.true_positives[l * t + i];
        c.true_negatives[l * t + i] = v[2 * g * t + g + l] - c.false_positives[l * t + i];
      }
    return c;
  }

  double result() const override {
    const counts c = confusion();
    if (c.labels == 0) return 0.0;
    const std::size_t t = m_thresholds.size();
    std::vector<double> areas;
    for (std::size_t l = 0; l < static_cast<std::size_t>(c.labels); ++l) {
      const auto at = [&](const std::vector<double>& v) { return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(l * t), v.begin() + static_cast<std::ptrdiff_t>((l + 1) * t)); };
      areas.push_back(area(at(c.true_positives), at(c.false_positives), at(c.true_negatives), at(c.false_negatives)));
    }
    if (!m_options.multi_label) return areas[0];
    if (m_options.label_weights.empty()) {
      double sum = 0;
      for (double a : areas) sum += a;
      return sum / static_cast<double>(areas.size());
    }
    double sum = 0, weights = 0;
    for (std::size_t l = 0; l < areas.size(); ++l) {
      sum += areas[l] * m_options.label_weights[l];
      weights += m_options.label_weights[l];
    }
    return detail::divide_no_nan(sum, weights);
  }
  void reset() override {
    this->m_table.reset();
    m_labels = -1;
  }

 private:
  /// The area under one label's curve from its counts (Keras's AUC.result).
  double area(const std::vector<double>& tp, const std::vector<double>& fp, const std::vector<double>& tn,
              const std::vector<double>& fn) const {
    using detail::divide_no_nan;
    const std::size_t n = tp.size();
    double sum = 0;
    if (m_options.curve == auc_curve::pr && m_options.summation_method == auc_summation::interpolation) {
      // Davis and Goadrich (2006): precision interpolated between thresholds (Keras's interpolate_pr_auc).
      for (std::size_t i = 0; i + 1 < n; ++i) {
        const double dtp = tp[i] - tp[i + 1];
        const double p0 = tp[i] + fp[i], p1 = tp[i + 1] + fp[i + 1];
        const double slope = divide_no_nan(dtp, std::max(p0 - p1, 0.0));
        const double intercept = tp[i + 1] - slope * p1;
        const double ratio = p0 > 0 && p1 > 0 ? divide_no_nan(p0, std::max(p1, 0.0)) : 1.0;
        sum += divide_no_nan(slope * (dtp + intercept * std::log(ratio)), std::max(tp[i + 1] + fn[i + 1], 0.0));
      }
      return sum;
    }
    std::vector<double> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double recall = divide_no_nan(tp[i], tp[i] + fn[i]);
      if (m_options.curve == auc_curve::roc) {
        x[i] = divide_no_nan(fp[i], fp[i] + tn[i]);
        y[i] = recall;
      } else {
        x[i] = recall;
        y[i] = divide_no_nan(tp[i], tp[i] + fp[i]);
      }
    }
    for (std::size_t i = 0; i + 1 < n; ++i) {
      const double height = m_options.summation_method == auc_summation::interpolation ? (y[i] + y[i + 1]) / 2
                            : m_options.summation_method == auc_summation::minoring    ? std::min(y[i], y[i + 1])
                                                                                       : std::max(y[i], y[i + 1]);
      sum += (x[i] - x[i + 1]) * height;
    }
    return sum;
  }

  /// The counts, after refusing what a device's updates could not check: (tp, fp) per label and
  /// threshold, then the positives' and the negatives' weights per label, then the number of
  /// values of y_pred that were not probabilities.
  const std::vector<double>& checked_values() const {
    const auto& v = this->m_table.values();
    if (!v.empty() && v.back() > 0)
      throw invalid_argument(name() + ": " + fluxion::detail::describe_scalar(v.back()) +
                             " values of y_pred given since the last reset were not probabilities in [0, 1] (NaN or out "
                             "of range; give from_logits = true for logits); reset() it and update it with probabilities");
    return v;
  }

  /// The labels of y_pred's shape s (its last axis's extent where multi_label or label_weights
  /// need one, else 1), checked against label_weights and the earlier updates; returns the groups
  /// (curves) it counts: the labels with multi_label, else 1.
  index_t groups_of(const shape& s, index_t& labels) const {
    labels = 1;
    if (m_options.multi_label || !m_options.label_weights.empty()) {
      if (s.rank() == 0)
        throw shape_error(name() + ".update: y_pred of shape () has no label axis; " +
                          (m_options.multi_label ? "multi_label" : "label_weights") + " needs one, the last");
      labels = s[s.rank() - 1];
      if (!m_options.label_weights.empty() && static_cast<index_t>(m_options.label_weights.size()) != labels)
        throw shape_error(name() + ".update: " + std::to_string(m_options.label_weights.size()) +
                          " label_weights do not fit y_pred of shape " + to_string(s) + ", whose last axis has " +
                          std::to_string(labels) + " labels");
    }
    const index_t groups = m_options.multi_label ? labels : 1;
    if (m_labels >= 0 && groups != m_labels)
      throw shape_error(name() + ".update: y_pred of shape " + to_string(s) + " has " + std::to_string(groups) +
                        " labels, but the updates since the last reset had " + std::to_string(m_labels) +
                        " (reset() to count other labels)");
    return groups;
  }

  /// A batch: on a device, counted there (add_on_device); otherwise read to the host and counted
  /// by a loop, which a program compiles in a fraction of the fused statements' time.
  template <class Y, class P, class W>
  void add(const Y& y_true, const P& y_pred, const W* sample_weight) {
    if constexpr (detail::on_accelerator<P>()) add_on_device(y_true, y_pred, sample_weight);
    else add_on_host(y_true, y_pred, sample_weight);
  }
  template <class Y, class P, class W>
  void add_on_host(const Y& y_true, const P& y_pred, const W* sample_weight) {
    const detail::host_values t = detail::read(y_true), given = detail::read(y_pred);
    detail::check_same_shape(t.dims, given.dims, name());
    const shape& s = given.dims;
    index_t labels = 1;
    const index_t groups = groups_of(s, labels);
    std::vector<double> p = given.values;
    if (m_options.from_logits)
      for (auto& x : p) x = 1 / (1 + std::exp(-x));
    const auto not_probability = [](double x) { return !(x >= 0 && x <= 1); };
    if (std::any_of(p.begin(), p.end(), not_probability))
      throw invalid_argument(name() + ".update: y_pred = " + detail::first_bad(p, not_probability) +
                             " is not a probability in [0, 1] (give from_logits = true for logits)");
    std::vector<double> w = detail::host_weights(sample_weight, s, name());
    const auto g = static_cast<std::size_t>(groups), k = m_thresholds.size(), l = static_cast<std::size_t>(labels);
    if (!m_options.label_weights.empty() && !m_options.multi_label)
      for (std::size_t i = 0; i < w.size(); ++i) w[i] *= m_options.label_weights[i % l];
    // Each element's weight goes to the bucket of the thresholds it exceeds (the sorted
    // thresholds below it), by class; the true and false positives at threshold j are then the
    // weights of the buckets above j (Keras's evenly spaced update does the same).
    std::vector<double> bucket(2 * g * (k + 1), 0.0);
    for (std::size_t i = 0; i < p.size(); ++i) {
      const auto above = static_cast<std::size_t>(std::lower_bound(m_thresholds.begin(), m_thresholds.end(), p[i]) -
                                                   m_thresholds.begin());
      const std::size_t group = m_options.multi_label ? i % l : 0;
      bucket[((t.values[i] != 0 ? 0 : 1) * g + group) * (k + 1) + above] += w[i];
    }
    std::vector<double> counts(2 * g * k + 2 * g + 1, 0.0);
    for (std::size_t c = 0; c < 2; ++c)
      for (std::size_t group = 0; group < g; ++group) {
        const double* b = &bucket[(c * g + group) * (k + 1)];
        double sum = 0;
        for (std::size_t j = k + 1; j-- > 0;) {
          if (j < k) counts[(c * g + group) * k + j] = sum;  // buckets above j: p > thresholds[j]
          sum += b[j];
        }
        counts[2 * g * k + c * g + group] = sum;
      }
    this->m_table.add(counts);
    m_labels = groups;
  }

  /// add on a device: the counts as fused statements there, nothing read back; y_pred's values
  /// that are not probabilities are counted and refused at the next read.
  template <class Y, class P, class W>
  void add_on_device(const Y& y_true, const P& y_pred, const W* sample_weight) {
    const auto [t, given] = detail::same_shape_doubles(y_true, y_pred, name());
    using T = std::remove_cvref_t<decltype(t)>;
    using D = device_t<T>;
    const shape& s = given.shape();
    index_t labels = 1;
    const index_t groups = groups_of(s, labels);
    fluxion::detail::materialize_depth hidden_from_autodiff;
    const T p = m_options.from_logits ? T(sigmoid(given)) : given;
    const T valid(cast<double>(p >= 0.0) * cast<double>(p <= 1.0));
    const T invalid(static_cast<double>(s.size()) - reduce_sum(valid));
    T w = detail::flat_weights<D>(sample_weight, s, name());
    if (!m_options.label_weights.empty() && !m_options.multi_label)
      w = T(T(w, shape{s.size() / labels, labels}, fluxion::detail::same_buffer) *
            from_vector<double, D>(m_options.label_weights, shape{labels}));
    const index_t n = s.size() / groups, k = static_cast<index_t>(m_thresholds.size());
    const shape column{n, groups, 1};
    auto as = [](const T& x, const shape& to) { return T(x, to, fluxion::detail::same_buffer); };  // hidden from autodiff
    const T positive(cast<double>(as(t, column) != 0.0) * as(w, column));
    const T negative(as(w, column) - positive);
    const T above(cast<double>(as(p, column) > from_vector<double, D>(m_thresholds, shape{k})));  // (n, groups, k)
    const T tp(reduce_sum(above * positive, 0)), fp(reduce_sum(above * negative, 0));
    const T positives(reduce_sum(positive, 0)), negatives(reduce_sum(negative, 0));
    const shape flat_gk{groups * k}, flat_g{groups};
    this->m_table.add(T(concat<double, D>(
        {as(tp, flat_gk), as(fp, flat_gk), as(positives, flat_g), as(negatives, flat_g), as(invalid, shape{1})}, 0)));
    m_labels = groups;
  }

  options_type m_options;
  std::vector<double> m_thresholds;
  index_t m_labels = -1;
};
using auc = basic_auc<>;

/// The IoU metrics' options (Keras's IoU arguments by the same names); a class template behind the
/// alias iou_options, as basic_auc_options.
template <class Unused = void>
struct basic_iou_options {
  /// The classes whose IoU is averaged: required for iou and one_hot_iou; the mean metrics take
  /// every class, binary_iou both (0 and 1) unless given.
  std::vector<int> target_class_ids = {};
  /// y_true's class left out of the counts (a "void" label such as 255 or -1; it need not be a class).
  std::optional<int> ignore_class = std::nullopt;
  /// iou and mean_iou: y_true holds class ids (false: scores or one-hot rows, whose argmax over
  /// the last axis is the class). The one_hot metrics take false whatever this says.
  bool sparse_y_true = true;
  /// As sparse_y_true for y_pred: false for a model's scores (batch, ..., classes).
  bool sparse_y_pred = true;
  /// binary_iou: y_pred >= threshold is class 1.
  double threshold = 0.5;
  /// The name in fit's logs; empty for the metric's own (iou, mean_iou, binary_iou, one_hot_iou,
  /// one_hot_mean_iou).
  std::string name = {};
};
using iou_options = basic_iou_options<>;

namespace detail {
enum class iou_kind { iou, mean, binary, one_hot, one_hot_mean };
/// void, named through a template argument so that what uses it stays dependent (compiled only
/// where a program instantiates it).
template <auto>
using void_of = void;
}

/// Keras's IoU family: from a weighted confusion matrix of y_true's and y_pred's classes, each
/// target class's intersection over union, tp / (tp + fp + fn), and their mean over the target
/// classes that occur (in y_true or y_pred). Classes are integers in [0, num_classes); y_true and
/// y_pred (after any argmax) have one shape or differ by a last axis of 1. 0 before any update.
template <detail::iou_kind Kind>
class basic_iou : public detail::counting_metric<basic_iou<Kind>> {
  friend class detail::counting_metric<basic_iou>;
  using options_type = basic_iou_options<detail::void_of<Kind>>;
  static constexpr bool one_hot_labels = Kind == detail::iou_kind::one_hot || Kind == detail::iou_kind::one_hot_mean;
  static constexpr bool every_class = Kind == detail::iou_kind::mean || Kind == detail::iou_kind::one_hot_mean;

 public:
  /// iou, mean_iou, one_hot_iou and one_hot_mean_iou: the number of classes, and the options.
  explicit basic_iou(int num_classes, options_type options = {})
    requires(Kind != detail::iou_kind::binary)
      : m_options(std::move(options)), m_classes(num_classes) {
    check();
  }
  /// binary_iou: two classes, y_pred >= threshold being 1.
  explicit basic_iou(options_type options = {})
    requires(Kind == detail::iou_kind::binary)
      : m_options(std::move(options)), m_classes(2) {
    if (m_options.target_class_ids.empty()) m_options.target_class_ids = {0, 1};
    check();
  }

  const std::string& name() const override { return m_options.name; }
  int num_classes() const noexcept { return m_classes; }
  const options_type& options() const noexcept { return m_options; }

  /// The weighted confusion matrix (num_classes, num_classes): rows y_true's classes, columns
  /// y_pred's; zeros before any update.
  tensor<double> confusion_matrix() const {
    const auto& v = checked_values();
    const auto c = static_cast<std::size_t>(m_classes);
    std::vector<double> cm(c * c, 0.0);
    if (!v.empty()) std::copy(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(c * c), cm.begin());
    return from_vector(cm, shape{m_classes, m_classes});
  }

  double result() const override {
    const auto& v = checked_values();
    if (v.empty()) return 0.0;
    const auto c = static_cast<std::size_t>(m_classes);
    double sum = 0, valid = 0;
    for (int id : m_options.target_class_ids) {
      const auto k = static_cast<std::size_t>(id);
      double row = 0, column = 0;
      for (std::size_t j = 0; j < c; ++j) {
        row += v[k * c + j];
        column += v[j * c + k];
      }
      const double tp = v[k * c + k], denominator = row + column - tp;
      if (denominator > 1e-9) ++valid;
      sum += detail::divide_no_nan(tp, denominator);
    }
    return detail::divide_no_nan(sum, valid);
  }
  void reset() override { this->m_table.reset(); }

 private:
  void check() {
    if (m_options.name.empty())
      m_options.name = Kind == detail::iou_kind::iou      ? "iou"
                       : Kind == detail::iou_kind::mean   ? "mean_iou"
                       : Kind == detail::iou_kind::binary ? "binary_iou"
                       : one_hot_labels && every_class           ? "one_hot_mean_iou"
                                                          : "one_hot_iou";
    const std::string& n = m_options.name;
    if (m_classes < 1) throw invalid_argument(n + ": num_classes = " + std::to_string(m_classes) + " must be at least 1");
    if (!(std::isfinite(m_options.threshold)))
      throw invalid_argument(n + ": threshold = " + fluxion::detail::describe_scalar(m_options.threshold) + " must be finite");
    if constexpr (every_class) {
      if (!m_options.target_class_ids.empty())
        throw invalid_argument(n + ": target_class_ids are for iou and one_hot_iou; " + n + " averages every class");
      for (int k = 0; k < m_classes; ++k) m_options.target_class_ids.push_back(k);
    }
    if (m_options.target_class_ids.empty())
      throw invalid_argument(n + ": target_class_ids is empty; give the classes whose IoU to average (mean_iou averages "
                                 "every class)");
    for (std::size_t i = 0; i < m_options.target_class_ids.size(); ++i) {
      const int id = m_options.target_class_ids[i];
      if (id < 0 || id >= m_classes)
        throw invalid_argument(n + ": target_class_ids[" + std::to_string(i) + "] = " + std::to_string(id) +
                               " is not a class in [0, " + std::to_string(m_classes) + ")");
    }
  }

  /// The counts: the confusion matrix, then the number of class ids that were not classes.
  const std::vector<double>& checked_values() const {
    const auto& v = this->m_table.values();
    if (!v.empty() && v.back() > 0)
      throw invalid_argument(name() + ": " + fluxion::detail::describe_scalar(v.back()) + " class ids given since the last reset were not " +
                             "integers in [0, " + std::to_string(m_classes) + ") (nor ignore_class); reset() it");
    return v;
  }

  /// x's classes as doubles on D: its values, or their argmax over the last axis.
  template <class D, class X>
  tensor<double, D> classes_of(const X& x, bool sparse, const char* what) const {
    const auto v = detail::hidden_value(x);
    fluxion::detail::materialize_depth hidden_from_autodiff;
    if (sparse) return tensor<double, D>(cast<double>(detail::on_device_of<tensor<double, D>>(v)));
    const auto arg = detail::argmax_rows(v, name(), what);
    return tensor<double, D>(cast<double>(detail::on_device_of<tensor<double, D>>(arg)));
  }

  /// A batch: on a device, counted there (add_on_device); otherwise read to the host and counted
  /// by a loop, which a program compiles in a fraction of the fused statements' time.
  template <class Y, class P, class W>
  void add(const Y& y_true, const P& y_pred, const W* sample_weight) {
    if constexpr (detail::on_accelerator<P>()) add_on_device(y_true, y_pred, sample_weight);
    else add_on_host(y_true, y_pred, sample_weight);
  }

  static constexpr bool sparse_y_pred_always = Kind == detail::iou_kind::binary;
  bool sparse_true() const { return !one_hot_labels && m_options.sparse_y_true; }
  bool sparse_pred() const { return !one_hot_labels && !sparse_y_pred_always && m_options.sparse_y_pred; }

  /// Whether sample weights of shape `weights` are of y_true's shape `true_shape` where y_true is
  /// one-hot (fit spreads an example's weight over its labels): they weigh each example by their
  /// mean over the class axis.
  bool weights_per_label(const shape& weights, const shape& true_shape) const {
    return !sparse_true() && weights == true_shape && true_shape.rank() > 0;
  }

  template <class Y, class P, class W>
  void add_on_host(const Y& y_true, const P& y_pred, const W* sample_weight) {
    const detail::host_values given = detail::read(y_pred), labels = detail::read(y_true);
    detail::host_values predicted = given;
    if constexpr (Kind == detail::iou_kind::binary)
      for (auto& x : predicted.values) x = x >= m_options.threshold ? 1.0 : 0.0;
    else if (!sparse_pred()) predicted = detail::host_argmax(given, name(), "y_pred");
    const detail::host_values expected = sparse_true() ? labels : detail::host_argmax(labels, name(), "y_true");
    detail::check_same_shape(expected.dims, predicted.dims, name());
    const shape& s = predicted.dims;
    std::vector<double> w;
    if constexpr (std::is_arithmetic_v<W>) {
      w = detail::host_weights(sample_weight, s, name());
    } else {
      if (sample_weight && weights_per_label(detail::unwatched(*sample_weight).shape(), labels.dims)) {
        const detail::host_values per_label = detail::read(*sample_weight);
        detail::host_values mean{{}, expected.dims};
        const auto k = static_cast<std::size_t>(labels.dims[labels.dims.rank() - 1]);
        for (std::size_t row = 0; row * k < per_label.values.size(); ++row) {
          double sum = 0;
          for (std::size_t j = 0; j < k; ++j) sum += per_label.values[row * k + j];
          mean.values.push_back(sum / static_cast<double>(k));
        }
        w = detail::spread_weights(mean, s, name());
      } else {
        w = detail::host_weights(sample_weight, s, name());
      }
    }
    const auto c = static_cast<std::size_t>(m_classes);
    const auto is_class = [&](double x) {
      return x >= 0 && x < static_cast<double>(m_classes) && static_cast<double>(static_cast<std::int64_t>(x)) == x;
    };
    std::vector<double> counts(c * c + 1, 0.0);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double t = expected.values[i], p = predicted.values[i];
      if (m_options.ignore_class && t == static_cast<double>(*m_options.ignore_class)) continue;
      for (const auto& [what, x] : {std::pair{"y_true", t}, std::pair{"y_pred", p}})
        if (!is_class(x))
          throw invalid_argument(name() + ".update: " + what + " = " + fluxion::detail::describe_scalar(x) +
                                 " at flat index " + std::to_string(i) + " is not a class: an integer in [0, " +
                                 std::to_string(m_classes) + ")");
      counts[static_cast<std::size_t>(t) * c + static_cast<std::size_t>(p)] += w[i];
    }
    this->m_table.add(counts);
  }

  /// add on a device: the confusion matrix as fused statements and a GEMM there, nothing read
  /// back; class ids that are not classes are counted and refused at the next read.
  template <class Y, class P, class W>
  void add_on_device(const Y& y_true, const P& y_pred, const W* sample_weight) {
    const auto given = detail::hidden_value(y_pred);
    using D = device_t<decltype(given)>;
    using T = tensor<double, D>;
    T predicted;
    if constexpr (Kind == detail::iou_kind::binary) {
      fluxion::detail::materialize_depth hidden_from_autodiff;
      predicted = cast<double>(cast<double>(given) >= m_options.threshold);
    } else {
      predicted = classes_of<D>(y_pred, sparse_pred(), "y_pred");
    }
    const T expected = classes_of<D>(y_true, sparse_true(), "y_true");
    const auto [t, p] = detail::same_shape_doubles(expected, predicted, name());
    const shape& s = p.shape();
    fluxion::detail::materialize_depth hidden_from_autodiff;
    T w;
    if constexpr (std::is_arithmetic_v<W>) {
      w = detail::flat_weights<D>(sample_weight, s, name());
    } else if (sample_weight && weights_per_label(detail::unwatched(*sample_weight).shape(), detail::unwatched(y_true).shape())) {
      const T mean(reduce_mean(cast<double>(detail::hidden_value(*sample_weight)), -1));
      w = detail::flat_weights<D>(&mean, s, name());
    } else {
      w = detail::flat_weights<D>(sample_weight, s, name());
    }
    const double classes = m_classes;
    const T tf(t, shape{s.size()}, fluxion::detail::same_buffer), pf(p, shape{s.size()}, fluxion::detail::same_buffer);
    auto is_class = [&](const T& x) {
      return T(cast<double>(x >= 0.0) * cast<double>(x < classes) * cast<double>(cast<double>(cast<std::int64_t>(x)) == x));
    };
    const T kept = m_options.ignore_class ? T(cast<double>(tf != static_cast<double>(*m_options.ignore_class)))
                                          : fluxion::ones<double, D>(shape{s.size()});
    const T fits(is_class(tf) * is_class(pf));
    const T invalid(reduce_sum(kept * (1.0 - fits)));
    const T weight(w * kept * fits);
    const T rows(one_hot(cast<std::int64_t>(tf), m_classes, 1.0, 0.0) * T(weight, shape{s.size(), 1}, fluxion::detail::same_buffer));
    const T columns(one_hot(cast<std::int64_t>(pf), m_classes, 1.0, 0.0));
    const T cm(matmul(rows, columns, transpose_a));
    const index_t cells = static_cast<index_t>(m_classes) * m_classes;
    this->m_table.add(T(concat<double, D>(
        {T(cm, shape{cells}, fluxion::detail::same_buffer), T(invalid, shape{1}, fluxion::detail::same_buffer)}, 0)));
  }

  options_type m_options;
  int m_classes;
};

/// Keras's IoU: the mean IoU of target_class_ids (required), y_true and y_pred class ids (or,
/// with sparse_y_true / sparse_y_pred false, rows whose argmax is the class).
using iou = basic_iou<detail::iou_kind::iou>;
/// Keras's MeanIoU: the mean IoU of every class that occurs.
using mean_iou = basic_iou<detail::iou_kind::mean>;
/// Keras's BinaryIoU: two classes, y_pred >= threshold being 1; target_class_ids {0, 1} unless given.
using binary_iou = basic_iou<detail::iou_kind::binary>;
/// Keras's OneHotIoU: iou of one-hot y_true and y_pred's scores (their argmax over the last axis).
using one_hot_iou = basic_iou<detail::iou_kind::one_hot>;
/// Keras's OneHotMeanIoU: mean_iou of one-hot y_true and y_pred's scores.
using one_hot_mean_iou = basic_iou<detail::iou_kind::one_hot_mean>;

}  // namespace fluxion::metrics
