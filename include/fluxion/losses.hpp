// Loss functions with Keras semantics, composed from differentiable primitives, so a gradient tape
// (or forward mode, or a higher-order tape) differentiates them with no rule of their own.
//
//   #include <fluxion/losses.hpp>
//   fx::gradient_tape tape;
//   fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(model(x), labels);
//   auto grads = tape.gradient(loss, model.trainable_variables());
//
// Logits and predictions are float or double, with the class (or feature) axis last: (batch,
// classes). Labels and targets of another element type are converted to the logits' type.
// reduction::none gives one value per example: the cross entropies reduce the class axis; the
// elementwise losses (binary cross entropy, mean squared error, Huber) average the last axis, as
// Keras does, when the input has rank 2 or more, and treat each element of a rank-1 input as an
// example. reduction::mean (Keras's sum over batch size) averages those values, reduction::sum adds
// them. Every loss returns a materialized tensor<T>, of shape () unless the reduction is none.
//
// Every loss also takes Keras's sample_weight after its labels or targets (and label smoothing or
// delta): float weights scale the per-example losses, and the mean divides by their number;
// a bool mask (a tagger's padded steps) drops the losses where it is false, and the mean is over
// the kept ones (PyTorch's ignore_index). See reduce_weighted for the shapes it takes.
//   fx::losses::sparse_softmax_cross_entropy(logits, labels, mask);  // (batch, time, classes), (batch, time)
//
// The cross entropies go through reduce_logsumexp and the binary one through
// max(x, 0) - x z + log1p(exp(-|x|)), so |logits| of 1e4 give finite losses and gradients.
// Shapes that disagree throw fluxion::shape_error naming the loss and both shapes; class indices
// outside [0, classes) throw fluxion::out_of_range naming the value and its position. A loss that
// comes out NaN or infinite throws fluxion::numeric_error naming the loss, the value, the example
// and the first NaN or infinite input element ("sparse_softmax_cross_entropy: the loss is nan;
// logits[1, 0] = nan"), before any gradient is taken from it, so that a training loop stops with
// its variables intact instead of training on NaN. On a device the loss is not read back for this
// (it would wait for the queue): fit and compiled_step check it there.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.hpp"
#include "core/shape.hpp"
#include "tensor.hpp"

namespace fluxion::losses {

/// How per-example losses are combined: their mean, their sum, or none (one value per example).
enum class reduction { mean, sum, none };

/// Keras's label_smoothing for the cross entropies, a value s in [0, 1]: they train toward the
/// labels (1 - s) y + s / classes (softmax, sparse or not) or (1 - s) z + s / 2 (sigmoid) instead
/// of y or z. PyTorch's CrossEntropyLoss(label_smoothing = s) is the softmax one.
///   fx::losses::sparse_softmax_cross_entropy(logits, labels, fx::losses::label_smoothing{0.1});
struct label_smoothing {
  double value = 0;
};

namespace detail {

template <class X>
concept tensor_like = is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>;

template <class X>
using expr_of = fluxion::detail::expr_t<X>;

template <class E>
constexpr void require_floating() {
  static_assert(std::is_floating_point_v<value_type_t<E>>,
                "fluxion::losses: logits and predictions must be float or double tensors; convert them with "
                "fluxion::cast<float>(x) first.");
}

/// `y` as an expression of element type T (labels and targets follow the logits' type).
template <class T, class Y>
auto as_type(Y&& y) {
  auto e = fluxion::detail::as_expr<Y>(std::forward<Y>(y));
  if constexpr (std::is_same_v<value_type_t<decltype(e)>, T>) return e;
  else return cast<T>(std::move(e));
}

inline void check_same_shape(const char* loss, const char* a_name, const shape& a, const char* b_name,
                             const shape& b) {
  if (!(a == b))
    throw shape_error(std::string(loss) + ": " + a_name + " " + to_string(a) + " and " + b_name + " " + to_string(b) +
                      " must have the same shape");
}

/// The first operand as an expression of a floating type and the second converted to it, once
/// their shapes are checked to agree.
template <class A, class B>
auto floating_pair(const char* loss, const char* a_name, A&& a, const char* b_name, B&& b) {
  auto x = fluxion::detail::as_expr<A>(std::forward<A>(a));
  require_floating<decltype(x)>();
  auto y = as_type<value_type_t<decltype(x)>>(std::forward<B>(b));
  check_same_shape(loss, a_name, x.shape(), b_name, y.shape());
  return std::pair{std::move(x), std::move(y)};
}

inline void check_smoothing(const char* loss, label_smoothing s) {
  if (!(s.value >= 0 && s.value <= 1)) {
    std::ostringstream os;
    os << loss << ": label_smoothing = " << s.value << " must be in [0, 1]";
    throw invalid_argument(os.str());
  }
}

/// Labels y smoothed toward the uniform distribution over `classes`: (1 - s) y + s / classes, which
/// is y itself, exactly, for s = 0.
template <class T, class Y>
auto smoothed(const Y& y, double s, index_t classes) {
  return y * static_cast<T>(1 - s) + static_cast<T>(s / static_cast<double>(classes));
}

inline void check_class_axis(const char* loss, const shape& logits) {
  if (logits.rank() == 0)
    throw shape_error(std::string(loss) + ": logits of shape () have no class axis; give them the shape "
                      "(batch, classes)");
}

/// Combines per-example losses as `r` asks.
template <class E>
auto reduce_examples(const E& per_example, reduction r) {
  using result = tensor<value_type_t<E>, device_t<E>>;
  switch (r) {
    case reduction::none: return result(per_example);
    case reduction::sum: return result(reduce_sum(per_example));
    case reduction::mean: break;
  }
  return result(reduce_mean(per_example));
}

/// An elementwise loss: its per-example value averages the last axis when the rank is 2 or more.
template <class E>
auto reduce_elementwise(const E& elementwise, reduction r) {
  if (elementwise.shape().rank() >= 2) {
    // The mean of per-example means is the mean of all elements: one reduction, not two.
    if (r == reduction::mean) return tensor<value_type_t<E>, device_t<E>>(reduce_mean(elementwise));
    return reduce_examples(reduce_mean(elementwise, -1), r);
  }
  return reduce_examples(elementwise, r);
}

/// sum_c y_c (logsumexp(x) - x_c) over the class axis: -sum_c y_c log softmax(x)_c, stably.
template <class X, class Y>
auto softmax_cross_entropy_per_example(const X& logits, const Y& labels) {
  return reduce_sum(labels * (reduce_logsumexp(logits, -1, keepdims) - logits), -1);
}

using fluxion::detail::position_text;

/// "logits[1, 0] = nan" for the first NaN or infinite element of `input`, or "" when there is none.
/// Only tensors are read: evaluating an expression input again would compile a statement of its own
/// into every program for an error path, so `scanned` is cleared for one instead.
template <class E>
std::string first_nonfinite(const char* name, const E& input, bool& scanned) {
  if constexpr (is_tensor_v<E>) {
    const auto values = input.to_vector();
    for (std::size_t i = 0; i < values.size(); ++i)
      if (!std::isfinite(values[i]))
        return std::string(name) + position_text(static_cast<index_t>(i), input.shape()) + " = " +
               fluxion::detail::value_text(static_cast<double>(values[i]));
  } else {
    scanned = false;
  }
  return "";
}

/// `loss`, once every value is finite: else a numeric_error names the loss, the value, the example
/// (reduction::none) and the first NaN or infinite element of the named inputs (name, expression
/// pairs), read only then. Device tensors are returned unchecked.
template <class T, class D, class... Named>
tensor<T, D> finite_loss([[maybe_unused]] const char* name, tensor<T, D> loss, [[maybe_unused]] const Named&... inputs) {
  if constexpr (std::is_same_v<D, cpu>) {
    const T* v = loss.data();
    index_t bad = 0;
    while (bad < loss.size() && std::isfinite(v[bad])) ++bad;
    if (bad < loss.size()) {
      std::string where;
      bool scanned = true;
      ((where.empty() ? where = first_nonfinite(inputs.first, inputs.second, scanned) : where), ...);
      if (where.empty())
        where = scanned ? std::string("every input is finite: the loss overflowed ") + dtype_name<T>()
                        : std::string("no NaN or infinity in the inputs that are tensors (an expression input is not "
                                      "evaluated again to look)");
      const std::string example = loss.rank() > 0 ? " at example " + position_text(bad, loss.shape()) : "";
      throw numeric_error(std::string(name) + ": the loss is " + fluxion::detail::value_text(static_cast<double>(v[bad])) + example +
                              "; " + where,
                          static_cast<double>(v[bad]));
    }
  }
  return loss;
}

/// Keras's sample_weight on per-example losses of shape S (a loss's reduction::none): weights of
/// shape S, S with a unit axis appended (Keras's (batch, 1) for (batch,) losses), a leading part of
/// S (one weight per example for per-step losses: (batch,) for (batch, time)), or a scalar.
/// Float weights scale each loss, and the mean divides their weighted sum by the number of losses
/// (Keras's sum_over_batch_size, not the weights' sum). A bool mask (Keras's propagated mask)
/// drops the losses where it is false, and the mean is over the kept ones (Keras's mask; PyTorch's
/// ignore_index); with none kept it is 0. WT is bool or T: the statements are one instance per
/// element type in a program whatever the weights came from (and prebuilt with
/// FLUXION_PREBUILT_KERNELS, nn/prebuilt.hpp).
template <class T, class WT, class D = cpu, int Config = fluxion::detail::autodiff_config>
tensor<T, D> reduce_weighted_tensors(const char* name, const tensor<T, D>& losses, const tensor<WT, D>& w, reduction r) {
  const shape& ls = losses.shape();
  const shape ws = fluxion::detail::sample_weight_shape(w.shape(), ls.rank());
  // Valid: ws is ls, or a leading part of it followed by the unit axes sample_weight_shape added.
  const int given = std::min(w.shape().rank(), ls.rank());
  if (ws.rank() != ls.rank() || !std::equal(ws.begin(), ws.begin() + given, ls.begin())) {
    shape with_unit_axis = ls;
    with_unit_axis.push_back(1);
    throw shape_error(std::string(name) + ": sample_weight of shape " + to_string(w.shape()) +
                      " does not fit the per-example losses of shape " + to_string(ls) + ": give it the shape " +
                      to_string(ls) + ", " + to_string(with_unit_axis) + ", a leading part of " + to_string(ls) +
                      " or ()");
  }
  const tensor<WT, D> weights(w, ws, fluxion::detail::same_buffer);
  if constexpr (std::is_same_v<WT, bool>) {
    const auto kept = where(weights, losses, T(0));
    switch (r) {
      case reduction::none: return tensor<T, D>(kept);
      case reduction::sum: return tensor<T, D>(reduce_sum(kept));
      case reduction::mean: break;
    }
    // Each mask element stands for size(losses) / size(mask) losses (the broadcast ones).
    const double per_element = weights.size() == 0 ? 0.0 : static_cast<double>(ls.size()) / static_cast<double>(weights.size());
    return tensor<T, D>(reduce_sum(kept) / maximum(reduce_sum(cast<T>(weights)) * static_cast<T>(per_element), T(1)));
  } else {  // WT is T
    const auto weighted = losses * weights;
    tensor<T, D> out = [&] {
      switch (r) {
        case reduction::none: return tensor<T, D>(weighted);
        case reduction::sum: return tensor<T, D>(reduce_sum(weighted));
        case reduction::mean: break;
      }
      return tensor<T, D>(reduce_sum(weighted) * static_cast<T>(1.0 / static_cast<double>(std::max<index_t>(ls.size(), 1))));
    }();
    return finite_loss(name, std::move(out), std::pair{"sample_weight", weights});
  }
}

/// reduce_weighted_tensors of any weights: a bool mask as it is, numbers converted to T.
template <class T, class D, class W>
tensor<T, D> reduce_weighted(const char* name, const tensor<T, D>& losses, W&& sample_weight, reduction r) {
  auto w = fluxion::detail::materialize(fluxion::detail::as_expr<W>(std::forward<W>(sample_weight)));
  using WT = value_type_t<decltype(w)>;
  static_assert(std::is_same_v<device_t<decltype(w)>, D>,
                "fluxion::losses: sample_weight is on another device than the logits or predictions; move it with "
                "fluxion::to<Device>(sample_weight).");
  if constexpr (!std::is_same_v<device_t<decltype(w)>, D>) return tensor<T, D>();  // the message above only
  else if constexpr (std::is_same_v<WT, bool> || std::is_same_v<WT, T>) return reduce_weighted_tensors<T>(name, losses, w, r);
  else return reduce_weighted_tensors<T>(name, losses, tensor<T, D>(cast<T>(w)), r);
}

}  // namespace detail

/// Cross entropy between softmax(logits) and a distribution over classes (one-hot or soft labels)
/// of the same shape: -sum_c labels_c log softmax(logits)_c per example; with label smoothing s,
/// of the labels (1 - s) labels + s / classes.
template <detail::tensor_like L, detail::tensor_like Y>
auto softmax_cross_entropy(L&& logits, Y&& labels, label_smoothing s, reduction r = reduction::mean) {
  const char* name = "softmax_cross_entropy";
  const auto [x, y] = detail::floating_pair(name, "logits", std::forward<L>(logits), "labels", std::forward<Y>(labels));
  detail::check_class_axis(name, x.shape());
  detail::check_smoothing(name, s);
  using T = value_type_t<decltype(x)>;
  const index_t classes = x.shape()[x.shape().rank() - 1];
  return detail::finite_loss(
      name, detail::reduce_examples(detail::softmax_cross_entropy_per_example(x, detail::smoothed<T>(y, s.value, classes)), r),
      std::pair{"logits", x}, std::pair{"labels", y});
}

/// softmax_cross_entropy without label smoothing.
template <detail::tensor_like L, detail::tensor_like Y>
auto softmax_cross_entropy(L&& logits, Y&& labels, reduction r = reduction::mean) {
  return softmax_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), label_smoothing{}, r);
}

/// softmax_cross_entropy with Keras's sample_weight (see reduce_weighted): float weights per example, or a bool
/// mask whose false entries leave the loss (the mean is then over the kept ones).
template <detail::tensor_like L, detail::tensor_like Y, detail::tensor_like W>
auto softmax_cross_entropy(L&& logits, Y&& labels, label_smoothing s, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("softmax_cross_entropy",
                                 softmax_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), s, reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// softmax_cross_entropy with sample_weight and without label smoothing.
template <detail::tensor_like L, detail::tensor_like Y, detail::tensor_like W>
auto softmax_cross_entropy(L&& logits, Y&& labels, W&& sample_weight, reduction r = reduction::mean) {
  return softmax_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), label_smoothing{}, std::forward<W>(sample_weight), r);
}

namespace detail {
/// The statements of sparse_softmax_cross_entropy on tensors: one instance per element type and
/// label type in a program, whatever expression the logits came from (and prebuilt with
/// FLUXION_PREBUILT_KERNELS, nn/prebuilt.hpp).
template <class T, class IT, class D = cpu, int Config = fluxion::detail::autodiff_config>
tensor<T, D> sparse_softmax_cross_entropy_tensors(const tensor<T, D>& x, tensor<IT, D> indices, reduction r,
                                                  double smoothing) {
  const char* name = "sparse_softmax_cross_entropy";
  check_class_axis(name, x.shape());
  check_smoothing(name, label_smoothing{smoothing});
  const shape& xs = x.shape();
  const shape examples(xs.begin(), xs.end() - 1);
  shape with_unit_axis = examples;  // Keras also takes labels of shape (batch, 1)
  with_unit_axis.push_back(1);
  if (indices.shape() == with_unit_axis) indices = decltype(indices)(indices, examples, fluxion::detail::same_buffer);
  if (!(indices.shape() == examples))
    throw shape_error(std::string(name) + ": logits " + to_string(xs) + " need labels of shape " +
                      to_string(examples) + " or " + to_string(with_unit_axis) + ", not " + to_string(indices.shape()));
  const index_t classes = xs[xs.rank() - 1];
  // On a device, checked there without waiting (expr/indexing.hpp): a bad label's one-hot row is 0.
  fluxion::detail::check_index_range(indices, classes, [name, examples, classes](index_t i, IT v) {
    return std::string(name) + ": labels" + position_text(i, examples) + " = " + std::to_string(v) + " is not in [0, " +
           std::to_string(classes) + ")";
  });
  // Labels as wide as the logits' values (int32 with float, int64 with double) compare in the SIMD
  // loop (backend/cpu/evaluator.hpp, int_lanes); int64 labels with float logits ran the scalar
  // loop, 1.7-2.2x the int32 loss step's time over 10 and 64 classes (stop 88). On the cpu the
  // labels are checked above, so each fits the other type, and only its statements are compiled
  // (kept beside the int64 ones they cost a header-only program 10% more GGC memory); on a device
  // a bad label's row must stay 0, so they stay as given.
  using lane_label = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
  if constexpr (std::is_same_v<D, cpu> && !std::is_same_v<IT, lane_label>) {
    if (sizeof(IT) > sizeof(lane_label) && classes > static_cast<index_t>(std::numeric_limits<lane_label>::max()))
      throw invalid_argument(std::string(name) + ": " + std::to_string(classes) + " classes are more than " +
                             std::to_string(std::numeric_limits<lane_label>::max()) +
                             ", the most float logits take on the cpu (the labels are read as int32)");
    return sparse_softmax_cross_entropy_tensors<T, lane_label, D, Config>(
        x, tensor<lane_label, D>(fluxion::cast<lane_label>(indices)), r, smoothing);
  } else {
    // One statement whatever the smoothing: s = 0 gives the one-hot labels exactly.
    return finite_loss(
        name, reduce_examples(softmax_cross_entropy_per_example(x, smoothed<T>(one_hot<T>(indices, classes), smoothing, classes)), r),
        std::pair{"logits", x});
  }
}
}  // namespace detail

/// Cross entropy between softmax(logits) and integer class indices: logits (batch, classes),
/// labels (batch,) (or (batch, 1)) of int32 or int64, each in [0, classes); with label smoothing s,
/// against the one-hot labels smoothed to (1 - s) one_hot + s / classes (PyTorch's
/// CrossEntropyLoss(label_smoothing = s); Keras smooths only the one-hot form).
template <detail::tensor_like L, detail::tensor_like I>
auto sparse_softmax_cross_entropy(L&& logits, I&& labels, label_smoothing s, reduction r = reduction::mean) {
  auto x = fluxion::detail::as_expr<L>(std::forward<L>(logits));
  using T = value_type_t<decltype(x)>;
  detail::require_floating<decltype(x)>();
  using IT = value_type_t<detail::expr_of<I>>;
  constexpr bool integer_labels = std::is_same_v<IT, std::int32_t> || std::is_same_v<IT, std::int64_t>;
  constexpr bool same_device = std::is_same_v<device_t<decltype(x)>, device_t<detail::expr_of<I>>>;
  static_assert(integer_labels,
                "fluxion::losses::sparse_softmax_cross_entropy: labels must be int32 or int64 class indices; "
                "for one-hot or soft labels use softmax_cross_entropy.");
  static_assert(same_device,
                "fluxion::losses::sparse_softmax_cross_entropy: the logits and the labels are on different devices; "
                "move the labels with fluxion::to<Device>(labels).");
  if constexpr (integer_labels && same_device) {  // else: the message above only
    auto indices = fluxion::detail::materialize(fluxion::detail::as_expr<I>(std::forward<I>(labels)));
    return detail::sparse_softmax_cross_entropy_tensors<T>(fluxion::detail::materialize(x), std::move(indices), r,
                                                           s.value);
  } else {
    return tensor<T, device_t<decltype(x)>>();
  }
}

/// sparse_softmax_cross_entropy without label smoothing.
template <detail::tensor_like L, detail::tensor_like I>
auto sparse_softmax_cross_entropy(L&& logits, I&& labels, reduction r = reduction::mean) {
  return sparse_softmax_cross_entropy(std::forward<L>(logits), std::forward<I>(labels), label_smoothing{}, r);
}

/// sparse_softmax_cross_entropy with Keras's sample_weight (see reduce_weighted): float weights per example, or a bool
/// mask whose false entries leave the loss (the mean is then over the kept ones).
template <detail::tensor_like L, detail::tensor_like I, detail::tensor_like W>
auto sparse_softmax_cross_entropy(L&& logits, I&& labels, label_smoothing s, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("sparse_softmax_cross_entropy",
                                 sparse_softmax_cross_entropy(std::forward<L>(logits), std::forward<I>(labels), s, reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// sparse_softmax_cross_entropy with sample_weight and without label smoothing.
template <detail::tensor_like L, detail::tensor_like I, detail::tensor_like W>
auto sparse_softmax_cross_entropy(L&& logits, I&& labels, W&& sample_weight, reduction r = reduction::mean) {
  return sparse_softmax_cross_entropy(std::forward<L>(logits), std::forward<I>(labels), label_smoothing{}, std::forward<W>(sample_weight), r);
}

/// Binary cross entropy between sigmoid(logits) and labels in [0, 1] of the same shape, computed
/// as TensorFlow's sigmoid_cross_entropy_with_logits: max(x, 0) - x z + log1p(exp(-|x|)); with
/// label smoothing s, of the labels (1 - s) z + s / 2 (Keras's BinaryCrossentropy(from_logits=True,
/// label_smoothing=s)).
template <detail::tensor_like L, detail::tensor_like Y>
auto sigmoid_binary_cross_entropy(L&& logits, Y&& labels, label_smoothing s, reduction r = reduction::mean) {
  const char* name = "sigmoid_binary_cross_entropy";
  const auto [x, z] = detail::floating_pair(name, "logits", std::forward<L>(logits), "labels", std::forward<Y>(labels));
  detail::check_smoothing(name, s);
  using T = value_type_t<decltype(x)>;
  // Written with where rather than relu and abs so that the gradient at x = 0 is exact
  // (sigmoid(0) - z), as in TensorFlow.
  const auto positive = x >= T(0);
  return detail::finite_loss(
      name,
      detail::reduce_elementwise(
          where(positive, x, T(0)) - x * detail::smoothed<T>(z, s.value, 2) + log1p(exp(where(positive, -x, x))), r),
      std::pair{"logits", x}, std::pair{"labels", z});
}

/// sigmoid_binary_cross_entropy without label smoothing.
template <detail::tensor_like L, detail::tensor_like Y>
auto sigmoid_binary_cross_entropy(L&& logits, Y&& labels, reduction r = reduction::mean) {
  return sigmoid_binary_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), label_smoothing{}, r);
}

/// sigmoid_binary_cross_entropy with Keras's sample_weight (see reduce_weighted): float weights per example, or a bool
/// mask whose false entries leave the loss (the mean is then over the kept ones).
template <detail::tensor_like L, detail::tensor_like Y, detail::tensor_like W>
auto sigmoid_binary_cross_entropy(L&& logits, Y&& labels, label_smoothing s, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("sigmoid_binary_cross_entropy",
                                 sigmoid_binary_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), s, reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// sigmoid_binary_cross_entropy with sample_weight and without label smoothing.
template <detail::tensor_like L, detail::tensor_like Y, detail::tensor_like W>
auto sigmoid_binary_cross_entropy(L&& logits, Y&& labels, W&& sample_weight, reduction r = reduction::mean) {
  return sigmoid_binary_cross_entropy(std::forward<L>(logits), std::forward<Y>(labels), label_smoothing{}, std::forward<W>(sample_weight), r);
}

/// The mean of (predictions - targets)^2 over the last axis, per example.
template <detail::tensor_like P, detail::tensor_like Y>
auto mean_squared_error(P&& predictions, Y&& targets, reduction r = reduction::mean) {
  const auto [p, y] = detail::floating_pair("mean_squared_error", "predictions", std::forward<P>(predictions),
                                             "targets", std::forward<Y>(targets));
  return detail::finite_loss("mean_squared_error", detail::reduce_elementwise(square(p - y), r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// mean_squared_error with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto mean_squared_error(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("mean_squared_error",
                                 mean_squared_error(std::forward<P>(predictions), std::forward<Y>(targets), reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// The mean of |predictions - targets| over the last axis, per example (Keras's
/// mean_absolute_error, PyTorch's L1Loss). Its gradient at a zero error is 0.
template <detail::tensor_like P, detail::tensor_like Y>
auto mean_absolute_error(P&& predictions, Y&& targets, reduction r = reduction::mean) {
  const auto [p, y] = detail::floating_pair("mean_absolute_error", "predictions", std::forward<P>(predictions),
                                             "targets", std::forward<Y>(targets));
  return detail::finite_loss("mean_absolute_error", detail::reduce_elementwise(abs(p - y), r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// mean_absolute_error with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto mean_absolute_error(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("mean_absolute_error",
                                 mean_absolute_error(std::forward<P>(predictions), std::forward<Y>(targets), reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// The mean of log(cosh(e)) over the last axis, per example, for e = predictions - targets
/// (Keras's log_cosh), computed as e + softplus(-2 e) - log 2, which stays finite for |e| of 1e4.
template <detail::tensor_like P, detail::tensor_like Y>
auto log_cosh(P&& predictions, Y&& targets, reduction r = reduction::mean) {
  const auto [p, y] = detail::floating_pair("log_cosh", "predictions", std::forward<P>(predictions), "targets",
                                             std::forward<Y>(targets));
  using T = value_type_t<decltype(p)>;
  const auto e = p - y;
  return detail::finite_loss("log_cosh", detail::reduce_elementwise(e + softplus(T(-2) * e) - T(0.69314718055994530942), r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// log_cosh with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto log_cosh(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("log_cosh",
                                 log_cosh(std::forward<P>(predictions), std::forward<Y>(targets), reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// Kullback-Leibler divergence sum_c t_c log(t_c / p_c) over the last axis, per example, of the
/// predicted distribution p from the target distribution t, both clipped to [1e-7, 1] first as
/// Keras's kl_divergence does: a zero target counts as 1e-7, and the gradient is 0 where a
/// prediction is clipped.
template <detail::tensor_like P, detail::tensor_like Y>
auto kl_divergence(P&& predictions, Y&& targets, reduction r = reduction::mean) {
  const char* name = "kl_divergence";
  const auto [p, y] = detail::floating_pair(name, "predictions", std::forward<P>(predictions), "targets",
                                             std::forward<Y>(targets));
  detail::check_class_axis(name, p.shape());
  using T = value_type_t<decltype(p)>;
  const T eps = T(1e-7);
  const auto t = clip(y, eps, T(1));
  return detail::finite_loss(name, detail::reduce_examples(reduce_sum(t * log(t / clip(p, eps, T(1))), -1), r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// kl_divergence with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto kl_divergence(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("kl_divergence",
                                 kl_divergence(std::forward<P>(predictions), std::forward<Y>(targets), reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// Keras's cosine_similarity loss: -sum_c p_c t_c / (|p| |t|) over the last axis, per example,
/// each norm at least 1e-6 (Keras's l2_normalize: sqrt(max(sum x^2, 1e-12))). -1 where prediction
/// and target point the same way; a zero vector gives 0.
template <detail::tensor_like P, detail::tensor_like Y>
auto cosine_similarity(P&& predictions, Y&& targets, reduction r = reduction::mean) {
  const char* name = "cosine_similarity";
  const auto [p, y] = detail::floating_pair(name, "predictions", std::forward<P>(predictions), "targets",
                                             std::forward<Y>(targets));
  detail::check_class_axis(name, p.shape());
  using T = value_type_t<decltype(p)>;
  const T floor = T(1e-12);
  const auto inverse_norms = rsqrt(maximum(reduce_sum(square(p), -1), floor) * maximum(reduce_sum(square(y), -1), floor));
  return detail::finite_loss(name, detail::reduce_examples(-reduce_sum(p * y, -1) * inverse_norms, r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// cosine_similarity with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto cosine_similarity(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("cosine_similarity",
                                 cosine_similarity(std::forward<P>(predictions), std::forward<Y>(targets), reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// The Huber loss: 0.5 e^2 where |e| <= delta, delta (|e| - 0.5 delta) beyond, for the error
/// e = predictions - targets, averaged over the last axis per example. delta must be positive.
template <detail::tensor_like P, detail::tensor_like Y>
auto huber(P&& predictions, Y&& targets, double delta = 1.0, reduction r = reduction::mean) {
  const auto [p, y] = detail::floating_pair("huber", "predictions", std::forward<P>(predictions), "targets",
                                             std::forward<Y>(targets));
  using T = value_type_t<decltype(p)>;
  if (!(delta > 0)) {
    std::ostringstream os;
    os << "huber: delta = " << delta << " must be positive";
    throw invalid_argument(os.str());
  }
  // With q = min(|e|, delta): 0.5 q^2 + delta (|e| - q), the two pieces without a branch, smooth at
  // |e| = delta.
  const auto a = abs(p - y);
  const auto q = minimum(a, static_cast<T>(delta));
  return detail::finite_loss("huber", detail::reduce_elementwise(T(0.5) * square(q) + static_cast<T>(delta) * (a - q), r),
                             std::pair{"predictions", p}, std::pair{"targets", y});
}

/// The Huber loss with delta = 1 and the given reduction.
template <detail::tensor_like P, detail::tensor_like Y>
auto huber(P&& predictions, Y&& targets, reduction r) {
  return huber(std::forward<P>(predictions), std::forward<Y>(targets), 1.0, r);
}

/// The Huber loss with Keras's sample_weight (see reduce_weighted).
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto huber(P&& predictions, Y&& targets, double delta, W&& sample_weight, reduction r = reduction::mean) {
  return detail::reduce_weighted("huber", huber(std::forward<P>(predictions), std::forward<Y>(targets), delta, reduction::none),
                                 std::forward<W>(sample_weight), r);
}

/// The Huber loss with delta = 1 and sample_weight.
template <detail::tensor_like P, detail::tensor_like Y, detail::tensor_like W>
auto huber(P&& predictions, Y&& targets, W&& sample_weight, reduction r = reduction::mean) {
  return huber(std::forward<P>(predictions), std::forward<Y>(targets), 1.0, std::forward<W>(sample_weight), r);
}

}  // namespace fluxion::losses
