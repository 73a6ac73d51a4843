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
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/shape.hpp"
#include "tensor.hpp"

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
  shape source_dims;  // for an argmax, the shape it reduced
};

template <class X>
host_values read(const X& x) {
  if constexpr (std::is_arithmetic_v<std::remove_cvref_t<X>>) {
    return {{static_cast<double>(x)}, shape{}, shape{}};
  } else {
    fluxion::detail::materialize_depth hidden_from_autodiff;
    const auto t = fluxion::detail::materialize(unwatched(x));
    const auto v = t.to_vector();
    return {std::vector<double>(v.begin(), v.end()), t.shape(), t.shape()};
  }
}

/// The last axis's argmax of each row, out of autodiff's sight (ties give the first).
template <class X>
host_values read_argmax(const X& x, const std::string& metric, const char* what) {
  fluxion::detail::materialize_depth hidden_from_autodiff;
  const auto t = fluxion::detail::materialize(unwatched(x));
  if (t.rank() == 0)
    throw shape_error(metric + ".update: " + what + " of shape () has no class axis; give it the shape "
                      "(batch, classes)");
  if (t.shape()[t.rank() - 1] == 0)
    throw shape_error(metric + ".update: " + what + " of shape " + to_string(t.shape()) + " has no classes");
  const tensor<std::int64_t, device_t<decltype(t)>> a = [&] {
    if constexpr (std::is_same_v<value_type_t<decltype(t)>, bool>) return argmax(cast<std::int32_t>(t), -1);
    else return argmax(t, -1);
  }();
  const auto v = a.to_vector();
  return {std::vector<double>(v.begin(), v.end()), a.shape(), t.shape()};
}

/// Keras's Mean: a weighted total and a weight count.
class weighted_mean {
 public:
  explicit weighted_mean(std::string name) : m_name(std::move(name)) {}

  /// total / count; 0 before any update (Keras's divide_no_nan).
  double result() const { return m_count == 0 ? 0.0 : m_total / m_count; }
  void reset() { m_total = m_count = 0; }
  double total() const noexcept { return m_total; }
  double count() const noexcept { return m_count; }
  const std::string& name() const noexcept { return m_name; }

 protected:
  void accumulate(const host_values& v) {
    for (double x : v.values) m_total += x;
    m_count += static_cast<double>(v.values.size());
  }

  void accumulate(const host_values& v, const host_values& w) {
    // Weights of the values' leading axes weigh whole examples: (batch,) for (batch, k) values.
    shape weights_shape = w.dims;
    if (weights_shape.rank() < v.dims.rank() &&
        std::equal(weights_shape.begin(), weights_shape.end(), v.dims.begin()))
      while (weights_shape.rank() < v.dims.rank()) weights_shape.push_back(1);
    const auto b = try_broadcast_shapes(v.dims, weights_shape);
    if (!b || !(*b == v.dims))
      throw shape_error(m_name + ".update: sample_weight of shape " + to_string(w.dims) +
                        " does not broadcast to the values' shape " + to_string(v.dims));
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
  std::string m_name;
  double m_total = 0;
  double m_count = 0;
};

}  // namespace detail

/// The (weighted) mean of every value given to update(): scalars or tensors of any shape.
class mean : public detail::weighted_mean {
 public:
  explicit mean(std::string name = "mean") : weighted_mean(std::move(name)) {}

  template <detail::tensor_or_scalar V>
  void update(const V& values) {
    accumulate(detail::read(values));
  }
  template <detail::tensor_or_scalar V, detail::tensor_or_scalar W>
  void update(const V& values, const W& sample_weight) {
    accumulate(detail::read(values), detail::read(sample_weight));
  }
};

namespace detail {

/// The update() of the accuracies: Derived::matches(y_true, y_pred) gives each example's argmax
/// and the class it should be; an example scores 1 when they agree.
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
    accumulate(scores(y_true, y_pred), read(sample_weight));
  }

 private:
  template <class Y, class P>
  host_values scores(const Y& y_true, const P& y_pred) const {
    auto [predicted, expected] = static_cast<const Derived&>(*this).matches(y_true, y_pred);
    for (std::size_t i = 0; i < predicted.values.size(); ++i)
      predicted.values[i] = predicted.values[i] == expected[i] ? 1.0 : 0.0;
    return predicted;
  }
};

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
  std::pair<detail::host_values, std::vector<double>> matches(const Y& y_true, const P& y_pred) const {
    detail::host_values predicted = detail::read_argmax(y_pred, name(), "y_pred");
    detail::host_values labels = detail::read(y_true);
    shape with_unit_axis = predicted.dims;
    with_unit_axis.push_back(1);
    if (!(labels.dims == predicted.dims) && !(labels.dims == with_unit_axis))
      throw shape_error(name() + ".update: y_true of shape " + to_string(labels.dims) + " does not fit y_pred of shape " +
                        to_string(predicted.source_dims) + ": expected " + to_string(predicted.dims) + " or " +
                        to_string(with_unit_axis));
    return {std::move(predicted), std::move(labels.values)};
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
  std::pair<detail::host_values, std::vector<double>> matches(const Y& y_true, const P& y_pred) const {
    const shape true_shape = detail::unwatched(y_true).shape();
    const shape pred_shape = detail::unwatched(y_pred).shape();
    if (!(true_shape == pred_shape))
      throw shape_error(name() + ".update: y_true of shape " + to_string(true_shape) + " and y_pred of shape " +
                        to_string(pred_shape) + " must have the same shape");
    detail::host_values predicted = detail::read_argmax(y_pred, name(), "y_pred");
    return {std::move(predicted), detail::read_argmax(y_true, name(), "y_true").values};
  }
};

}  // namespace fluxion::metrics
