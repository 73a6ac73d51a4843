// fx::nn::bidirectional<Layer, Merge>: Keras's Bidirectional wrapper around a recurrent layer
// (nn::lstm, nn::gru or nn::simple_rnn). One copy of the layer reads the sequence forward, a second copy (its own
// variables) reads it backward, and their outputs are merged.
//
//   fx::nn::bidirectional<fx::nn::lstm<32>> rnn;             // (batch, time, features) -> (batch, 64)
//   fx::nn::bidirectional<fx::nn::gru<16, true>> seq;        // -> (batch, time, 32): every step
//   fx::nn::bidirectional<fx::nn::gru<16>, fx::nn::merge_mode::sum> s;   // -> (batch, 16)
//   auto named = fx::nn::bidirectional{fx::nn::lstm<32>{"encoder"}};    // forward_encoder, backward_encoder
//   auto [y, fh, fc, bh, bc] = rnn.call_with_state(x);       // Keras's return_state (and initial_state)
//   auto z = seq.call(x, {.mask = &m});                      // Keras's mask: false at padding, (batch, time)
//
// As Keras: the backward copy runs on the time-reversed input; with ReturnSequences its output is
// reversed back, so that step t of both halves belongs to input step t; without, each half is its
// last state (the backward one has then read the whole sequence from the end). A mask is reversed
// with the input, so the backward copy skips the same padding steps (right padding: it starts on
// them, with its states still at their initial values). Merge modes are
// Keras's: concat (the default: forward, then backward, along the last axis), sum, mul and ave.
// The copies are named forward_<name> and backward_<name> (`bidirectional/forward_lstm/kernel`).
// Each copy runs as the layer does alone (its fused cells under one tape), and the reversals and the
// merge are ordinary statements, so the wrapper is differentiable to any order and runs on any
// device its layer runs on.
#pragma once

#include <array>
#include <string>
#include <type_traits>
#include <utility>

#include "../expr/indexing.hpp"
#include "../expr/remap.hpp"
#include "../core/error.hpp"
#include "module.hpp"
#include "recurrent.hpp"

namespace fluxion::nn {

/// How nn::bidirectional combines its two halves (Keras's merge_mode).
enum class merge_mode { concat, sum, mul, ave };

namespace detail {

template <class L>
concept recurrent_layer_type = requires {
  { L::return_sequences } -> std::convertible_to<bool>;
  { L::units } -> std::convertible_to<index_t>;
  typename L::value_type;
  typename L::device_type;
};

/// static_shape<D...> with its last extent multiplied by F.
template <index_t F, index_t... D>
auto scale_last(static_shape<D...>) {
  constexpr std::array<index_t, sizeof...(D)> d{D...};
  if constexpr (sizeof...(D) == 1) return static_shape<d[0] * F>{};
  else return static_shape<d[0], d[1] * F>{};
}

}  // namespace detail

template <class Layer, merge_mode Merge = merge_mode::concat>
class bidirectional : public layer_base<bidirectional<Layer, Merge>, typename Layer::value_type,
                                        typename Layer::device_type> {
  static_assert(detail::recurrent_layer_type<Layer>,
                "fluxion::nn::bidirectional<Layer>: Layer must be a recurrent layer, nn::lstm<Units, "
                "ReturnSequences>, nn::gru<Units, ReturnSequences> or nn::simple_rnn<Units, ReturnSequences>.");
  using T = typename Layer::value_type;
  using Device = typename Layer::device_type;
  using base = layer_base<bidirectional<Layer, Merge>, T, Device>;

 public:
  using layer_type = Layer;
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "bidirectional";
  static constexpr bool return_sequences = Layer::return_sequences;
  static constexpr merge_mode merge = Merge;
  template <class U, class D = cpu>
  using rebind = bidirectional<typename Layer::template rebind<U, D>, Merge>;
  /// The layer's output shape, its last extent doubled by concat.
  template <index_t... D>
  static auto output_shape(static_shape<D...> s) {
    using inner = decltype(Layer::output_shape(s));
    if constexpr (Merge == merge_mode::concat) return detail::scale_last<2>(inner{});
    else return inner{};
  }

  explicit bidirectional(std::string name = {}) : bidirectional(Layer{}, std::move(name)) {}
  /// Wraps `layer` (its name and options; the backward copy is a second layer of the same type,
  /// with variables of its own, the same options and the next dropout seed, as Keras's copy of the
  /// layer's config): `bidirectional<lstm<32>>{lstm<32>{{.dropout = 0.2}}}`.
  explicit bidirectional(Layer layer, std::string name = {})
      : base(name.empty() ? base_name : std::move(name)), m_forward(std::move(layer)),
        m_backward(backward_options(m_forward.options())) {
    const std::string inner = m_forward.name();
    if (m_forward.built())
      throw invalid_argument("bidirectional '" + this->m_name + "': the layer '" + inner +
                             "' is already built; wrap one that is not (the backward copy needs variables of its own)");
    if (m_forward.options().go_backwards)
      throw invalid_argument("bidirectional '" + this->m_name + "': the layer '" + inner +
                             "' has go_backwards; wrap one without it (the wrapper runs its backward copy on the "
                             "time-reversed input itself)");
    m_forward.set_name("forward_" + inner);
    m_backward.set_name("backward_" + inner);
  }
  /// The same wrapper for another element type or device (a sequential model re-declares its
  /// layers for its own), keeping the copies' names and options.
  template <class L2>
    requires(!std::is_same_v<L2, Layer>)
  explicit bidirectional(const bidirectional<L2, Merge>& other)
      : base(other.name()), m_forward(other.forward_layer()), m_backward(other.backward_layer()) {}

  Layer& forward_layer() noexcept { return m_forward; }
  const Layer& forward_layer() const noexcept { return m_forward; }
  Layer& backward_layer() noexcept { return m_backward; }
  const Layer& backward_layer() const noexcept { return m_backward; }

  bool built() const noexcept { return m_forward.built(); }
  /// Builds both copies for inputs of per-example shape (time, features): the forward copy's
  /// variables are drawn first, as Keras does.
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    m_forward.build(per_example, gen);
    m_backward.build(per_example, gen);
  }
  void initialize(random::generator& gen) {
    m_forward.initialize(gen);
    m_backward.initialize(gen);
  }

  /// The states Keras's Bidirectional carries: the forward copy's, then the backward copy's (an
  /// LSTM's h and c each, a GRU's h).
  static constexpr std::size_t state_count = [] {
    if constexpr (detail::recurrent_layer_type<Layer>) return 2 * Layer::state_count;
    else return std::size_t{0};  // the class's static_assert has said why
  }();
  using state_type = std::array<tensor<T, Device>, state_count>;
  /// call's and call_with_state's options: Keras's mask (batch, time) and initial_state (the
  /// forward copy's states, then the backward copy's).
  using call_options = detail::recurrent_call<T, Device, state_count>;

  template <class X>
  tensor<T, Device> operator()(X&& x, bool training = false) {
    const tensor<T, Device> in = checked(std::forward<X>(x));
    const tensor<T, Device> forward = m_forward(in, training);  // first, as Keras (errors name it first)
    return merged(forward, m_backward(detail::reverse_time(in), training));
  }

  /// Keras's return_state = true, from zero states: {output, the forward copy's final states, the
  /// backward copy's} (around an LSTM: output, forward h, forward c, backward h, backward c).
  template <class X>
  std::array<tensor<T, Device>, 1 + state_count> call_with_state(X&& x, bool training = false) {
    const tensor<T, Device> in = checked(std::forward<X>(x));
    const auto forward = m_forward.call_with_state(in, training);
    return with_state(forward, m_backward.call_with_state(detail::reverse_time(in), training));
  }
  /// The same from Keras's initial_state: the forward copy's states, then the backward copy's, each
  /// (batch, units).
  template <class X>
  std::array<tensor<T, Device>, 1 + state_count> call_with_state(X&& x, const state_type& initial_state,
                                                                 bool training = false) {
    const tensor<T, Device> in = checked(std::forward<X>(x));
    typename Layer::state_type forward_state, backward_state;
    for (std::size_t i = 0; i < Layer::state_count; ++i) {
      forward_state[i] = initial_state[i];
      backward_state[i] = initial_state[Layer::state_count + i];
    }
    const auto forward = m_forward.call_with_state(in, forward_state, training);
    return with_state(forward, m_backward.call_with_state(detail::reverse_time(in), backward_state, training));
  }

  /// Keras's `layer(x, mask=m)`: m (batch, time) is false at padding.
  template <class X>
  tensor<T, Device> operator()(X&& x, const tensor<bool, Device>& mask, bool training = false) {
    return call(std::forward<X>(x), {.mask = &mask}, training);
  }
  /// The same with Keras's call arguments: `rnn.call(x, {.mask = &m})`.
  template <class X>
  tensor<T, Device> call(X&& x, const call_options& options, bool training = false) {
    const tensor<T, Device> in = checked(std::forward<X>(x));
    const halves h(options);
    const tensor<T, Device> forward = m_forward.call(in, h.forward, training);  // first, as Keras
    return merged(forward, m_backward.call(detail::reverse_time(in), h.backward, training));
  }
  /// call_with_state with a mask: `rnn.call_with_state(x, {.mask = &m, .initial_state = &s})`.
  template <class X>
  std::array<tensor<T, Device>, 1 + state_count> call_with_state(X&& x, const call_options& options,
                                                                 bool training = false) {
    const tensor<T, Device> in = checked(std::forward<X>(x));
    const halves h(options);
    const auto forward = m_forward.call_with_state(in, h.forward, training);
    return with_state(forward, m_backward.call_with_state(detail::reverse_time(in), h.backward, training));
  }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    m_forward.for_each_variable(prefix + m_forward.name() + "/", f);
    m_backward.for_each_variable(prefix + m_backward.name() + "/", f);
  }

 private:
  template <class X>
  tensor<T, Device> checked(X&& x) const {
    tensor<T, Device> in(fluxion::detail::as_expr<X>(std::forward<X>(x)));
    if (in.rank() != 3)
      throw shape_error("bidirectional '" + this->m_name + "': expects input of shape (batch, time, features), got " +
                        to_string(in.shape()));
    return in;
  }

  /// call_options split between the copies: the initial states in halves, the mask reversed for
  /// the backward copy (a mask of the wrong rank goes to both as it is, for the layer to name).
  struct halves {
    typename Layer::state_type forward_state, backward_state;
    tensor<bool, Device> reversed_mask;
    typename Layer::call_options forward, backward;

    explicit halves(const call_options& options) {
      if (options.initial_state)
        for (std::size_t i = 0; i < Layer::state_count; ++i) {
          forward_state[i] = (*options.initial_state)[i];
          backward_state[i] = (*options.initial_state)[Layer::state_count + i];
        }
      const tensor<bool, Device>* m = options.mask;
      if (m && m->rank() == 2) reversed_mask = detail::reverse_time(*m);
      forward = {m, options.initial_state ? &forward_state : nullptr};
      backward = {reversed_mask.empty() ? m : &reversed_mask, options.initial_state ? &backward_state : nullptr};
    }
    halves(const halves&) = delete;  // the options point into it
  };

  /// The two halves' outputs merged; the backward one's sequence reversed back first.
  static tensor<T, Device> merged(const tensor<T, Device>& forward, tensor<T, Device> backward) {
    if constexpr (return_sequences) backward = detail::reverse_time(backward);
    if constexpr (Merge == merge_mode::concat) return concat({forward, backward}, -1);
    else if constexpr (Merge == merge_mode::sum) return forward + backward;
    else if constexpr (Merge == merge_mode::mul) return forward * backward;
    else return (forward + backward) * T(0.5);
  }

  template <class Halves>
  static std::array<tensor<T, Device>, 1 + state_count> with_state(const Halves& forward, const Halves& backward) {
    std::array<tensor<T, Device>, 1 + state_count> out;
    out[0] = merged(forward[0], backward[0]);
    for (std::size_t i = 0; i < Layer::state_count; ++i) {
      out[1 + i] = forward[1 + i];
      out[1 + Layer::state_count + i] = backward[1 + i];
    }
    return out;
  }

  static recurrent_options backward_options(recurrent_options o) {
    ++o.seed;  // masks of their own
    return o;
  }

  Layer m_forward, m_backward;
};

}  // namespace fluxion::nn
