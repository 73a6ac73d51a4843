// Streaming metrics with Keras semantics: update() accumulates a batch, result() gives the
// weighted mean so far, reset() starts over.
//
//   #include <fluxion/metrics.hpp>
//   fx::metrics::mean loss_metric;
//   fx::metrics::sparse_categorical_accuracy accuracy;
//   for (auto [x, y] : batches) {
//     auto logits = model(x);
//     loss_metric.update(fx::losses::sparse_softmax_cross_entropy(logits, y));
//     accuracy.update(y, logits);
//   }
//   std::cout << loss_metric.result() << " " << accuracy.result();   // then reset() each epoch
//
// Each metric keeps a weighted total and a weight count, in double, and result() is their ratio
// (0 before any update, as Keras's divide_no_nan gives). Optional sample weights broadcast to the
// values, or weigh whole examples when their shape is the values' leading axes ((batch,) for
// (batch, k) values). Metrics are not differentiated: what they compute is hidden from gradient
// tapes and forward accumulators, so updating one inside a tape's scope records nothing. Shapes
// that do not fit throw fluxion::shape_error naming the metric and the shapes.
//
// On a device other than the cpu (fx::cuda), update() reads nothing back: the batch's total (and
// weight count) are reduced on the device and kept there, added to the previous batches' on the
// device, until result(), total() or count() reads them (one wait for the device, however many
// batches). So a training loop that updates an accuracy every step need not wait for each step's
// work to finish; fx::fit reads it only when a callback or the progress bar shows it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/shape.hpp"
#include "tensor.hpp"
#include "tensor/creation.hpp"

namespace fluxion::metrics {

/// What fx::fit and fx::evaluate update with each batch (fit_options::metrics, Keras's
/// compile(metrics=[...])): the batch's labels, the model's output and the sample weights (null
/// for none), as doubles on the cpu; result() is read at each epoch's end and reset() called
/// before each epoch and each evaluation. Every metric of this header but `mean` is one; a metric
/// of your own derives from it, as from Keras's Metric:
///   struct max_error : fx::metrics::metric {
///     double worst = 0;
///     const std::string& name() const override { static const std::string n = "max_error"; return n; }
///     void update_state(const fx::tensor<double>& y_true, const fx::tensor<double>& y_pred,
///                       const fx::tensor<double>*) override {
///       worst = std::max(worst, fx::reduce_max(fx::abs(y_true - y_pred)).item());
///     }
///     double result() const override { return worst; }
///     void reset() override { worst = 0; }
///   };
class metric {
 public:
  virtual ~metric() = default;
  virtual const std::string& name() const = 0;
  virtual void update_state(const tensor<double>& y_true, const tensor<double>& y_pred,
                            const tensor<double>* sample_weight) = 0;
  virtual double result() const = 0;
  virtual void reset() = 0;
};

namespace detail {

template <class X>
concept tensor_like = is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>;
template <class X>
concept tensor_or_scalar = tensor_like<X> || std::is_arithmetic_v<std::remove_cvref_t<X>>;

/// An expression, or a variable's value read without notifying any tape (peek).
template <class X>
decltype(auto) unwatched(const X& x) {
  if constexpr (is_variable_v<std::remove_cvref_t<X>>) return x.peek();
  else return (x);
}

/// Values read to the host as doubles, with their shape, computed out of autodiff's sight.
struct host_values {
  std::vector<double> values;
  shape dims;
};

template <class X>
host_values read(const X& x) {
  if constexpr (std::is_arithmetic_v<std::remove_cvref_t<X>>) {
    return {{static_cast<double>(x)}, shape{}};
  } else {
    fluxion::detail::materialize_depth hidden_from_autodiff;
    const auto t = fluxion::detail::materialize(unwatched(x));
    const auto v = t.to_vector();
    return {std::vector<double>(v.begin(), v.end()), t.shape()};
  }
}

/// x's value, materialized on its device out of autodiff's sight.
template <class X>
auto hidden_value(const X& x) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  return fluxion::detail::materialize(unwatched(x));
}

/// The last axis's argmax of each row of t (ties give the first), on t's device.
template <class T, class D>
tensor<std::int64_t, D> argmax_rows(const tensor<T, D>& t, const std::string& metric, const char* what) {
  if (t.rank() == 0)
    throw shape_error(metric + ".update: " + what + " of shape () has no class axis; give it the shape "
                      "(batch, classes)");
  if (t.shape()[t.rank() - 1] == 0)
    throw shape_error(metric + ".update: " + what + " of shape " + to_string(t.shape()) + " has no classes");
  fluxion::detail::materialize_depth hidden_from_autodiff;
  if constexpr (std::is_same_v<T, bool>) return argmax(cast<std::int32_t>(t), -1);
  else return argmax(t, -1);
}

/// 1 where the predicted class equals the expected one (any numeric type, compared as doubles:
/// a label 2.5 matches no class), else 0; computed on their device.
template <class D, class E>
tensor<double, D> match_scores(const tensor<std::int64_t, D>& predicted, const tensor<E, D>& expected) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  return cast<double>(cast<double>(predicted) == cast<double>(expected));
}

/// The sums a metric keeps on a device between reads: its weighted total and, for weighted
/// updates, the weights' sum (unweighted updates count on the host). Immutable: an update makes
/// new sums, so copies of a metric never share a running total.
struct pending_sums {
  virtual ~pending_sums() = default;
  /// (total, weights) read back to the host: one wait for the device.
  virtual std::pair<double, double> read() const = 0;
};

template <class D>
struct device_sums final : pending_sums {
  tensor<double, D> total, weights;
  device_sums(tensor<double, D> t, tensor<double, D> w) : total(std::move(t)), weights(std::move(w)) {}
  std::pair<double, double> read() const override { return {total.item(), weights.item()}; }
};

/// The device of X's value (a tensor_like X), or cpu for a number.
template <class X>
auto device_of_value() {
  if constexpr (tensor_like<X>) return device_t<decltype(hidden_value(std::declval<const X&>()))>{};
  else return cpu{};
}
/// Whether X is a tensor, variable or expression on a device other than the cpu.
template <class X>
constexpr bool on_accelerator() {
  return tensor_like<X> && !std::is_same_v<decltype(device_of_value<X>()), cpu>;
}
/// Whether A and B are both tensor-like and on one device.
template <class A, class B>
constexpr bool same_device() {
  if constexpr (tensor_like<A> && tensor_like<B>)
    return std::is_same_v<decltype(device_of_value<A>()), decltype(device_of_value<B>())>;
  else return false;
}
/// x's values as doubles, on its device.
template <class X>
auto doubles(const X& x) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  using D = decltype(device_of_value<X>());
  return tensor<double, D>(cast<double>(hidden_value(x)));
}

/// The shape sample weights of shape `weights` take against values of shape `values`: weights of
/// the values' leading axes weigh whole examples ((batch,) for (batch, k) values: (batch, 1)); any
/// other shape must broadcast to the values'.
inline shape leading_weights_shape(const shape& values, const shape& weights, const std::string& metric) {
  shape weights_shape = weights;
  if (weights_shape.rank() < values.rank() && std::equal(weights_shape.begin(), weights_shape.end(), values.begin()))
    while (weights_shape.rank() < values.rank()) weights_shape.push_back(1);
  const auto b = try_broadcast_shapes(values, weights_shape);
  if (!b || !(*b == values))
    throw shape_error(metric + ".update: sample_weight of shape " + to_string(weights) +
                      " does not broadcast to the values' shape " + to_string(values));
  return weights_shape;
}

/// The weight of each element of values of shape `values`, row-major: w spread by
/// leading_weights_shape's rule (a template only so that a program compiles it where it is used).
template <class = void>
std::vector<double> spread_weights(const host_values& w, const shape& values, const std::string& metric) {
  const shape weights_shape = leading_weights_shape(values, w.dims, metric);
  // Walk the values in row-major order with the weights' broadcast strides.
  const int rank = values.rank(), shift = rank - weights_shape.rank();
  std::vector<index_t> stride(static_cast<std::size_t>(rank), 0), index(static_cast<std::size_t>(rank), 0);
  index_t acc = 1;
  for (int d = weights_shape.rank() - 1; d >= 0; --d) {
    if (weights_shape[d] != 1) stride[static_cast<std::size_t>(d + shift)] = acc;
    acc *= weights_shape[d];
  }
  std::vector<double> out(static_cast<std::size_t>(values.size()));
  index_t at = 0;
  for (auto& weight : out) {
    weight = w.values[static_cast<std::size_t>(at)];
    for (int d = rank - 1; d >= 0; --d) {
      const auto du = static_cast<std::size_t>(d);
      at += stride[du];
      if (++index[du] < values[d]) break;
      at -= stride[du] * values[d];
      index[du] = 0;
    }
  }
  return out;
}

/// Throws unless y_true's shape ts and y_pred's ps are one, or differ by a last axis of 1 (Keras's
/// squeeze_or_expand_to_same_rank).
template <class = void>
void check_same_shape(const shape& ts, const shape& ps, const std::string& metric) {
  shape unit = ts;
  unit.push_back(1);
  shape pred_unit = ps;
  pred_unit.push_back(1);
  if (!(ts == ps) && !(unit == ps) && !(pred_unit == ts))
    throw shape_error(metric + ".update: y_true of shape " + to_string(ts) + " and y_pred of shape " + to_string(ps) +
                      " must have the same shape (or differ by a last axis of 1)");
}

/// Keras's Mean: a weighted total and a weight count.
class weighted_mean {
 public:
  explicit weighted_mean(std::string name) : m_name(std::move(name)) {}

  /// total / count; 0 before any update (Keras's divide_no_nan).
  double result() const {
    flush();
    return m_count == 0 ? 0.0 : m_total / m_count;
  }
  void reset() {
    m_total = m_count = 0;
    m_pending.reset();
  }
  double total() const {
    flush();
    return m_total;
  }
  double count() const {
    flush();
    return m_count;
  }
  const std::string& name() const noexcept { return m_name; }

 protected:
  /// Adds per-element scores (a tensor<double, D>), unweighted or with sample weights.
  template <class S>
  void add_scores(const S& scores) {
    accumulate(scores);
  }
  template <class S, class W>
  void add_scores(const S& scores, const W& sample_weight) {
    if constexpr (same_device<S, W>()) {
      const auto w = hidden_value(sample_weight);
      accumulate(scores, &w);
    } else {
      accumulate(host_values{scores.to_vector(), scores.shape()}, read(sample_weight));
    }
  }

  /// Adds a batch of values on device D (weighted by w, or unweighted when w is null): on the cpu
  /// at once; on another device reduced there and added to the sums kept there (the header
  /// comment), with nothing read back.
  template <class D, class W = double>
  void accumulate(const tensor<double, D>& v, const tensor<W, D>* w = nullptr) {
    if constexpr (std::is_same_v<D, cpu>) {
      if (!w) return accumulate(host_values{v.to_vector(), v.shape()});
      const auto wv = w->to_vector();
      return accumulate(host_values{v.to_vector(), v.shape()},
                        host_values{std::vector<double>(wv.begin(), wv.end()), w->shape()});
    } else {
      fluxion::detail::materialize_depth hidden_from_autodiff;
      tensor<double, D> total, weights;
      if (!w) {
        total = reduce_sum(v);
        m_count += static_cast<double>(v.size());
      } else {
        const tensor<double, D> wb(cast<double>(tensor<W, D>(*w, leading_weights_shape(v.shape(), w->shape()), fluxion::detail::same_buffer)));
        total = reduce_sum(v * wb);
        // Broadcasting repeats each weight the same number of times (none: both are empty).
        weights = reduce_sum(wb) * static_cast<double>(wb.size() == 0 ? 0 : v.size() / wb.size());
      }
      if (const auto* p = dynamic_cast<const device_sums<D>*>(m_pending.get())) {
        total = p->total + total;
        weights = w ? tensor<double, D>(p->weights + weights) : p->weights;
      } else {
        flush();
        if (!w) weights = fluxion::zeros<double, D>(shape{});
      }
      m_pending = std::make_shared<const device_sums<D>>(std::move(total), std::move(weights));
    }
  }

  void accumulate(const host_values& v) {
    for (double x : v.values) m_total += x;
    m_count += static_cast<double>(v.values.size());
  }

  shape leading_weights_shape(const shape& values, const shape& weights) const {
    return detail::leading_weights_shape(values, weights, m_name);
  }

  void accumulate(const host_values& v, const host_values& w) {
    const std::vector<double> weight = spread_weights(w, v.dims, m_name);
    for (std::size_t i = 0; i < v.values.size(); ++i) {
      m_total += v.values[i] * weight[i];
      m_count += weight[i];
    }
  }

 private:
  /// Folds the sums kept on a device into the host's.
  void flush() const {
    if (!m_pending) return;
    const auto [total, weights] = m_pending->read();
    m_total += total;
    m_count += weights;
    m_pending.reset();
  }

  std::string m_name;
  mutable double m_total = 0;
  mutable double m_count = 0;
  mutable std::shared_ptr<const pending_sums> m_pending;
};

/// A weighted mean that is also a fit metric: Derived::update(y_true, y_pred[, sample_weight])
/// serves update_state.
template <class Derived>
class mean_metric : public weighted_mean, public metric {
 public:
  using weighted_mean::weighted_mean;
  const std::string& name() const override { return weighted_mean::name(); }
  double result() const override { return weighted_mean::result(); }
  void reset() override { weighted_mean::reset(); }
  void update_state(const tensor<double>& y_true, const tensor<double>& y_pred, const tensor<double>* sample_weight) override {
    auto& self = static_cast<Derived&>(*this);
    if (sample_weight) self.update(y_true, y_pred, *sample_weight);
    else self.update(y_true, y_pred);
  }
};

}  // namespace detail

/// The (weighted) mean of every value given to update(): scalars or tensors of any shape.
class mean : public detail::weighted_mean {
 public:
  explicit mean(std::string name = "mean") : weighted_mean(std::move(name)) {}

  template <detail::tensor_or_scalar V>
  void update(const V& values) {
    if constexpr (detail::on_accelerator<V>()) accumulate(detail::doubles(values));
    else accumulate(detail::read(values));
  }
  template <detail::tensor_or_scalar V, detail::tensor_or_scalar W>
  void update(const V& values, const W& sample_weight) {
    if constexpr (detail::on_accelerator<V>() && detail::same_device<V, W>()) {
      const auto w = detail::hidden_value(sample_weight);
      accumulate(detail::doubles(values), &w);
    } else {
      accumulate(detail::read(values), detail::read(sample_weight));
    }
  }
};

namespace detail {

/// The last axis's argmax of each row of x on the host (ties give the first), with argmax_rows's
/// errors; the shape loses the last axis.
template <class = void>
host_values host_argmax(const host_values& x, const std::string& metric, const char* what) {
  const shape& s = x.dims;
  if (s.rank() == 0)
    throw shape_error(metric + ".update: " + what + " of shape () has no class axis; give it the shape (batch, classes)");
  const index_t k = s[s.rank() - 1];
  if (k == 0) throw shape_error(metric + ".update: " + what + " of shape " + to_string(s) + " has no classes");
  host_values out{{}, shape(s.begin(), s.end() - 1)};
  for (std::size_t row = 0; row * static_cast<std::size_t>(k) < x.values.size(); ++row) {
    const auto first = x.values.begin() + static_cast<std::ptrdiff_t>(row * static_cast<std::size_t>(k));
    out.values.push_back(static_cast<double>(std::max_element(first, first + k, [](double a, double b) { return a < b; }) - first));
  }
  return out;
}

/// A weighted mean of per-element scores Derived::scores(y_true, y_pred) (a tensor<double, D>).
/// Inputs whose y_pred is on the cpu are read to the host and scored by a loop,
/// Derived::host_scores(t, p) (host_values): a program compiles that in a fraction of the fused
/// statements' time (stop 58).
template <class Derived, class Base = mean_metric<Derived>>
class scored_mean : public Base {
 public:
  using Base::Base;
  template <tensor_like Y, tensor_like P>
  void update(const Y& y_true, const P& y_pred) {
    if constexpr (on_accelerator<P>()) this->add_scores(self().scores(y_true, y_pred));
    else this->accumulate(self().host_scores(read(y_true), read(y_pred)));
  }
  template <tensor_like Y, tensor_like P, tensor_or_scalar W>
  void update(const Y& y_true, const P& y_pred, const W& sample_weight) {
    if constexpr (on_accelerator<P>()) {
      this->add_scores(self().scores(y_true, y_pred), sample_weight);
    } else {
      const host_values s = self().host_scores(read(y_true), read(y_pred));
      this->accumulate(s, read(sample_weight));
    }
  }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

/// The scores of the accuracies: Derived::matches(y_true, y_pred) gives each example's argmax and
/// the class it should be, on one device (Derived::host_matches(t, p) on the host); an example
/// scores 1 when they agree.
template <class Derived, class Base = mean_metric<Derived>>
class accuracy_base : public scored_mean<Derived, Base> {
 public:
  using scored_mean<Derived, Base>::scored_mean;

  template <class Y, class P>
  auto scores(const Y& y_true, const P& y_pred) const {
    const auto [predicted, expected] = static_cast<const Derived&>(*this).matches(y_true, y_pred);
    return match_scores(predicted, expected);
  }
  host_values host_scores(const host_values& t, const host_values& p) const {
    const auto [predicted, expected] = static_cast<const Derived&>(*this).host_matches(t, p);
    host_values out{std::vector<double>(predicted.values.size()), predicted.dims};
    for (std::size_t i = 0; i < out.values.size(); ++i) out.values[i] = predicted.values[i] == expected.values[i] ? 1.0 : 0.0;
    return out;
  }
};

/// t on the device of U (a tensor type): itself when it is there already, else through the host
/// (the metrics' inputs on two devices: labels on the cpu, logits on a GPU).
template <class U, class T, class D>
auto on_device_of(const tensor<T, D>& t) {
  using To = device_t<U>;
  if constexpr (std::is_same_v<To, D>) return t;
  else return fluxion::detail::device_copy<To>(fluxion::detail::host_copy(t));
}

}  // namespace detail

namespace detail {
/// sparse_categorical_accuracy's (predicted, expected) classes: argmax(y_pred) over the last axis,
/// and the labels of shape (batch...) or (batch..., 1) on its device.
template <class Y, class P>
auto sparse_matches(const Y& y_true, const P& y_pred, const std::string& metric) {
  const auto logits = hidden_value(y_pred);
  const auto predicted = argmax_rows(logits, metric, "y_pred");
  const auto labels = hidden_value(y_true);
  shape with_unit_axis = predicted.shape();
  with_unit_axis.push_back(1);
  if (!(labels.shape() == predicted.shape()) && !(labels.shape() == with_unit_axis))
    throw shape_error(metric + ".update: y_true of shape " + to_string(labels.shape()) + " does not fit y_pred of shape " +
                      to_string(logits.shape()) + ": expected " + to_string(predicted.shape()) + " or " +
                      to_string(with_unit_axis));
  using L = std::remove_cvref_t<decltype(labels)>;
  return std::pair{predicted, on_device_of<decltype(predicted)>(L(labels, predicted.shape(), fluxion::detail::same_buffer))};
}

/// sparse_matches on the host: (argmax(p) over the last axis, the labels t).
template <class = void>
std::pair<host_values, host_values> sparse_host_matches(const host_values& t, const host_values& p, const std::string& metric) {
  host_values predicted = host_argmax(p, metric, "y_pred");
  shape with_unit_axis = predicted.dims;
  with_unit_axis.push_back(1);
  if (!(t.dims == predicted.dims) && !(t.dims == with_unit_axis))
    throw shape_error(metric + ".update: y_true of shape " + to_string(t.dims) + " does not fit y_pred of shape " +
                      to_string(p.dims) + ": expected " + to_string(predicted.dims) + " or " + to_string(with_unit_axis));
  host_values expected{t.values, predicted.dims};
  return {std::move(predicted), std::move(expected)};
}

/// sparse_categorical_accuracy without the fit interface (no virtual functions to compile): fit's
/// own accuracy.
class sparse_accuracy_counter : public accuracy_base<sparse_accuracy_counter, weighted_mean> {
 public:
  sparse_accuracy_counter() : accuracy_base("sparse_categorical_accuracy") {}
  template <class Y, class P>
  auto matches(const Y& y_true, const P& y_pred) const {
    return sparse_matches(y_true, y_pred, name());
  }
  auto host_matches(const host_values& t, const host_values& p) const { return sparse_host_matches(t, p, name()); }
};
}  // namespace detail

/// How often argmax(y_pred) over the last axis equals the integer label y_true: y_pred (batch,
/// classes), y_true (batch,) or (batch, 1) of any numeric type. Ties take the first maximum.
template <class Unused = void>
class basic_sparse_categorical_accuracy : public detail::accuracy_base<basic_sparse_categorical_accuracy<Unused>> {
  using base = detail::accuracy_base<basic_sparse_categorical_accuracy<Unused>>;

 public:
  explicit basic_sparse_categorical_accuracy(std::string name = "sparse_categorical_accuracy")
      : base(std::move(name)) {}

 private:
  friend class detail::accuracy_base<basic_sparse_categorical_accuracy>;
  template <class Y, class P>
  auto matches(const Y& y_true, const P& y_pred) const {
    return detail::sparse_matches(y_true, y_pred, this->name());
  }
  auto host_matches(const detail::host_values& t, const detail::host_values& p) const {
    return detail::sparse_host_matches(t, p, this->name());
  }
};
using sparse_categorical_accuracy = basic_sparse_categorical_accuracy<>;

/// How often argmax(y_pred) equals argmax(y_true) over the last axis: both (batch, classes),
/// y_true one-hot (or any scores). Ties take the first maximum.
template <class Unused = void>
class basic_categorical_accuracy : public detail::accuracy_base<basic_categorical_accuracy<Unused>> {
  using base = detail::accuracy_base<basic_categorical_accuracy<Unused>>;

 public:
  explicit basic_categorical_accuracy(std::string name = "categorical_accuracy") : base(std::move(name)) {}

 private:
  friend class detail::accuracy_base<basic_categorical_accuracy>;
  void check_shapes(const shape& true_shape, const shape& pred_shape) const {
    if (!(true_shape == pred_shape))
      throw shape_error(this->name() + ".update: y_true of shape " + to_string(true_shape) + " and y_pred of shape " +
                        to_string(pred_shape) + " must have the same shape");
  }
  template <class Y, class P>
  auto matches(const Y& y_true, const P& y_pred) const {
    check_shapes(detail::unwatched(y_true).shape(), detail::unwatched(y_pred).shape());
    const auto predicted = detail::argmax_rows(detail::hidden_value(y_pred), this->name(), "y_pred");
    const auto expected = detail::argmax_rows(detail::hidden_value(y_true), this->name(), "y_true");
    return std::pair{predicted, detail::on_device_of<decltype(predicted)>(expected)};
  }
  auto host_matches(const detail::host_values& t, const detail::host_values& p) const {
    check_shapes(t.dims, p.dims);
    return std::pair{detail::host_argmax(p, this->name(), "y_pred"), detail::host_argmax(t, this->name(), "y_true")};
  }
};
using categorical_accuracy = basic_categorical_accuracy<>;

namespace detail {

/// y_true and y_pred of one shape as doubles on y_pred's device; y_true of shape (batch,) also fits
/// y_pred of shape (batch, 1) and the other way round (Keras's squeeze_or_expand_to_same_rank).
template <class Y, class P>
auto same_shape_doubles(const Y& y_true, const P& y_pred, const std::string& metric) {
  const auto p = hidden_value(y_pred);
  const auto t = hidden_value(y_true);
  using D = device_t<decltype(p)>;
  const shape& ps = p.shape();
  check_same_shape(t.shape(), ps, metric);
  fluxion::detail::materialize_depth hidden_from_autodiff;
  const tensor<double, D> pd(cast<double>(p));
  using T = std::remove_cvref_t<decltype(t)>;
  const tensor<double, D> td(cast<double>(on_device_of<tensor<double, D>>(T(t, ps, fluxion::detail::same_buffer))));
  return std::pair{td, pd};
}

/// f(t, p) of each pair of y_true's and y_pred's values on the host, after check_same_shape; the
/// scores take y_pred's shape.
template <class F>
host_values paired_scores(const host_values& t, const host_values& p, const std::string& metric, F f) {
  check_same_shape(t.dims, p.dims, metric);
  host_values out{std::vector<double>(p.values.size()), p.dims};
  for (std::size_t i = 0; i < p.values.size(); ++i) out.values[i] = f(t.values[i], p.values[i]);
  return out;
}

/// Checks k for the top-k accuracies.
inline int checked_k(int k, const char* metric) {
  if (k < 1) throw invalid_argument(std::string(metric) + ": k = " + std::to_string(k) + " must be at least 1");
  return k;
}

/// 1 where the score of class `label` (doubles holding integers) is among the k highest of its row
/// of p (batch..., classes): fewer than k classes score strictly higher, so ties at the boundary
/// count in, as TensorFlow's in_top_k; 0 for a label that is not a class.
template <class D>
tensor<double, D> in_top_k(const tensor<double, D>& p, const tensor<double, D>& label, int k) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  const index_t classes = p.shape()[p.rank() - 1];
  const tensor<std::int64_t, D> index(cast<std::int64_t>(label));
  const tensor<double, D> target(reduce_sum(p * one_hot(index, classes, 1.0, 0.0), -1, keepdims));
  const tensor<double, D> higher(reduce_sum(cast<double>(p > target), -1));
  return tensor<double, D>(cast<double>(higher < static_cast<double>(k)) * cast<double>(label >= 0.0) *
                           cast<double>(label < static_cast<double>(classes)) * cast<double>(cast<double>(index) == label));
}

}  // namespace detail

namespace detail {
enum class error_kind { squared, absolute, percentage };

/// The (weighted) mean over every element of an error of y_true and y_pred of one shape (or
/// differing by a last axis of 1): Keras's error metrics; Root takes the square root of the mean.
template <error_kind Kind, bool Root = false>
class error_mean : public scored_mean<error_mean<Kind, Root>> {
  using base = scored_mean<error_mean<Kind, Root>>;

 public:
  explicit error_mean(std::string name = default_name()) : base(std::move(name)) {}
  double result() const override {
    if constexpr (Root) return std::sqrt(base::result());
    else return base::result();
  }
  template <class Y, class P>
  auto scores(const Y& y_true, const P& y_pred) const {
    const auto [t, p] = same_shape_doubles(y_true, y_pred, this->name());
    fluxion::detail::materialize_depth hidden_from_autodiff;
    using S = std::remove_cvref_t<decltype(t)>;
    if constexpr (Kind == error_kind::squared) return S(square(t - p));
    else if constexpr (Kind == error_kind::absolute) return S(abs(t - p));
    else return S(100.0 * abs(t - p) / maximum(abs(t), 1e-7));
  }
  host_values host_scores(const host_values& t, const host_values& p) const {
    return paired_scores(t, p, this->name(), [](double y, double x) {
      if constexpr (Kind == error_kind::squared) return (y - x) * (y - x);
      else if constexpr (Kind == error_kind::absolute) return std::abs(y - x);
      else return 100.0 * std::abs(y - x) / std::max(std::abs(y), 1e-7);
    });
  }

 private:
  static const char* default_name() {
    if constexpr (Root) return "root_mean_squared_error";
    else if constexpr (Kind == error_kind::squared) return "mean_squared_error";
    else if constexpr (Kind == error_kind::absolute) return "mean_absolute_error";
    else return "mean_absolute_percentage_error";
  }
};
}  // namespace detail

/// Keras's MeanSquaredError metric: the (weighted) mean of (y_true - y_pred)^2 over every element;
/// y_true and y_pred of one shape (or differing by a last axis of 1).
using mean_squared_error = detail::error_mean<detail::error_kind::squared>;
/// Keras's MeanAbsoluteError metric: the (weighted) mean of |y_true - y_pred|.
using mean_absolute_error = detail::error_mean<detail::error_kind::absolute>;
/// Keras's MeanAbsolutePercentageError: the (weighted) mean of 100 |y_true - y_pred| / max(|y_true|, 1e-7).
using mean_absolute_percentage_error = detail::error_mean<detail::error_kind::percentage>;
/// Keras's RootMeanSquaredError: the square root of the (weighted) mean of (y_true - y_pred)^2.
using root_mean_squared_error = detail::error_mean<detail::error_kind::squared, true>;

/// Keras's BinaryAccuracy: how often (y_pred > threshold) equals y_true (0 or 1), over every
/// element. The default threshold, 0.5, is for probabilities; give 0 for logits.
template <class Unused = void>
class basic_binary_accuracy : public detail::scored_mean<basic_binary_accuracy<Unused>> {
  using base = detail::scored_mean<basic_binary_accuracy<Unused>>;

 public:
  explicit basic_binary_accuracy(double threshold = 0.5, std::string name = "binary_accuracy")
      : base(std::move(name)), m_threshold(threshold) {}
  template <class Y, class P>
  auto scores(const Y& y_true, const P& y_pred) const {
    const auto [t, p] = detail::same_shape_doubles(y_true, y_pred, this->name());
    fluxion::detail::materialize_depth hidden_from_autodiff;
    return decltype(t)(cast<double>(cast<double>(p > m_threshold) == t));
  }
  detail::host_values host_scores(const detail::host_values& t, const detail::host_values& p) const {
    return detail::paired_scores(t, p, this->name(), [&](double y, double x) { return (x > m_threshold ? 1.0 : 0.0) == y ? 1.0 : 0.0; });
  }
  double threshold() const noexcept { return m_threshold; }

 private:
  double m_threshold;
};
using binary_accuracy = basic_binary_accuracy<>;

namespace detail {
/// Keras's top-k accuracies: Sparse takes integer labels (batch,) or (batch, 1), else one-hot labels
/// of y_pred's shape (their argmax is the class).
template <bool Sparse>
class top_k_accuracy : public scored_mean<top_k_accuracy<Sparse>> {
  using base = scored_mean<top_k_accuracy<Sparse>>;

 public:
  explicit top_k_accuracy(int k = 5, std::string name = Sparse ? "sparse_top_k_categorical_accuracy" : "top_k_categorical_accuracy")
      : base(std::move(name)), m_k(checked_k(k, Sparse ? "sparse_top_k_categorical_accuracy" : "top_k_categorical_accuracy")) {}
  template <class Y, class P>
  auto scores(const Y& y_true, const P& y_pred) const {
    const auto logits = hidden_value(y_pred);
    using D = device_t<decltype(logits)>;
    (void)argmax_rows(logits, this->name(), "y_pred");  // checks the class axis
    const auto labels = hidden_value(y_true);
    tensor<double, D> label;
    if constexpr (Sparse) {
      shape leading(logits.shape().begin(), logits.shape().end() - 1), with_unit_axis = leading;
      with_unit_axis.push_back(1);
      if (!(labels.shape() == leading) && !(labels.shape() == with_unit_axis))
        throw shape_error(this->name() + ".update: y_true of shape " + to_string(labels.shape()) +
                          " does not fit y_pred of shape " + to_string(logits.shape()) + ": expected " +
                          to_string(leading) + " or " + to_string(with_unit_axis));
      using L = std::remove_cvref_t<decltype(labels)>;
      fluxion::detail::materialize_depth hidden_from_autodiff;
      label = cast<double>(on_device_of<tensor<double, D>>(L(labels, leading, fluxion::detail::same_buffer)));
    } else {
      if (!(labels.shape() == logits.shape()))
        throw shape_error(this->name() + ".update: y_true of shape " + to_string(labels.shape()) + " and y_pred of shape " +
                          to_string(logits.shape()) + " must have the same shape");
      const auto expected = argmax_rows(labels, this->name(), "y_true");
      fluxion::detail::materialize_depth hidden_from_autodiff;
      label = cast<double>(on_device_of<tensor<double, D>>(expected));
    }
    fluxion::detail::materialize_depth hidden_from_autodiff;
    return in_top_k(tensor<double, D>(cast<double>(logits)), label, m_k);
  }
  /// scores on the host: the same checks and in_top_k's rule, by a loop.
  host_values host_scores(const host_values& t, const host_values& p) const {
    host_values rows = host_argmax(p, this->name(), "y_pred");  // checks the class axis
    const auto classes = static_cast<std::size_t>(p.dims[p.dims.rank() - 1]);
    std::vector<double> label;
    if constexpr (Sparse) {
      shape with_unit_axis = rows.dims;
      with_unit_axis.push_back(1);
      if (!(t.dims == rows.dims) && !(t.dims == with_unit_axis))
        throw shape_error(this->name() + ".update: y_true of shape " + to_string(t.dims) + " does not fit y_pred of shape " +
                          to_string(p.dims) + ": expected " + to_string(rows.dims) + " or " + to_string(with_unit_axis));
      label = t.values;
    } else {
      if (!(t.dims == p.dims))
        throw shape_error(this->name() + ".update: y_true of shape " + to_string(t.dims) + " and y_pred of shape " +
                          to_string(p.dims) + " must have the same shape");
      label = host_argmax(t, this->name(), "y_true").values;
    }
    for (std::size_t r = 0; r < rows.values.size(); ++r) {
      const double l = label[r];
      const bool is_class = l >= 0 && l < static_cast<double>(classes) && static_cast<double>(static_cast<std::int64_t>(l)) == l;
      double hit = 0;
      if (is_class) {
        const double* row = &p.values[r * classes];
        const double target = row[static_cast<std::size_t>(l)];
        std::size_t higher = 0;
        for (std::size_t c = 0; c < classes; ++c) higher += row[c] > target;
        hit = higher < static_cast<std::size_t>(m_k) ? 1.0 : 0.0;
      }
      rows.values[r] = hit;
    }
    return rows;
  }
  int k() const noexcept { return m_k; }

 private:
  int m_k;
};
}  // namespace detail

/// Keras's SparseTopKCategoricalAccuracy: how often the integer label's score is among the k
/// highest of y_pred's row (batch, classes); y_true (batch,) or (batch, 1). Ties at the k-th score
/// count in (TensorFlow's in_top_k); a label that is not a class scores 0.
using sparse_top_k_categorical_accuracy = detail::top_k_accuracy<true>;
/// Keras's TopKCategoricalAccuracy: how often argmax(y_true) (one-hot labels) is among the k highest
/// of y_pred, both (batch, classes).
using top_k_categorical_accuracy = detail::top_k_accuracy<false>;

namespace detail {
/// Precision and recall: a weighted mean of `of` over the elements `where` selects (y_pred >
/// threshold for precision, y_true for recall), so the result is tp / (tp + fp) or tp / (tp + fn),
/// 0 where nothing is selected (Keras's divide_no_nan).
template <bool Precision>
class selected_mean : public mean_metric<selected_mean<Precision>> {
 public:
  explicit selected_mean(double threshold = 0.5, std::string name = Precision ? "precision" : "recall")
      : mean_metric<selected_mean>(std::move(name)), m_threshold(threshold) {}
  template <tensor_like Y, tensor_like P>
  void update(const Y& y_true, const P& y_pred) {
    if constexpr (on_accelerator<P>()) {
      const auto [of, where] = split(y_true, y_pred);
      this->accumulate(of, &where);
    } else {
      const auto [of, where] = host_split(read(y_true), read(y_pred));
      this->accumulate(of, where);
    }
  }
  template <tensor_like Y, tensor_like P, tensor_or_scalar W>
  void update(const Y& y_true, const P& y_pred, const W& sample_weight) {
    if constexpr (on_accelerator<P>()) {
      update_on_device(y_true, y_pred, sample_weight);
    } else {
      // On the host (stop 58): the selection times the sample weights, by a loop.
      auto [of, where] = host_split(read(y_true), read(y_pred));
      const std::vector<double> w = spread_weights(read(sample_weight), of.dims, this->name());
      for (std::size_t i = 0; i < w.size(); ++i) where.values[i] *= w[i];
      this->accumulate(of, where);
    }
  }
  double threshold() const noexcept { return m_threshold; }

 private:
  template <class Y, class P, class W>
  void update_on_device(const Y& y_true, const P& y_pred, const W& sample_weight) {
    const auto [of, where] = split(y_true, y_pred);
    using D = device_t<std::remove_cvref_t<decltype(of)>>;
    fluxion::detail::materialize_depth hidden_from_autodiff;
    tensor<double, D> w;
    if constexpr (std::is_arithmetic_v<std::remove_cvref_t<W>>) {
      w = fluxion::full<double, D>(shape{}, static_cast<double>(sample_weight));
    } else {
      const auto given = hidden_value(sample_weight);
      using G = std::remove_cvref_t<decltype(given)>;
      w = cast<double>(on_device_of<tensor<double, D>>(G(given, this->leading_weights_shape(of.shape(), given.shape()), fluxion::detail::same_buffer)));
    }
    const tensor<double, D> weights(where * w);
    this->accumulate(of, &weights);
  }
  /// split on the host: (of, where) as host values of y_pred's shape.
  std::pair<host_values, host_values> host_split(const host_values& t, const host_values& p) const {
    host_values positive = paired_scores(t, p, this->name(), [](double y, double) { return y != 0 ? 1.0 : 0.0; });
    host_values predicted = paired_scores(t, p, this->name(), [&](double, double x) { return x > m_threshold ? 1.0 : 0.0; });
    if constexpr (Precision) return {std::move(positive), std::move(predicted)};
    else return {std::move(predicted), std::move(positive)};
  }
  template <class Y, class P>
  auto split(const Y& y_true, const P& y_pred) const {
    const auto [t, p] = same_shape_doubles(y_true, y_pred, this->name());
    using T = std::remove_cvref_t<decltype(t)>;
    fluxion::detail::materialize_depth hidden_from_autodiff;
    const T positive(cast<double>(t != 0.0)), predicted(cast<double>(p > m_threshold));
    return Precision ? std::pair{positive, predicted} : std::pair{predicted, positive};
  }
  double m_threshold;
};
}  // namespace detail

/// Keras's Precision: true positives / (true + false positives), a prediction positive where
/// y_pred > threshold (0.5: for probabilities; 0 for logits) and a label where y_true is not 0.
using precision = detail::selected_mean<true>;
/// Keras's Recall: true positives / (true positives + false negatives), with precision's threshold.
using recall = detail::selected_mean<false>;

}  // namespace fluxion::metrics
#include "metrics/confusion.hpp"  // auc and the iou metrics
