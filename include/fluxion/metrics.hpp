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
        const tensor<double, D> wb(cast<double>(tensor<W, D>(*w, leading_weights_shape(v.shape(), w->shape()))));
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

  /// The shape weights of shape `weights` take against values of shape `values`: weights of the
  /// values' leading axes weigh whole examples ((batch,) for (batch, k) values: (batch, 1)); any
  /// other shape must broadcast to the values'.
  shape leading_weights_shape(const shape& values, const shape& weights) const {
    shape weights_shape = weights;
    if (weights_shape.rank() < values.rank() && std::equal(weights_shape.begin(), weights_shape.end(), values.begin()))
      while (weights_shape.rank() < values.rank()) weights_shape.push_back(1);
    const auto b = try_broadcast_shapes(values, weights_shape);
    if (!b || !(*b == values))
      throw shape_error(m_name + ".update: sample_weight of shape " + to_string(weights) +
                        " does not broadcast to the values' shape " + to_string(values));
    return weights_shape;
  }

  void accumulate(const host_values& v, const host_values& w) {
    const shape weights_shape = leading_weights_shape(v.dims, w.dims);
    // Walk the values in row-major order with the weights' broadcast strides.
    const int rank = v.dims.rank(), shift = rank - weights_shape.rank();
    std::vector<index_t> stride(static_cast<std::size_t>(rank), 0), index(static_cast<std::size_t>(rank), 0);
    index_t acc = 1;
    for (int d = weights_shape.rank() - 1; d >= 0; --d) {
      if (weights_shape[d] != 1) stride[static_cast<std::size_t>(d + shift)] = acc;
      acc *= weights_shape[d];
    }
    index_t at = 0;
    for (double x : v.values) {
      const double weight = w.values[static_cast<std::size_t>(at)];
      m_total += x * weight;
      m_count += weight;
      for (int d = rank - 1; d >= 0; --d) {
        const auto du = static_cast<std::size_t>(d);
        at += stride[du];
        if (++index[du] < v.dims[d]) break;
        at -= stride[du] * v.dims[d];
        index[du] = 0;
      }
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

/// The update() of the accuracies: Derived::matches(y_true, y_pred) gives each example's argmax
/// and the class it should be, on one device; an example scores 1 when they agree.
template <class Derived>
class accuracy_base : public weighted_mean {
 public:
  using weighted_mean::weighted_mean;

  template <tensor_like Y, tensor_like P>
  void update(const Y& y_true, const P& y_pred) {
    accumulate(scores(y_true, y_pred));
  }
  template <tensor_like Y, tensor_like P, tensor_or_scalar W>
  void update(const Y& y_true, const P& y_pred, const W& sample_weight) {
    const auto s = scores(y_true, y_pred);
    if constexpr (same_device<decltype(s), W>()) {
      const auto w = hidden_value(sample_weight);
      accumulate(s, &w);
    } else {
      accumulate(host_values{s.to_vector(), s.shape()}, read(sample_weight));
    }
  }

 private:
  template <class Y, class P>
  auto scores(const Y& y_true, const P& y_pred) const {
    const auto [predicted, expected] = static_cast<const Derived&>(*this).matches(y_true, y_pred);
    return match_scores(predicted, expected);
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

/// How often argmax(y_pred) over the last axis equals the integer label y_true: y_pred (batch,
/// classes), y_true (batch,) or (batch, 1) of any numeric type. Ties take the first maximum.
class sparse_categorical_accuracy : public detail::accuracy_base<sparse_categorical_accuracy> {
 public:
  explicit sparse_categorical_accuracy(std::string name = "sparse_categorical_accuracy")
      : accuracy_base(std::move(name)) {}

 private:
  friend class detail::accuracy_base<sparse_categorical_accuracy>;
  template <class Y, class P>
  auto matches(const Y& y_true, const P& y_pred) const {
    const auto logits = detail::hidden_value(y_pred);
    const auto predicted = detail::argmax_rows(logits, name(), "y_pred");
    const auto labels = detail::hidden_value(y_true);
    shape with_unit_axis = predicted.shape();
    with_unit_axis.push_back(1);
    if (!(labels.shape() == predicted.shape()) && !(labels.shape() == with_unit_axis))
      throw shape_error(name() + ".update: y_true of shape " + to_string(labels.shape()) + " does not fit y_pred of shape " +
                        to_string(logits.shape()) + ": expected " + to_string(predicted.shape()) + " or " +
                        to_string(with_unit_axis));
    using L = std::remove_cvref_t<decltype(labels)>;
    return std::pair{predicted, detail::on_device_of<decltype(predicted)>(L(labels, predicted.shape()))};
  }
};

/// How often argmax(y_pred) equals argmax(y_true) over the last axis: both (batch, classes),
/// y_true one-hot (or any scores). Ties take the first maximum.
class categorical_accuracy : public detail::accuracy_base<categorical_accuracy> {
 public:
  explicit categorical_accuracy(std::string name = "categorical_accuracy") : accuracy_base(std::move(name)) {}

 private:
  friend class detail::accuracy_base<categorical_accuracy>;
  template <class Y, class P>
  auto matches(const Y& y_true, const P& y_pred) const {
    const shape true_shape = detail::unwatched(y_true).shape();
    const shape pred_shape = detail::unwatched(y_pred).shape();
    if (!(true_shape == pred_shape))
      throw shape_error(name() + ".update: y_true of shape " + to_string(true_shape) + " and y_pred of shape " +
                        to_string(pred_shape) + " must have the same shape");
    const auto predicted = detail::argmax_rows(detail::hidden_value(y_pred), name(), "y_pred");
    const auto expected = detail::argmax_rows(detail::hidden_value(y_true), name(), "y_true");
    return std::pair{predicted, detail::on_device_of<decltype(predicted)>(expected)};
  }
};

}  // namespace fluxion::metrics
