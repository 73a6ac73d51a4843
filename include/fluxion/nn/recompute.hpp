// Gradient checkpointing: nn::recompute<L> keeps only its input under a gradient tape and runs L
// again in the backward pass (tf.recompute_grad; LibTorch's C++ API has none, pytorch #52744).
//
//   using segment = fx::nn::sequential_t<fx::nn::input<256>, fx::nn::dense<256>, fx::nn::relu,
//                                        fx::nn::dense<256>, fx::nn::relu, fx::nn::dense<256>, fx::nn::relu>;
//   auto net = fx::nn::sequential(gen, fx::nn::input<256>{}, fx::nn::recompute<segment>{},
//                                 fx::nn::recompute<segment>{}, fx::nn::recompute<segment>{}, fx::nn::dense<10>{});
//
// Each recompute<L> is a segment: the tape records one entry for it that keeps the segment's input
// (the boundary) and reads of its trainable variables, and none of the activations inside. When the
// backward pass reaches it, L runs again on the kept input under a tape of its own, inside an
// nn::recompute_scope (batch normalization does not update its moving statistics twice), and that
// tape's vector-Jacobian product with the output gradient gives the input's and the variables'
// gradients. With n layers in sqrt(n) segments, activation memory falls from n layers' to about
// 2 sqrt(n), for one more forward pass.
//
// It composes: the recomputation is an ordinary computation, so enclosing tapes (higher orders)
// record it and differentiate through it; L may hold reversible blocks, other recomputed segments,
// and dropout (inside a recompute_scope a dropout layer replays the mask of its last call: keep
// each dropout layer to one call per segment and step).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/record.hpp"
#include "../autodiff/tape.hpp"
#include "batch_norm.hpp"
#include "module.hpp"

namespace fluxion::nn {

namespace detail {

/// The device of a layer or model: its device_type, or the cpu for layers without one.
template <class L>
struct device_of {
  using type = cpu;
};
template <class L>
  requires requires { typename L::device_type; }
struct device_of<L> {
  using type = typename L::device_type;
};

/// Whether any gradient tape of this thread records now.
inline bool any_tape_recording() {
  for (gradient_tape* t : fluxion::detail::tape_stack::tapes)
    if (t->recording()) return true;
  return false;
}

/// Runs `forward()` with every tape paused and records, on each recording tape that tracks `in` or
/// one of `reads` (the layer's trainable variables, read where the tapes saw it), one entry for its
/// output y: backward(y, dy, grads) returns d in and fills `grads` with the reads' gradients.
template <class T, class D, class Forward, class Backward>
tensor<T, D> record_segment(const tensor<T, D>& in, std::vector<tensor<T, D>> reads, Forward&& forward,
                            Backward backward) {
  tensor<T, D> y;
  {
    autodiff_paused quiet;
    y = forward();
  }
  for (gradient_tape* tape : fluxion::detail::tape_stack::tapes) {
    if (!tape->recording()) continue;
    bool depends = tape->tracks(in.id());
    for (const tensor<T, D>& r : reads) depends = depends || tape->tracks(r.id());
    if (!depends) continue;
    const std::uint64_t in_id = in.id(), out_id = y.id();
    tape->record(out_id, [tape, in_id, out_id, y, reads, backward](autodiff::gradient_store& store) {
      const tensor<T, D>* g = store.find<T, D>(out_id);
      if (!g) return;
      std::vector<tensor<T, D>> grads;
      tensor<T, D> dx = backward(y, *g, grads);
      if (tape->tracks(in_id)) store.add<autodiff::order_v<tensor<T, D>>>(in_id, std::move(dx));
      autodiff::tape_sink sink{*tape, store};
      for (std::size_t i = 0; i < reads.size() && i < grads.size(); ++i) sink.leaf(reads[i], grads[i]);
    });
  }
  return y;
}

/// The trainable variables of a layer, in its order.
template <class T, class Device = cpu, class L>
std::vector<variable<T, Device>*> trainable_of(L& layer) {
  std::vector<variable<T, Device>*> vars;
  layer.for_each_variable("", [&](variable<T, Device>& v) {
    if (v.trainable()) vars.push_back(&v);
  });
  return vars;
}

/// out = layer(x) under a tape of its own, and the vector-Jacobian products of dout with respect to
/// x (first) and to the layer's trainable variables (then, in their order), plus the gradients of
/// the losses the layer added (nn::add_loss). Integer x (the indices
/// of an embedding) has no gradient, nor has x with input_gradient false (a model's input, whose
/// gradient nobody reads): its place holds the empty tensor.
template <class T, class L, class D, class In>
std::pair<tensor<T, D>, std::vector<tensor<T, D>>> run_and_differentiate(L& layer, const tensor<In, D>& x,
                                                                         const tensor<T, D>& dout, bool training,
                                                                         bool input_gradient = true) {
  constexpr bool differentiable = std::is_same_v<In, T>;
  const std::vector<variable<T, D>*> vars = trainable_of<T, D>(layer);
  gradient_tape tape;
  std::vector<const tensor<T, D>*> sources;
  const bool watched = differentiable && input_gradient;
  if constexpr (differentiable) {
    if (watched) {
      tape.watch(x);
      sources.push_back(&x);
    }
  }
  // The losses the layer adds (nn::add_loss: an activity_regularization inside it) count in the
  // gradients too: their value was counted where the layer first ran.
  loss_scope<T, D> added;
  tensor<T, D> out(layer(x, training));
  for (variable<T, D>* v : vars) sources.push_back(&v->peek());
  auto grads = added.empty() ? tape.gradient(out, sources, dout, unconnected_gradients::zero)
                             : tape.gradient(out, sources, dout, added.losses(), unconnected_gradients::zero);
  if (!watched) grads.insert(grads.begin(), tensor<T, D>());
  return {std::move(out), std::move(grads)};
}

}  // namespace detail

/// A segment of a model that is recomputed in the backward pass instead of stored.
template <class L>
class recompute {
 public:
  using layer_type = L;
  using value_type = typename L::value_type;
  using T = value_type;
  using device_type = typename detail::device_of<L>::type;
  using Device = device_type;
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;  // on the device of its layer (a model keeps its own)
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "recompute";
  template <class U, class D = cpu>
  using rebind = recompute<typename L::template rebind<U, D>>;

  template <index_t... D>
  static auto output_shape(static_shape<D...> s) {
    return L::output_shape(s);
  }

  explicit recompute(std::string name = {}) : m_name(name.empty() ? base_name : std::move(name)) {}
  explicit recompute(L layer, std::string name = {}) : m_layer(std::move(layer)), m_name(name.empty() ? base_name : std::move(name)) {}

  /// The same segment for another element type or device (a sequential model re-declares its
  /// layers for its own): the inner layer is re-declared from the other's, keeping its settings.
  template <class L2>
    requires(!std::is_same_v<L2, L>)
  explicit recompute(const recompute<L2>& other) : m_layer(detail::rebuilt<L>(other.layer())), m_name(other.name()) {}

  const std::string& name() const noexcept { return m_name; }
  void set_name(std::string n) { m_name = std::move(n); }
  L& layer() noexcept { return m_layer; }
  const L& layer() const noexcept { return m_layer; }

  void build(const fluxion::shape& s, random::generator& gen) {
    if constexpr (requires { m_layer.build(s, gen); }) m_layer.build(s, gen);
    else if constexpr (requires { m_layer.initialize(gen); }) m_layer.initialize(gen);
  }
  void initialize(random::generator& gen) {
    if constexpr (requires { m_layer.initialize(gen); }) m_layer.initialize(gen);
  }
  template <class V>
  void for_each_variable(const std::string& prefix, V&& f) {
    m_layer.for_each_variable(prefix, f);
  }
  std::vector<variable<T, Device>*> trainable_variables() { return detail::trainable_of<T, Device>(m_layer); }

  template <class X>
  tensor<T, Device> operator()(X&& x, bool training = false) {
    const tensor<T, Device> in(fluxion::detail::as_expr<X>(std::forward<X>(x)));
    if (!detail::any_tape_recording()) return tensor<T, Device>(m_layer(in, training));
    std::vector<tensor<T, Device>> reads;
    for (variable<T, Device>* v : detail::trainable_of<T, Device>(m_layer)) reads.push_back(v->read_value());
    // The entry keeps `in` (the boundary) alive; the layer's activations are dropped.
    return detail::record_segment<T>(
        in, std::move(reads), [&] { return tensor<T, Device>(m_layer(in, training)); },
        [this, in, training](const tensor<T, Device>&, const tensor<T, Device>& dy, std::vector<tensor<T, Device>>& grads) {
          recompute_scope again;
          auto [out, g] = detail::run_and_differentiate<T>(m_layer, in, dy, training);
          tensor<T, Device> dx = std::move(g[0]);
          grads.assign(std::make_move_iterator(g.begin() + 1), std::make_move_iterator(g.end()));
          return dx;
        });
  }

 private:
  L m_layer;
  std::string m_name;
};

}  // namespace fluxion::nn
