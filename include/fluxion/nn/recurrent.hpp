// What Keras's recurrent layers share (fx::nn::lstm in nn/lstm.hpp, fx::nn::gru in nn/gru.hpp):
// a kernel (features, gates * units), a recurrent kernel (units, gates * units), a bias, their
// initializers and names, the input's checks, and the rule that picks the fused sequence (one tape
// entry over a fused cell per step) or the statements (differentiable to any order).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "dropout.hpp"
#include "initializers.hpp"
#include "module.hpp"
#include "recurrent_cell.hpp"

namespace fluxion::nn {

namespace detail {

/// The one tape that may record a fused sequence whose backward pass feeds `inputs`, in `tape`
/// (nullptr when none records them): false where the statements must run instead, that is under a
/// forward accumulator or where more than one tape records them (nested tapes, for second
/// derivatives; a fused backward pass is not itself differentiable).
template <class... Tensors>
bool fused_recurrent_applies(gradient_tape*& tape, const Tensors&... inputs) {
  if (fluxion::detail::autodiff_state::accumulators > 0) return false;  // with or without forward mode here
  tape = nullptr;
  for (gradient_tape* t : fluxion::detail::tape_stack::tapes) {
    if (!t->recording() || !(t->tracks(inputs.id()) || ...)) continue;
    if (tape) return false;
    tape = t;
  }
  return true;
}

/// The states h_0 .. h_steps of a fused sequence, (steps + 1, batch, units): zeros, or `first`
/// (Keras's initial_state, (batch, units)) at step 0. State: whether the layer was called with
/// call_with_state (otherwise the statements for states are not compiled).
template <bool State, class T, class Device>
tensor<T, Device> state_sequence(const tensor<T, Device>* first, index_t steps, index_t batch, index_t units) {
  if constexpr (State) {
    if (first)
      return tensor<T, Device>(
          concat({tensor<T, Device>(reshape(*first, {1, batch, units})), zeros<T, Device>({steps, batch, units})}, 0));
  }
  return zeros<T, Device>({steps + 1, batch, units});
}

/// The input reversed along its time axis (axis 1 of (batch, time, ...)).
template <class T, class Device>
tensor<T, Device> reverse_time(const tensor<T, Device>& x) {
  return tensor<T, Device>(strided_slice(x, {0, -1}, {fluxion::end, fluxion::end}, {1, -1}));
}

/// Keras's mask at step t as a (batch, 1) column of keep (batch, steps): 1 where the step runs, 0
/// where the row carries its states over (the statements' path).
template <class T, class Device>
tensor<T, Device> step_keep(const tensor<T, Device>& keep, index_t batch, index_t t) {
  return tensor<T, Device>(slice(keep, {0, t}, {batch, 1}));
}

/// A fused sequence's forward steps: step(t, product).cell over every (b, u) for t = 0, 1, ...,
/// each cell reading its `gates` columns u, u + units, ... of h_t R (h: h_0 .. h_steps, each
/// (batch, units), which the steps write; R (units, gates * units)). One persistent kernel where
/// recurrent_cells<Device>::run_sequence takes the sequence; otherwise a GEMM (or the products
/// inside the cell kernel, products_inside) and a cell pass per step. zero_start: h_0 = 0, so
/// step 0 has no product.
template <class Device, class T, class Steps>
void run_forward_sequence(index_t batch, index_t units, index_t steps, index_t gates, T* h, const T* r,
                          bool zero_start, const Steps& step) {
  using cells = recurrent_cells<Device>;
  const index_t bu = batch * units, n = gates * units, origin = 0;
  const sequence_products<T> products{h, bu, 0, r, units, n, units, static_cast<int>(gates), zero_start ? 0 : -1};
  if (cells::run_sequence(batch, units, steps, products, step)) return;
  const bool inside = cells::products_inside(batch, units);
  tensor<T, Device> z = inside ? tensor<T, Device>() : tensor<T, Device>(fluxion::shape{batch, n});
  for (index_t t = 0; t < steps; ++t) {
    if ((t > 0 || !zero_start) && !inside)
      fluxion::detail::evaluator<Device>::matmul(false, false, 1, batch, n, units, h + t * bu, &origin, r, &origin,
                                                 z.mutable_data());
    cells::run(batch, units, step(t, step_product(t == 0 && zero_start, inside, z.data(), h + t * bu, r, units, n)));
  }
}

/// A fused sequence's backward steps: step(t, product).cell over every (b, u) for t = steps - 1
/// down to 0, each cell reading column u of d_{t+1} R^T (d: (steps, batch, gates * units), which
/// step t's cells write for step t - 1; R (units, gates * units)), none at the last step. One
/// persistent kernel, as run_forward_sequence, or per step a cell pass and a GEMM.
template <class Device, class T, class Steps>
void run_backward_sequence(index_t batch, index_t units, index_t steps, index_t gates, const T* d,
                           const tensor<T, Device>& r, const Steps& step) {
  using cells = recurrent_cells<Device>;
  const index_t n = gates * units, origin = 0;
  const sequence_products<T> products{d, batch * n, 1, r.data(), n, units, 0, 1, steps - 1, true, true};
  if (cells::run_sequence(batch, units, steps, products, step)) return;
  const bool inside = cells::products_inside(batch, units);
  const tensor<T, Device> rt = inside ? tensor<T, Device>(transpose(r)) : tensor<T, Device>();  // (n, units)
  tensor<T, Device> dh(fluxion::shape{batch, units});
  for (index_t t = steps - 1; t >= 0; --t) {
    cells::run(batch, units,
               step(t, step_product(t == steps - 1, inside, dh.data(), d + (t + 1) * batch * n, rt.data(), n, units)));
    if (t > 0 && !inside)  // d_t R^T, for step t - 1
      fluxion::detail::evaluator<Device>::matmul(false, true, 1, batch, units, n, d + t * batch * n, &origin,
                                                 r.data(), &origin, dh.mutable_data());
  }
}

/// The last state of a sequence from state_sequence, (batch, units), as a tensor of its own.
template <class T, class Device>
tensor<T, Device> final_state(const tensor<T, Device>& states, index_t steps, index_t batch, index_t units) {
  return tensor<T, Device>(reshape(slice(states, {steps, 0, 0}, {1, batch, units}), {batch, units}));
}

/// Tape entries for a fused sequence's final states: they only mark the states as the tape's (so
/// that what reads them is recorded, and a decoder's fused sequence sees them tracked); the
/// sequence's own entry, recorded after them and so run before them, reads their gradients.
template <class T, class Device, std::size_t N, int Config = fluxion::detail::autodiff_config>
void record_states(gradient_tape& tape, const std::array<tensor<T, Device>, N>& states) {
  for (const tensor<T, Device>& s : states) {
    const std::uint64_t id = s.id();
    if constexpr (Config < 2)  // FLUXION_MAX_DERIVATIVE_ORDER 0
      tape.record(id, [id](autodiff::gradient_store& store) {
        if (store.find<T, Device>(id)) autodiff::throw_order_exceeded("gradient_tape", 0);
      });
    else
      tape.record(id, [](autodiff::gradient_store&) {});
  }
}

/// What a fused sequence's backward pass reads as its output's gradient: the output's (out_id;
/// (batch, units), or (batch, steps, units) with every step) and, with State (return_state), the
/// final h's (h_id) added to the last step's. Empty where neither is in the store.
template <bool State, class T, class Device>
tensor<T, Device> output_gradient(const autodiff::gradient_store& store, std::uint64_t out_id, std::uint64_t h_id,
                                  bool every_step, index_t batch, index_t steps, index_t units) {
  const tensor<T, Device>* dy = store.find<T, Device>(out_id);
  const tensor<T, Device>* dh = nullptr;
  if constexpr (State) dh = store.find<T, Device>(h_id);
  if (!dh) return dy ? *dy : tensor<T, Device>();
  if constexpr (State) {  // the statements below compile only where call_with_state is used
    if (!every_step) return dy ? tensor<T, Device>(*dy + *dh) : *dh;
    const tensor<T, Device> last(reshape(*dh, {batch, 1, units}));
    if (!dy)
      return steps == 1 ? last
                        : tensor<T, Device>(concat({zeros<T, Device>({batch, steps - 1, units}), last}, 1));
    if (steps == 1) return tensor<T, Device>(*dy + last);
    return tensor<T, Device>(concat({tensor<T, Device>(slice(*dy, {0, 0, 0}, {batch, steps - 1, units})),
                                     tensor<T, Device>(slice(*dy, {0, steps - 1, 0}, {batch, 1, units}) + last)},
                                    1));
  } else {
    return tensor<T, Device>();  // not reached: without State there is no dh
  }
}

/// The gradients a fused sequence's backward pass starts from: the output's (dy, empty where the
/// store has none) and, under a mask, h's carried gradient (carry, (batch, units)), which a row
/// passes on past the steps it skips.
template <class T, class Device>
struct sequence_gradients {
  tensor<T, Device> dy;
  tensor<T, Device> carry;  // empty without a mask
  bool final_h = false;     // the final h's gradient (return_state) is in carry
};

/// output_gradient, and under a mask (`masked`) the carried h gradient: zeros, or with every
/// step's output the final h's gradient, which then starts the carry instead of joining the last
/// step's (a row that skipped the last step has a zero last output, not its final h).
template <bool State, class T, class Device>
sequence_gradients<T, Device> sequence_output_gradients(const autodiff::gradient_store& store, std::uint64_t out_id,
                                                        std::uint64_t h_id, bool every_step, bool masked,
                                                        index_t batch, index_t steps, index_t units) {
  sequence_gradients<T, Device> g;
  if (!(masked && every_step)) {
    g.dy = output_gradient<State, T, Device>(store, out_id, h_id, every_step, batch, steps, units);
    if (masked) g.carry = zeros<T, Device>({batch, units});
    return g;
  }
  if (const tensor<T, Device>* dy = store.find<T, Device>(out_id)) g.dy = *dy;
  const tensor<T, Device>* dh = State ? store.find<T, Device>(h_id) : nullptr;
  g.final_h = dh != nullptr;
  g.carry = dh ? tensor<T, Device>(*dh * T(1)) : zeros<T, Device>({batch, units});  // a copy: updated in place
  return g;
}

/// A recurrent layer's call options (Keras's call arguments): `rnn.call(x, {.mask = &m})`,
/// `rnn.call_with_state(x, {.mask = &m, .initial_state = &s})`.
template <class T, class Device, std::size_t States>
struct recurrent_call {
  /// Keras's mask, (batch, time): true where a step runs; false where it is padding, which the
  /// layer skips: the states carry over unchanged, and with ReturnSequences that step's output is
  /// zeros. Without ReturnSequences the output is the state after the last step that ran.
  const tensor<bool, Device>* mask = nullptr;
  /// Keras's initial_state (each (batch, units)); nullptr: zeros.
  const std::array<tensor<T, Device>, States>* initial_state = nullptr;
};

}  // namespace detail

/// Keras's activation of a recurrent layer (activation=; PyTorch's nn.RNN nonlinearity=): tanh (the
/// default) or relu.
enum class rnn_activation : unsigned char { tanh, relu };

/// Keras's constructor arguments of LSTM, GRU and SimpleRNN beyond the units and return_sequences,
/// given as `fx::nn::lstm<64>{{.dropout = 0.2, .recurrent_dropout = 0.2, .go_backwards = true}}` or
/// `{{.kernel_initializer = fx::nn::initializers::he_uniform(), .kernel_regularizer = fx::nn::regularizers::l2(1e-4)}}`
/// (Keras's order).
struct recurrent_options {
  /// Keras's activation: tanh or relu. The SimpleRNN's h_t+1 = activation(x_t W + b + h_t R)
  /// (PyTorch's nn.RNN nonlinearity); the LSTM's candidate c and its output o * activation(c); the
  /// GRU's candidate. The gates keep Keras's recurrent_activation, sigmoid.
  rnn_activation activation = rnn_activation::tanh;
  /// Keras's kernel_initializer (the input projection (features, gates * units)): glorot-uniform.
  initializer kernel_initializer = initializers::glorot_uniform();
  /// Keras's recurrent_initializer ((units, gates * units)): orthogonal.
  initializer recurrent_initializer = initializers::orthogonal();
  /// Keras's bias_initializer: zeros (the LSTM's (4 units), the GRU's (2, 3 units)).
  initializer bias_initializer = initializers::zeros();
  /// Keras's unit_forget_bias (the LSTM's): the forget gate's bias starts at ones, whatever
  /// bias_initializer gives the other gates.
  bool unit_forget_bias = true;
  /// Keras's kernel_regularizer, recurrent_regularizer and bias_regularizer (nn/regularizers.hpp).
  regularizer kernel_regularizer = {};
  regularizer recurrent_regularizer = {};
  regularizer bias_regularizer = {};
  /// Keras's kernel_constraint, recurrent_constraint and bias_constraint (nn/constraints.hpp).
  constraint kernel_constraint = {};
  constraint recurrent_constraint = {};
  constraint bias_constraint = {};
  /// Keras's dropout: in training, the fraction of the input's features zeroed (the others scaled
  /// by 1 / (1 - dropout)) before the input projection, one mask per sequence for all its steps, as
  /// Keras's LSTM and GRU draw it; in [0, 1).
  double dropout = 0;
  /// Keras's recurrent_dropout: in training, the fraction of the state's units zeroed (the others
  /// scaled by 1 / (1 - recurrent_dropout)) where a step reads the previous state h, one mask per
  /// sequence for all its steps (Gal and Ghahramani's variational dropout, as Keras's cells: the
  /// LSTM's recurrent product reads h * mask, the GRU's product and its z h term too). As Keras
  /// leaves cuDNN for its generic loop, the layer then runs its step statements instead of the fused
  /// cells; in [0, 1).
  double recurrent_dropout = 0;
  /// Keras's go_backwards: the layer reads the sequence from its last step to its first, and with
  /// ReturnSequences returns the outputs in that order (reversed); a mask is reversed with the input.
  bool go_backwards = false;
  /// The seed of the dropout masks' generator.
  std::uint64_t seed = 0;
};

namespace detail {

/// The input a recurrent layer's statements read: x reversed in time with go_backwards, and in
/// training times one dropout mask (batch, 1, features) for every step. One instance per element
/// type in a program, whatever the layer (prebuilt with FLUXION_PREBUILT_KERNELS, nn/prebuilt.hpp).
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> recurrent_input(tensor<T, Device> x, const recurrent_options& options, const dropout_stream& dropout,
                                  bool training) {
  if (options.go_backwards) x = reverse_time(x);
  if (training && options.dropout > 0) {
    const fluxion::shape& s = x.shape();
    const tensor<T, Device> keep_features = dropout.call([&](random::generator& gen) {
      return dropout_forward<T>(ones<T, Device>({s[0], 1, s[2]}), options.dropout, gen);
    });
    x = tensor<T, Device>(x * keep_features);
  }
  return x;
}

/// Keras's recurrent_dropout mask of a training call: (batch, units), 0 or 1 / (1 - rate), the
/// same for every step. Prebuilt as recurrent_input is.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> recurrent_state_keep(index_t batch, index_t units, double rate, const dropout_stream& dropout) {
  return dropout.call([&](random::generator& gen) { return dropout_forward<T>(ones<T, Device>({batch, units}), rate, gen); });
}

/// The seed of a recurrent layer's recurrent_dropout stream: another stream than its dropout's.
constexpr std::uint64_t recurrent_dropout_seed(std::uint64_t seed) { return seed ^ 0x9e3779b97f4a7c15ull; }

/// Keras's mask as the statements' keep (batch, time) of T: 1 where a step runs, 0 where a row
/// skips it; reversed in time with go_backwards. Prebuilt as recurrent_input is.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> recurrent_keep(const tensor<bool, Device>& mask, bool go_backwards) {
  return tensor<T, Device>(fluxion::cast<T>(go_backwards ? reverse_time(mask) : mask));
}

/// What a recurrent layer's statements give: the output and, where asked for (Keras's
/// return_state), the final states (the LSTM's h and c, the GRU's h), each (batch, units).
template <class T, class Device, std::size_t States>
struct recurrent_result {
  tensor<T, Device> output;
  std::array<tensor<T, Device>, States> state;
};

/// f(act) with Keras's activation as a function of expressions, act(x) being fluxion::tanh(x) or
/// fluxion::relu(x): a recurrent layer's step statements, written once for both and compiled as
/// two, since the activation is a run-time option. A header-only program with an LSTM or a GRU
/// compiles 8-9% more for it (nothing with prebuilt kernels, which hold both). One statement type
/// for both, where(flag, relu(x), tanh(x)), compiled 1-3% more but ran the statements 1.6x slower
/// with a rank-0 float flag (10-16x with a bool one, before the cpu evaluator's SIMD rule for a
/// bool mask; about 1.5x since) (stop 85, bench/RESULTS-compile.md).
template <class F>
auto with_activation(rnn_activation activation, const F& f) {
  if (activation == rnn_activation::relu) return f([](const auto& x) { return fluxion::relu(x); });
  return f([](const auto& x) { return fluxion::tanh(x); });
}

/// The step statements of a layer whose one state is h (the GRU's, the SimpleRNN's): h starts at
/// `initial` (nullptr: zeros), and step t's new state is next(t, hr), hr being h, or h times Keras's
/// recurrent_dropout mask state_keep (batch, units). Under Masked (keep: (batch, steps) of T) a row
/// that skips the step keeps its state, and its output there is zeros. Each statement is a tape
/// entry, so the loop is differentiated as it ran, to any order.
template <class T, bool ReturnSequences, bool State, bool Masked, class Device, class Next>
recurrent_result<T, Device, 1> single_state_steps(index_t batch, index_t steps, index_t units,
                                                  const std::array<tensor<T, Device>, 1>* initial,
                                                  const tensor<T, Device>* keep, const tensor<T, Device>* state_keep,
                                                  const Next& next) {
  tensor<T, Device> h = initial ? (*initial)[0] : zeros<T, Device>({batch, units});
  std::vector<tensor<T, Device>> outputs;
  for (index_t t = 0; t < steps; ++t) {
    const tensor<T, Device> hr = state_keep ? tensor<T, Device>(h * *state_keep) : h;
    const tensor<T, Device> h_next = next(t, hr);
    if constexpr (Masked) {  // a row that skips the step keeps its state; its output is zeros
      const tensor<T, Device> m = step_keep(*keep, batch, t);
      h = h + m * (h_next - h);
      if constexpr (ReturnSequences) outputs.push_back(m * h_next);
    } else {
      h = h_next;
      if constexpr (ReturnSequences) outputs.push_back(h);
    }
  }
  recurrent_result<T, Device, 1> result;
  if constexpr (ReturnSequences) result.output = tensor<T, Device>(stack(std::move(outputs), 1));
  else result.output = h;
  if constexpr (State) result.state = {h};
  return result;
}

/// The variables, building, checks and accessors of a recurrent layer with Gates gate blocks.
/// Derived gives base_name, initial_bias(options, gen) and run<State>(options, x, kernel,
/// recurrent_kernel, bias, initial_state), which maps the checked (batch, time >= 1, features)
/// input and the checked initial states (nullptr: zeros) to the output and, with State
/// (call_with_state), the final states. State is a template argument so that a program which
/// never asks for states does not compile their statements.
template <class Derived, index_t Gates, index_t Units, class T, class Device>
class recurrent_layer : public layer_base<Derived, T, Device> {
  using base = layer_base<Derived, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr index_t units = Units;
  /// The states a sequence carries: the LSTM's h and c, the GRU's h.
  static constexpr std::size_t state_count = Gates == 4 ? 2 : 1;
  /// Keras's initial_state, and what return_state gives after the output: each (batch, Units).
  using state_type = std::array<tensor<T, Device>, state_count>;
  /// call's and call_with_state's options: Keras's mask and initial_state.
  using call_options = recurrent_call<T, Device, state_count>;

  bool built() const noexcept { return m_kernel.has_value(); }
  /// Keras's dropout, go_backwards and the dropout's seed, as constructed.
  const recurrent_options& options() const noexcept { return m_options; }
  /// The mask that goes on with the output (ReturnSequences): the input's, reversed with
  /// go_backwards, as the outputs are.
  tensor<bool, Device> output_mask(const tensor<bool, Device>& mask) const {
    return m_options.go_backwards ? reverse_time(mask) : mask;
  }
  /// Creates the variables for inputs of per-example shape (time, features).
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() != 2)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects (batch, time, features) input, got (batch, " + to_string(per_example).substr(1));
    m_in = per_example[1];
    built_or_none(m_kernel, m_recurrent_kernel, m_bias, [&] {
      m_kernel.emplace(initial_kernel(gen), this->m_name + "/kernel");
      m_recurrent_kernel.emplace(initial_recurrent_kernel(gen), this->m_name + "/recurrent_kernel");
      m_bias.emplace(Derived::initial_bias(m_options, gen), this->m_name + "/bias");
      attach(*m_kernel, m_options.kernel_regularizer, m_options.kernel_constraint);
      attach(*m_recurrent_kernel, m_options.recurrent_regularizer, m_options.recurrent_constraint);
      attach(*m_bias, m_options.bias_regularizer, m_options.bias_constraint);
    });
  }
  void initialize(random::generator& gen) {
    if (!built()) return;
    m_kernel->assign(initial_kernel(gen));
    m_recurrent_kernel->assign(initial_recurrent_kernel(gen));
    m_bias->assign(Derived::initial_bias(m_options, gen));
  }

  variable<T, Device>& kernel() { return this->require_built(m_kernel, Derived::base_name, "kernel"); }
  variable<T, Device>& recurrent_kernel() {
    return this->require_built(m_recurrent_kernel, Derived::base_name, "recurrent_kernel");
  }
  variable<T, Device>& bias() { return this->require_built(m_bias, Derived::base_name, "bias"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_kernel, "kernel");
    this->visit(prefix, f, m_recurrent_kernel, "recurrent_kernel");
    this->visit(prefix, f, m_bias, "bias");
  }

 protected:
  explicit recurrent_layer(std::string name, recurrent_options options = {})
      : base(name.empty() ? Derived::base_name : std::move(name)), m_options(options), m_dropout(options.seed),
        m_recurrent_dropout(recurrent_dropout_seed(options.seed)) {
    const std::string layer = std::string(Derived::base_name) + " '" + this->m_name + "'";
    check_dropout_rate(layer, "dropout", options.dropout);
    check_dropout_rate(layer, "recurrent_dropout", options.recurrent_dropout);
    check_regularizer(layer, "kernel_regularizer", options.kernel_regularizer);
    check_regularizer(layer, "recurrent_regularizer", options.recurrent_regularizer);
    check_regularizer(layer, "bias_regularizer", options.bias_regularizer);
  }

  /// Checks the (batch, time, features) input e, the initial states (nullptr: zeros) and, with
  /// Masked, the mask, builds the layer on its first call, and runs it; with State the final
  /// states come back too. State and Masked are template arguments so that a program which never
  /// asks for states or masks does not compile their statements.
  template <bool State, bool Masked = false, class E>
  recurrent_result<T, Device, state_count> checked_run(const E& e, const state_type* initial,
                                                       const tensor<bool, Device>* mask = nullptr, bool training = false) {
    if constexpr (std::is_same_v<value_type_t<E>, T> && std::is_same_v<device_t<E>, Device>)
      return run_input<State, Masked>(e, initial, mask, training);
    else
      return {};  // the layer's check_input has said why, and nothing else is compiled
  }

 private:
  template <bool State, bool Masked, class E>
  recurrent_result<T, Device, state_count> run_input(const E& e, const state_type* initial,
                                                     const tensor<bool, Device>* mask, bool training) {
    const fluxion::shape s = e.shape();
    if (s.rank() != 3)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects input of shape (batch, time, features), got " + to_string(s));
    if (!built()) build(fluxion::shape{s[1], s[2]});
    if (s[2] != m_in || s[1] < 1)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects input of shape (batch, time >= 1, " + std::to_string(m_in) + "), got " +
                        to_string(s));
    if (initial)
      for (std::size_t i = 0; i < state_count; ++i)
        if ((*initial)[i].shape() != fluxion::shape{s[0], Units})
          throw shape_error(std::string(Derived::base_name) + " '" + this->m_name + "': initial_state[" +
                            std::to_string(i) + "] must be (batch, units) = (" + std::to_string(s[0]) + ", " +
                            std::to_string(Units) + ") for input " + to_string(s) + ", got " +
                            to_string((*initial)[i].shape()));
    if constexpr (Masked) check_sequence_mask(std::string(Derived::base_name) + " '" + this->m_name + "'", mask->shape(), s);
    const tensor<T, Device> x = recurrent_input<T>(fluxion::detail::materialize(e), m_options, m_dropout, training);
    const tensor<T, Device> state_keep =
        training && m_options.recurrent_dropout > 0
            ? recurrent_state_keep<T, fluxion::detail::autodiff_config, Device>(s[0], Units, m_options.recurrent_dropout,
                                                                               m_recurrent_dropout)
            : tensor<T, Device>();
    const tensor<T, Device>* rk = state_keep.empty() ? nullptr : &state_keep;
    if constexpr (!Masked) {
      return Derived::template run<State, false>(m_options, x, *m_kernel, *m_recurrent_kernel, *m_bias, initial,
                                                 nullptr, rk);
    } else {
      const tensor<T, Device> keep = recurrent_keep<T>(*mask, m_options.go_backwards);
      return Derived::template run<State, true>(m_options, x, *m_kernel, *m_recurrent_kernel, *m_bias, initial,
                                                &keep, rk);
    }
  }


 private:
  // Drawn on the host (the same values on every device), then copied to Device.
  tensor<T, Device> initial_kernel(random::generator& gen) const {
    return draw_weight<T, Device>(m_options.kernel_initializer, {m_in, Gates * Units}, gen);
  }
  tensor<T, Device> initial_recurrent_kernel(random::generator& gen) const {
    return draw_weight<T, Device>(m_options.recurrent_initializer, {Units, Gates * Units}, gen);
  }
  index_t m_in = 0;
  std::optional<variable<T, Device>> m_kernel, m_recurrent_kernel, m_bias;
  recurrent_options m_options;
  dropout_stream m_dropout, m_recurrent_dropout;
};

}  // namespace detail

}  // namespace fluxion::nn

/// The interface of a recurrent layer class NAME<Units, ReturnSequences, T, Device> deriving from
/// detail::recurrent_layer: its checks, Keras's name, the static output shape, the constructor and
/// the call, with compile-time messages that name the layer. The class adds run() and
/// initial_bias(options, gen).
#define FLUXION_RECURRENT_LAYER(NAME)                                                                              \
  static_assert(Units > 0, "fluxion::nn::" #NAME "<Units>: Units must be positive.");                             \
  static_assert(std::is_floating_point_v<T>,                                                                      \
                "fluxion::nn::" #NAME "<Units, ReturnSequences, T>: T must be a floating-point type.");          \
                                                                                                                  \
 public:                                                                                                          \
  static constexpr const char* base_name = #NAME;                                                                 \
  static constexpr bool return_sequences = ReturnSequences;                                                       \
  template <class U, class D = cpu>                                                                               \
  using rebind = NAME<Units, ReturnSequences, U, D>;                                                              \
  /** (time, features) per example becomes (Units), or (time, Units) with ReturnSequences. */                     \
  template <index_t... D>                                                                                         \
  static auto output_shape(static_shape<D...>) {                                                                  \
    static_assert(detail::check_extents<sizeof...(D) == 2, #NAME, "input rank", sizeof...(D), "rank", 2>::value,  \
                  "fluxion::nn::" #NAME ": the input must be (time, features) per example (rank 2); reshape it "  \
                  "first, e.g. with fluxion::nn::reshape<Time, Features>.");                                      \
    if constexpr (sizeof...(D) == 2 && ReturnSequences) {                                                         \
      return static_shape<std::array<index_t, 2>{D...}[0], Units>{};                                              \
    } else {                                                                                                      \
      return static_shape<Units>{};                                                                               \
    }                                                                                                             \
  }                                                                                                               \
                                                                                                                  \
  NAME() : NAME::recurrent_layer(std::string()) {}                                                                \
  /** A name of its own. (A template, so that {.dropout = 0.2} never reads as a string.) */                       \
  template <class S>                                                                                              \
    requires std::is_convertible_v<S, std::string>                                                                \
  explicit NAME(S&& name) : NAME::recurrent_layer(std::string(std::forward<S>(name))) {}                          \
  /** Keras's dropout, go_backwards and the dropout's seed: `NAME<64>{{.dropout = 0.2}}`. */                       \
  NAME(recurrent_options options, std::string name = {}) /* NOLINT: implicit, for NAME<64>{{.dropout = 0.2}} */  \
      : NAME::recurrent_layer(std::move(name), options) {}                                                        \
  /** The same layer for another element type or device (a sequential model re-declares its layers for */      \
  /** its own): the name and options carry over, the variables are built on the first call. */                  \
  template <class U, class D>                                                                                     \
    requires(!std::is_same_v<NAME<Units, ReturnSequences, U, D>, NAME>)                                            \
  explicit NAME(const NAME<Units, ReturnSequences, U, D>& other)                                                  \
      : NAME::recurrent_layer(other.name(), other.options()) {}                                                   \
                                                                                                                  \
  /** The last hidden state (batch, Units), or every one (batch, time, Units) with ReturnSequences. */            \
  template <class X>                                                                                              \
  tensor<T, Device> operator()(X&& x, bool training = false) {                                                    \
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));                                                     \
    check_input<decltype(e)>();                                                                                   \
    return this->template checked_run<false>(e, nullptr, nullptr, training).output;                               \
  }                                                                                                               \
  /** Keras's `layer(x, mask=m)`: m (batch, time) is false at padding, and the layer skips those steps. */        \
  template <class X>                                                                                              \
  tensor<T, Device> operator()(X&& x, const tensor<bool, Device>& mask, bool training = false) {                  \
    return call(std::forward<X>(x), {.mask = &mask}, training);                                                   \
  }                                                                                                               \
  /** The same with Keras's call arguments: `rnn.call(x, {.mask = &m})` (m (batch, time), false at padding: */    \
  /** the layer skips those steps), `{.initial_state = &s}`. */                                                   \
  template <class X>                                                                                              \
  tensor<T, Device> call(X&& x, const typename NAME::call_options& options, bool training = false) {              \
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));                                                     \
    check_input<decltype(e)>();                                                                                   \
    if (options.mask)                                                                                             \
      return options.initial_state                                                                                \
                 ? this->template checked_run<true, true>(e, options.initial_state, options.mask, training).output\
                 : this->template checked_run<false, true>(e, nullptr, options.mask, training).output;            \
    return options.initial_state                                                                                  \
               ? this->template checked_run<true>(e, options.initial_state, nullptr, training).output             \
               : this->template checked_run<false>(e, nullptr, nullptr, training).output;                         \
  }                                                                                                               \
                                                                                                                  \
  /** Keras's return_state = true, from zero states: {output, final states} (lstm: output, h, c; gru: output, */  \
  /** h), each state (batch, Units). `auto [y, h, c] = encoder.call_with_state(x);` */                             \
  template <class X>                                                                                              \
  std::array<tensor<T, Device>, 1 + NAME::state_count> call_with_state(X&& x, bool training = false) {            \
    return with_state<false>(std::forward<X>(x), nullptr, nullptr, training);                                     \
  }                                                                                                               \
  /** The same from Keras's initial_state (lstm: {h, c}; gru: {h}; each (batch, Units)), whose gradients */       \
  /** flow: `auto [z, h2, c2] = decoder.call_with_state(y, {h, c});` */                                            \
  template <class X>                                                                                              \
  std::array<tensor<T, Device>, 1 + NAME::state_count> call_with_state(                                           \
      X&& x, const typename NAME::state_type& initial_state, bool training = false) {                             \
    return with_state<false>(std::forward<X>(x), &initial_state, nullptr, training);                              \
  }                                                                                                               \
  /** The same with a mask: `auto [y, h, c] = rnn.call_with_state(x, {.mask = &m, .initial_state = &s});` */       \
  template <class X>                                                                                              \
  std::array<tensor<T, Device>, 1 + NAME::state_count> call_with_state(                                           \
      X&& x, const typename NAME::call_options& options, bool training = false) {                                 \
    if (options.mask) return with_state<true>(std::forward<X>(x), options.initial_state, options.mask, training);\
    return with_state<false>(std::forward<X>(x), options.initial_state, nullptr, training);                       \
  }                                                                                                               \
                                                                                                                  \
 private:                                                                                                         \
  /** The input's element type and device, checked with messages that name the layer. */                        \
  template <class E>                                                                                              \
  static void check_input() {                                                                                     \
    static_assert(std::is_same_v<value_type_t<E>, T>,                                                             \
                  "fluxion::nn::" #NAME ": the input's element type differs from the layer's; convert it with "   \
                  "fluxion::cast<T>, or declare the layer as " #NAME "<Units, ReturnSequences, T>.");             \
    static_assert(std::is_same_v<device_t<E>, Device>,                                                            \
                  "fluxion::nn::" #NAME ": the input is on another device than the layer's variables; move it "   \
                  "with fluxion::to<Device>, or declare the layer with that device.");                            \
  }                                                                                                               \
                                                                                                                  \
  template <bool Masked, class X>                                                                                 \
  std::array<tensor<T, Device>, 1 + NAME::state_count> with_state(                                               \
      X&& x, const typename NAME::state_type* initial, const tensor<bool, Device>* mask, bool training) {         \
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));                                                     \
    check_input<decltype(e)>();                                                                                   \
    auto r = this->template checked_run<true, Masked>(e, initial, mask, training);                                \
    std::array<tensor<T, Device>, 1 + NAME::state_count> out;                                                     \
    out[0] = std::move(r.output);                                                                                 \
    for (std::size_t i = 0; i < NAME::state_count; ++i) out[i + 1] = std::move(r.state[i]);                       \
    return out;                                                                                                   \
  }                                                                                                               \
                                                                                                                  \
 public:
