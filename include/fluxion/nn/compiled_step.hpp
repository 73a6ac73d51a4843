// fx::nn::compiled_step: a whole training step (forward, loss, gradients, optimizer update) in one
// call, its backward pass generated from the model's type when the program compiles: graph mode
// (fx::grad) grown to a sequential model, a loss and an optimizer. TensorFlow's tf.function around
// a train step; LibTorch has no counterpart in C++.
//
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<256>{}, fx::nn::relu{},
//                                 fx::nn::dense<10>{});
//   fx::optim::adam opt{1e-3};
//   auto step = fx::nn::compile_step(net, opt, [](const auto& logits, const auto& labels) {
//     return fx::losses::sparse_softmax_cross_entropy(logits, labels);
//   });
//   fx::tensor<float> loss = step(images, labels);     // the variables are updated
//
// How it runs. Each layer of the model, or a dense/conv2d layer and the activation fused into it,
// is one statement, exactly the expression the layer evaluates on its own: the same kernels, in
// the same order. The forward pass keeps each statement (its operands are tensors, shared, not
// copied); the backward pass runs each statement's backward rule, autodiff::backward<E> for the
// statement's type E, instantiated when the program compiles, on the gradient of its output: no
// tape, no recorded closures, no gradient map, and each activation is released as soon as the
// backward pass has gone past it. The loss alone, a few values per example, is differentiated with
// a gradient tape, so any loss function works. The optimizer then updates every trainable
// variable, as apply_gradients does. The numbers are the tape-based step's, bitwise (the same
// statements and rules in the same order; tests/nn/compiled_step.test.cpp checks it). The
// variables' regularizers (nn/regularizers.hpp) add their penalty to the loss returned and
// l1 sign(w) + 2 l2 w to each gradient, as the tape's rules give them (summed in another order:
// equal to rounding, tests/nn/regularizers.test.cpp). A layer that adds a loss (nn::add_loss:
// nn::activity_regularization) runs as a recomputed segment, whose backward pass differentiates
// its output and its loss together; the loss returned includes it.
//
// Layers with one statement: dense (on rank-2 input), conv2d, max_pool2d, avg_pool2d, the
// activation layers, flatten and reshape. Any other layer (batch_norm, dropout, lstm, embedding,
// a nested model, reversible blocks) runs as a recomputed segment: its input is kept, and the
// backward pass runs it again under a tape of its own inside an nn::recompute_scope (batch norm's
// moving averages are updated once, dropout replays its mask), as nn::recompute<L> does. Such a
// layer costs one more forward pass of itself. A model of integer input (an embedding first) keeps
// the int32 or int64 indices it was given for its first layer, whose backward pass gives the
// gradients of that layer's variables only (indices have none).
//
// Errors: the model's checks (shapes, element types) throw as the model does, before anything
// changes; a loss that is not a scalar throws fluxion::error, and one that is NaN or infinite
// fluxion::numeric_error, naming the step and the optimizer's iteration (and, from fluxion's losses,
// the first input element that is not finite), and the variables, the optimizer's slots and its iteration
// count are left as they were.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/backprop.hpp"
#include "../autodiff/order.hpp"
#include "../autodiff/tape.hpp"
#include "module.hpp"
#include "recompute.hpp"
#include "sequential.hpp"

namespace fluxion::nn {

namespace detail {

/// The compiled step's sink: the tape's (autodiff/record.hpp) for a few wanted tensors, a
/// statement's input and its layer's trainable variables. Each gradient is summed to its tensor's
/// shape and accumulated by the tape's own gradient store, so that the sums are the tape's, bitwise.
template <class T, class Device = cpu>
struct statement_sink {
  std::vector<std::uint64_t> ids;
  autodiff::gradient_store store;

  bool wants(std::uint64_t id) const { return std::find(ids.begin(), ids.end(), id) != ids.end(); }
  template <class U, class D, class G>
  void leaf(const tensor<U, D>& t, const G& g) {
    if (!wants(t.id())) return;
    if constexpr (!std::is_same_v<value_type_t<G>, U>) leaf(t, cast<U>(g));
    else store.add<autodiff::order_v<G>>(t.id(), autodiff::reduce_to(g, t.shape()));
  }
  /// The gradient of `t` (one of ids): zeros when nothing reached it.
  tensor<T, Device> take(const tensor<T, Device>& t) {
    if (const tensor<T, Device>* g = store.find<T, Device>(t.id())) return *g;
    return tensor<T, Device>(broadcast_to(scalar_expr<T, Device>(T(0)), t.shape()));
  }
};

template <class L, class T, class D = cpu>
concept statement_with_epilogue = requires(L& l, const tensor<T, D>& x) { l.statement(x, identity{}); };
template <class L, class T, class D = cpu>
concept statement_alone = requires(L& l, const tensor<T, D>& x) { l.statement(x); };
/// A layer without variables whose call on a tensor returns an unevaluated expression (the
/// activations, flatten, reshape): that expression is its statement.
template <class L, class T, class D = cpu>
concept expression_layer = requires(L& l, const tensor<T, D>& x) {
  requires !is_tensor_v<std::remove_cvref_t<decltype(l(x, true))>>;
  requires is_expression_v<std::remove_cvref_t<decltype(l(x, true))>>;
  requires std::is_same_v<value_type_t<std::remove_cvref_t<decltype(l(x, true))>>, T>;
};

/// A layer and the activation fused into it, as one layer (for recomputing it).
template <class L, class A>
struct fused_pair {
  L& layer;
  const A& activation;
  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    layer.for_each_variable(prefix, f);
  }
  template <class X>
  auto operator()(X&& x, bool training) {
    return layer(std::forward<X>(x), training, activation);
  }
};

template <class T, class L, class D>
auto layer_statement(L& l, const tensor<T, D>& x, bool training) {
  if constexpr (statement_with_epilogue<L, T, D>) return l.statement(x, identity{});
  else if constexpr (statement_alone<L, T, D>) return l.statement(x);
  else return l(x, training);
}

/// Whether layer L, fed per-example input shape In, runs as one statement.
template <class L, class T, class In, class D = cpu>
constexpr bool has_statement() {
  if constexpr (requires { L::template statement_for<In>; })
    if constexpr (!L::template statement_for<In>) return false;
  return statement_with_epilogue<L, T, D> || statement_alone<L, T, D> || expression_layer<L, T, D>;
}

}  // namespace detail

template <class Model, class Optimizer, class LossFn>
class compiled_step;

/// A compiled training step for a sequential model (see the top of this file).
template <class T, class InShape, class Device, class... Layers, class Optimizer, class LossFn>
class compiled_step<sequential_model<T, InShape, Device, Layers...>, Optimizer, LossFn> {
  using model_type = sequential_model<T, InShape, Device, Layers...>;
  static_assert(!(detail::produces_mask<Layers> || ...),
                "fluxion::nn::compile_step: the model has an embedding<...>::mask_zero, whose mask a compiled step "
                "does not carry yet; train this model with fluxion::gradient_tape (or model.fit), which does.");
  using layers = std::tuple<Layers...>;
  using chain = detail::shape_chain<InShape, Layers...>;
  static constexpr std::size_t count = sizeof...(Layers);
  template <std::size_t I>
  using layer_t = std::tuple_element_t<I, layers>;
  static constexpr bool index_first = detail::takes_indices<layer_t<0>>;  // an embedding first
  template <std::size_t I>
  static constexpr bool statement_at =
      detail::has_statement<layer_t<I>, T, std::tuple_element_t<I, typename chain::inputs>, Device>();

  /// Whether layer I takes the activation that follows it as its epilogue (as sequential does).
  template <std::size_t I>
  static constexpr bool fuses() {
    if constexpr (I + 1 >= count) return false;
    else return detail::takes_epilogue<layer_t<I>> && detail::elementwise_layer<layer_t<I + 1>>;
  }
  template <std::size_t I>
  static constexpr bool unit_start() {
    if constexpr (I == 0) return true;
    else return !fuses<I - 1>();
  }
  template <std::size_t I>
  static constexpr std::size_t unit_end() {  // one past the unit's last layer
    return fuses<I>() ? I + 2 : I + 1;
  }
  /// The start of the unit that ends where unit I starts.
  template <std::size_t I>
  static constexpr std::size_t previous_start() {
    if constexpr (I >= 2) return fuses<I - 2>() ? I - 2 : I - 1;
    else return I - 1;
  }

  struct no_statement {};  // what a unit's later layer keeps: nothing (std::monostate without <variant>)
  template <std::size_t I>
  static auto statement_type() {
    if constexpr (unit_start<I>() && statement_at<I>) {
      if constexpr (fuses<I>())
        return std::type_identity<decltype(std::declval<layer_t<I>&>().statement(std::declval<const tensor<T, Device>&>(),
                                                                                  std::declval<const layer_t<I + 1>&>()))>{};
      else
        return std::type_identity<decltype(detail::layer_statement<T>(std::declval<layer_t<I>&>(),
                                                                      std::declval<const tensor<T, Device>&>(), true))>{};
    } else {
      return std::type_identity<no_statement>{};
    }
  }
  /// What the forward pass keeps of layer I: its statement, the input of a recomputed layer, or
  /// nothing (the activation fused into the layer before it).
  template <std::size_t I>
  struct kept {
    using statement = typename decltype(statement_type<I>())::type;
    std::optional<statement> e;
    tensor<T, Device> input;  // the layer's input (a recomputed layer's, and the sink's key)
    std::vector<variable<T, Device>*> vars;  // the layer's trainable variables (their values are what it read)
    void clear() {
      e.reset();
      input = tensor<T, Device>();
      vars.clear();
    }
  };

 public:
  using value_type = T;

  compiled_step(model_type& model, Optimizer& optimizer, LossFn loss)
      : m_model(model), m_optimizer(optimizer), m_loss(std::move(loss)) {}

  /// One training step on a batch: returns the loss (before the update) and updates the variables.
  template <class X, class Y>
  tensor<T, Device> operator()(const X& x, const Y& labels, bool training = true) {
    auto e = fluxion::detail::as_expr<const X&>(x);
    using In = value_type_t<decltype(e)>;
    if constexpr (index_first)
      static_assert(std::is_same_v<In, std::int32_t> || std::is_same_v<In, std::int64_t>,
                    "fluxion::nn::compiled_step: the model's first layer reads indices (an embedding): the input "
                    "must be int32 or int64; convert it with fluxion::cast<std::int32_t>.");
    else
      static_assert(std::is_same_v<In, T>,
                    "fluxion::nn::compiled_step: the input's element type differs from the model's; convert it "
                    "with fluxion::cast<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::compiled_step: the input is on another device than the model; move it with "
                  "fluxion::to<Device>.");
    detail::check_batch_shape<InShape>("compiled_step", m_model.name(), e.shape());
    const tensor<In, Device> in = fluxion::detail::materialize(e);
    try {
      return run(in, labels, training);
    } catch (...) {
      std::apply([](auto&... k) { (k.clear(), ...); }, m_kept);  // drop what the forward pass kept
      m_indices32 = {};
      m_indices64 = {};
      throw;
    }
  }

  model_type& model() noexcept { return m_model; }
  Optimizer& optimizer() noexcept { return m_optimizer; }

 private:
  template <class In, class Y>
  tensor<T, Device> run(const tensor<In, Device>& in, const Y& labels, bool training) {
    // What the layers add (nn::add_loss: activity_regularization) is the model's added_losses();
    // their gradients come from the backward passes of the recomputed layers that added them.
    tensor<T, Device> logits = m_model.collecting_losses([&] { return first_forward(in, training); });
    const bool penalized = has_regularizers(m_model.trainable_variables());

    tensor<T, Device> loss, dlogits;
    auto nonfinite = [&](double value, const std::string& detail) {
      return numeric_error("compiled_step: the loss is " + fluxion::detail::value_text(value) + " at optimizer iteration " +
                               std::to_string(m_optimizer.iterations()) + "; the variables were not updated" + detail,
                           value);
    };
    {
      gradient_tape tape(false);
      tape.watch(logits);
      try {  // fluxion's losses check their value and name the input that is not finite
        loss = fluxion::detail::materialize(m_loss(logits, labels));
      } catch (const numeric_error& e) {
        throw nonfinite(e.value(), std::string(" (") + e.what() + ")");
      }
      if (loss.size() != 1)
        throw error("compiled_step: the loss function returned shape " + to_string(loss.shape()) +
                    "; it must return one value (reduce it with a mean or a sum)");
      const double value = static_cast<double>(loss.item());
      if (!std::isfinite(value)) throw nonfinite(value, "");
      dlogits = tape.gradient(loss, logits, unconnected_gradients::zero);
    }
    if (!m_model.added_losses().empty()) {
      for (const tensor<T, Device>& a : m_model.added_losses()) loss = fluxion::detail::materialize_unrecorded(loss + a);
      const double value = static_cast<double>(loss.item());
      if (!std::isfinite(value)) throw nonfinite(value, " (the losses the model's layers added: nn::add_loss, activity_regularization)");
    }
    // The variables' penalties (Keras's model.losses): their value here, their gradient below.
    if (penalized) {
      loss = detail::with_penalties(std::move(loss), m_model.trainable_variables());
      const double value = static_cast<double>(loss.item());
      if (!std::isfinite(value)) throw nonfinite(value, " (the variables' regularization_loss)");
    }

    std::vector<variable<T, Device>*> vars;
    std::vector<tensor<T, Device>> grads;
    backward<last_start()>(std::move(dlogits), training, vars, grads);
    // Units ran last to first: put the variables back in the model's order (every trainable
    // variable belongs to one unit, which gave it a gradient).
    std::vector<variable<T, Device>*> ordered = m_model.trainable_variables();
    std::vector<tensor<T, Device>> ordered_grads(ordered.size());
    for (std::size_t j = 0; j < ordered.size(); ++j) {
      const auto it = std::find(vars.begin(), vars.end(), ordered[j]);
      if (it == vars.end())
        throw error("compiled_step: no layer of the model gave a gradient for variable '" + ordered[j]->name() + "'");
      ordered_grads[j] = std::move(grads[static_cast<std::size_t>(it - vars.begin())]);
    }
    if (penalized) detail::add_penalty_gradients(ordered_grads, ordered);
    m_optimizer.apply_gradients(ordered_grads, ordered);
    return loss;
  }

  static constexpr std::size_t last_start() {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      std::size_t last = 0;
      ((unit_start<I>() ? void(last = I) : void()), ...);
      return last;
    }(std::make_index_sequence<count>{});
  }

  /// The forward pass from the model's input: layer 0 of a model of indices runs on them (it is
  /// recomputed from them in the backward pass); any other model starts at forward<0>.
  template <class In>
  tensor<T, Device> first_forward(const tensor<In, Device>& in, bool training) {
    if constexpr (index_first) {
      static_assert(!fuses<0>() && !statement_at<0>);  // an embedding takes no epilogue, has no statement
      auto& layer = m_model.template layer<0>();
      auto& k = std::get<0>(m_kept);
      if constexpr (std::is_same_v<In, std::int32_t>) m_indices32 = in;
      else m_indices64 = in;
      m_int64 = std::is_same_v<In, std::int64_t>;
      k.vars = detail::trainable_of<T, Device>(layer);
      return forward<1>(tensor<T, Device>(layer(in, training)), training);
    } else {
      return forward<0>(in, training);
    }
  }

  template <std::size_t I>
  tensor<T, Device> forward(tensor<T, Device> x, bool training) {
    if constexpr (I == count) {
      return x;
    } else {
      auto& layer = m_model.template layer<I>();
      auto& k = std::get<I>(m_kept);
      k.input = x;
      k.vars = detail::trainable_of<T, Device>(layer);
      tensor<T, Device> y;
      if constexpr (statement_at<I>) {
        if constexpr (fuses<I>()) k.e.emplace(layer.statement(x, m_model.template layer<I + 1>()));
        else k.e.emplace(detail::layer_statement<T>(layer, x, training));
        y = fluxion::detail::materialize(*k.e);
      } else if constexpr (fuses<I>()) {
        y = tensor<T, Device>(layer(x, training, m_model.template layer<I + 1>()));
      } else {
        y = tensor<T, Device>(layer(x, training));
      }
      return forward<unit_end<I>()>(std::move(y), training);
    }
  }

  /// The backward pass of the unit starting at layer I, then of the units before it.
  template <std::size_t I>
  void backward(tensor<T, Device> dy, bool training, std::vector<variable<T, Device>*>& vars, std::vector<tensor<T, Device>>& grads) {
    auto& layer = m_model.template layer<I>();
    auto& k = std::get<I>(m_kept);
    constexpr bool needs_input = I > 0;
    tensor<T, Device> dx;
    if constexpr (statement_at<I>) {
      // The variables are updated only after the backward pass: their values are the statement's.
      detail::statement_sink<T, Device> sink;
      if (needs_input) sink.ids.push_back(k.input.id());
      for (variable<T, Device>* v : k.vars) sink.ids.push_back(v->peek().id());
      autodiff::backward<typename kept<I>::statement>::run(*k.e, autodiff::as_order<1>(std::move(dy)), sink);
      if (needs_input) dx = sink.take(k.input);
      for (variable<T, Device>* v : k.vars) {
        vars.push_back(v);
        grads.push_back(sink.take(v->peek()));
      }
    } else {
      recompute_scope again;  // batch norm: no second moving-average update; dropout: the same mask
      auto [out, g] = [&] {
        if constexpr (fuses<I>()) {
          detail::fused_pair<layer_t<I>, layer_t<I + 1>> pair{layer, m_model.template layer<I + 1>()};
          return detail::run_and_differentiate<T>(pair, k.input, dy, training, needs_input);
        } else if constexpr (I == 0 && index_first) {  // from the indices kept; they have no gradient
          return m_int64 ? detail::run_and_differentiate<T>(layer, m_indices64, dy, training)
                         : detail::run_and_differentiate<T>(layer, m_indices32, dy, training);
        } else {  // the model's input (I == 0) has no gradient, as in the tape-based step
          return detail::run_and_differentiate<T>(layer, k.input, dy, training, needs_input);
        }
      }();
      dx = std::move(g[0]);
      for (std::size_t v = 0; v < k.vars.size(); ++v) {  // g: the input's, then the variables' (in order)
        vars.push_back(k.vars[v]);
        grads.push_back(std::move(g[v + 1]));
      }
    }
    k.clear();
    if constexpr (I == 0 && index_first) {
      m_indices32 = {};
      m_indices64 = {};
    }
    if constexpr (I > 0) backward<previous_start<I>()>(std::move(dx), training, vars, grads);
  }

  template <std::size_t... I>
  static auto kept_tuple(std::index_sequence<I...>) -> std::tuple<kept<I>...>;

  model_type& m_model;
  Optimizer& m_optimizer;
  LossFn m_loss;
  decltype(kept_tuple(std::make_index_sequence<count>{})) m_kept;
  tensor<std::int32_t, Device> m_indices32;  // a model of indices: its input, for layer 0's backward pass
  tensor<std::int64_t, Device> m_indices64;
  bool m_int64 = false;
};

/// A compiled training step for `model` with `optimizer` and loss_fn(logits, labels) -> a scalar.
/// The step refers to the model and the optimizer: keep both alive while it is used.
template <class Model, class Optimizer, class LossFn>
auto compile_step(Model& model, Optimizer& optimizer, LossFn loss) {
  static_assert(requires { typename Model::input_shape_t; },
                "fluxion::nn::compile_step: the model must be a fluxion::nn::sequential model; for other models, "
                "differentiate a step with fluxion::gradient_tape.");
  static_assert(requires(Optimizer& o) { o.iterations(); o.slot_specs(); },
                "fluxion::nn::compile_step: the optimizer must be a fluxion::optim optimizer (sgd, adam, ...).");
  return compiled_step<Model, Optimizer, LossFn>(model, optimizer, std::move(loss));
}

}  // namespace fluxion::nn
