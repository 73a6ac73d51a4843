// fx::nn::simple_rnn<Units, ReturnSequences>: Keras's SimpleRNN, with its tanh activation or relu,
// which is also PyTorch's nn.RNN (nonlinearity "tanh" or "relu", its two biases summed into Keras's
// one).
//
//   fx::nn::simple_rnn<32> rnn;                      // the last output: (batch, time, features) -> (batch, 32)
//   fx::tensor<float> h = rnn(x);
//   fx::nn::simple_rnn<32, true> seq;                // every output: -> (batch, time, 32)
//   fx::nn::simple_rnn<32> irnn{{.activation = fx::nn::rnn_activation::relu,   // Keras's activation="relu"
//                                .recurrent_initializer = fx::nn::initializers::identity()}};
//   rnn.kernel().shape();                            // (features, 32): glorot-uniform
//   rnn.recurrent_kernel().shape();                  // (32, 32): orthogonal
//   rnn.bias().shape();                              // (32): zeros
//   auto [y, h] = rnn.call_with_state(x);            // Keras's return_state; seq.call_with_state(x2, {h}):
//                                                    // its initial_state
//
//   h_t+1 = tanh(x_t W + b + h_t R), or relu(x_t W + b + h_t R)
//
// As the LSTM and the GRU (nn/lstm.hpp, nn/gru.hpp), with their options (recurrent_options: the
// initializers, regularizers and constraints, dropout, recurrent_dropout, go_backwards), Keras's
// mask, initial_state and return_state, nn::bidirectional, and their three paths: the input
// projection of every step is one GEMM up front, x (batch * time, features) times the kernel plus
// the bias; each step is one GEMM h @ recurrent_kernel and one fused cell pass (below), and the
// whole sequence one tape entry, whose backward pass runs a cell pass and a GEMM per step and one
// GEMM for the recurrent kernel's gradient (on a device, the products inside the cell kernel or
// one persistent kernel, as nn/lstm.hpp says). Where more than one tape records the sequence
// (nested tapes, for second derivatives), a forward accumulator sees it, the batch is empty or
// recurrent_dropout is on, the steps run as statements instead, differentiable to any order.
//
// Its float statements are in the prebuilt kernels library on request
// (fluxion_target_prebuilt_kernels(app SIMPLE_RNN), nn/prebuilt.hpp).
//
// Not Keras's: an activation other than tanh and relu (Keras's activation= takes any; PyTorch's
// nonlinearity= takes these two), stateful, and unroll (which changes nothing but speed).
#pragma once

#include <array>
#include <string>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "recurrent.hpp"
#include "recurrent_cell.hpp"

namespace fluxion::nn {

namespace detail {

/// Step t of the forward pass: h_{t+1} = tanh(projected_t + h_t R), or relu, over (batch, units).
template <class T, class P = row_product<T>>
struct simple_rnn_cell_forward {
  using value_type = T;
  P recurrent;            // h_t @ R (batch, units), none at t = 0 (h_0 = 0)
  const T* projected;     // (batch * steps, units): x @ W + b, row b * steps + t
  const T* h_prev;        // (batch, units)
  T* h_next;              // (batch, units)
  T* y;                   // nullptr, or the output (batch, y_steps, units), written at step y_t
  index_t units, steps, t, y_steps, y_t;
  // Keras's mask (step_skipped): a row that skips the step carries h_prev over, and its output is
  // zeros (zero_skipped: every step's output) or h_prev (the last output).
  const T* keep = nullptr;
  bool zero_skipped = false;
  bool relu = false;  // the activation: relu, else tanh

  FLUXION_RECURRENT_CELL(
      const index_t k = b * units + u;
      if (step_skipped(keep, b, steps, t)) {
        const V h = cell_load<V>(h_prev + k);
        cell_store(h_next + k, h);
        if (y) cell_store(y + (b * y_steps + y_t) * units + u, zero_skipped ? V(T(0)) : h);
        return;
      }
      V a = cell_load<V>(projected + (b * steps + t) * units + u);
      if (recurrent.any()) {
        V hr;
        recurrent.template columns<V>(b, u, units, 1, &hr);
        a = a + hr;
      }
      const V h = cell_activation(relu, a);
      cell_store(h_next + k, h);
      if (y) cell_store(y + (b * y_steps + y_t) * units + u, h);)
};

/// Step t of the backward pass (t from the last step down). The gradient of h_{t+1} is dy_t plus
/// d_{t+1} R^T (dh_matmul), and under a mask what a row carried past the steps it skipped
/// (dh_direct, in place). Writes the pre-activation's gradient into d recurrent (h R's side) and d
/// projected (x's side and the bias's). A row that skipped the step has zero gradients there and
/// passes all of dh on in dh_direct; one that ran it passes nothing there.
template <class T, class P = row_product<T>>
struct simple_rnn_cell_backward {
  using value_type = T;
  const T* h_next;     // h_{t+1} (batch, units): this step's output
  const T* dy;         // nullptr, or the output's gradient (batch, dy_steps, units), read at step dy_t
  P dh_matmul;         // d_{t+1} @ R^T (batch, units), none at the last step
  T* dh_direct;        // (batch, units): read and written only under a mask
  T* drecurrent;       // (batch, units): this step's gradient of h_t @ R
  T* dprojected;       // (batch * steps, units), row b * steps + t
  index_t units, steps, t, dy_steps, dy_t;
  const T* keep = nullptr;  // Keras's mask, as the forward pass's
  bool zero_skipped = false;
  bool relu = false;  // the activation, as the forward pass's

  FLUXION_RECURRENT_CELL(
      const index_t k = b * units + u;
      V dh(T(0));
      if (dh_matmul.any()) dh_matmul.template columns<V>(b, u, 0, 1, &dh);
      if (keep) dh = dh + cell_load<V>(dh_direct + k);
      const bool skipped = step_skipped(keep, b, steps, t);
      if (dy && !(skipped && zero_skipped)) dh = dh + cell_load<V>(dy + (b * dy_steps + dy_t) * units + u);
      T* outp = dprojected + (b * steps + t) * units + u;
      if (skipped) {  // h_{t+1} = h_t: all of dh goes on
        cell_store(dh_direct + k, dh);
        cell_store(drecurrent + k, V(T(0)));
        cell_store(outp, V(T(0)));
        return;
      }
      const V h = cell_load<V>(h_next + k);
      const V da = cell_activation_backward(relu, dh, h);
      if (keep) cell_store(dh_direct + k, V(T(0)));
      cell_store(drecurrent + k, da);
      cell_store(outp, da);)
};

/// The forward pass's step t as a fused cell, whatever computes its recurrent product (P: the
/// per-step loop's row_product, the persistent kernel's staged_product).
template <class T>
struct simple_rnn_forward_steps {
  const T *projected, *keep;
  T *h, *y;  // h: h_0 .. h_steps, each (batch, units)
  index_t batch, units, steps;
  bool every_step;  // ReturnSequences
  bool relu;

  template <class P>
  FLUXION_HOST_DEVICE simple_rnn_cell_forward<T, P> operator()(index_t t, const P& product) const {
    const index_t bu = batch * units;
    return {product, projected, h + t * bu, h + (t + 1) * bu, every_step || t == steps - 1 ? y : nullptr,
            units, steps, t, every_step ? steps : 1, every_step ? t : 0, keep, every_step, relu};
  }
};

/// The backward pass's step t (from the last down) as a fused cell, as simple_rnn_forward_steps.
template <class T>
struct simple_rnn_backward_steps {
  const T *h, *dy, *keep;  // h: h_0 .. h_steps; dy: null where the output has no gradient
  T *dh_direct, *drecurrent, *dprojected;
  index_t batch, units, steps;
  bool every_step;
  bool relu;

  template <class P>
  FLUXION_HOST_DEVICE simple_rnn_cell_backward<T, P> operator()(index_t t, const P& product) const {
    const index_t bu = batch * units;
    return {h + (t + 1) * bu, dy && (every_step || t == steps - 1) ? dy : nullptr, product, dh_direct,
            drecurrent + t * bu, dprojected, units, steps, t, every_step ? steps : 1, every_step ? t : 0,
            keep, every_step, relu};
  }
};

/// The whole sequence through the fused cell: projected is (batch * steps, units), row b * steps +
/// t; r the recurrent kernel's value (units, units); relu the activation (else tanh).
// Config: the autodiff settings (core/config.hpp), so that a unit without autodiff has its own copy.
template <class T, bool ReturnSequences, bool State, class Device, int Config = fluxion::detail::autodiff_config>
recurrent_result<T, Device, 1> simple_rnn_fused(const tensor<T, Device>& projected, const tensor<T, Device>& r,
                                                index_t batch, index_t steps, index_t units, gradient_tape* tape,
                                                const std::array<tensor<T, Device>, 1>* initial,
                                                const tensor<T, Device>* keep_mask, bool relu) {
  using eval = fluxion::detail::evaluator<Device>;
  tensor<T, Device> hs = state_sequence<State>(initial ? &(*initial)[0] : nullptr, steps, batch, units);
  tensor<T, Device> y(ReturnSequences ? fluxion::shape{batch, steps, units} : fluxion::shape{batch, units});
  bool zero_start = !State || initial == nullptr;  // not const: see gru_fused's h_id
  const tensor<T, Device> keep = keep_mask ? *keep_mask : tensor<T, Device>();  // (batch, steps) or empty
  run_forward_sequence<Device>(batch, units, steps, 1, hs.mutable_data(), r.data(), zero_start,
                               simple_rnn_forward_steps<T>{projected.data(), keep_mask ? keep.data() : nullptr,
                                                           hs.mutable_data(), y.mutable_data(), batch, units, steps,
                                                           ReturnSequences, relu});
  recurrent_result<T, Device, 1> result{y, {}};
  if constexpr (State) result.state = {final_state(hs, steps, batch, units)};
  if (!tape) return result;
  if constexpr (State) record_states<T, Device, 1, Config>(*tape, result.state);
  const std::uint64_t out_id = y.id();
  std::uint64_t h_id = State ? result.state[0].id() : 0;  // not const: as gru_fused's
  const tensor<T, Device> h0 = initial ? (*initial)[0] : tensor<T, Device>();
  if constexpr (Config < 2) {  // FLUXION_MAX_DERIVATIVE_ORDER 0
    tape->record(out_id, [out_id](autodiff::gradient_store& store) {
      if (store.find<T, Device>(out_id)) autodiff::throw_order_exceeded("gradient_tape", 0);
    });
  } else {
    tape->record(out_id, [tape, out_id, h_id, projected, r, hs, h0, keep, batch, steps, units, zero_start,
                          relu](autodiff::gradient_store& store) {
      (void)zero_start;  // read only with State: clang's -Wunused-lambda-capture otherwise
      auto [dy, carry, final_h] = sequence_output_gradients<State, T, Device>(
          store, out_id, h_id, ReturnSequences, !keep.empty(), batch, steps, units);
      if (dy.empty() && !final_h) return;
      const index_t origin = 0;
      // d recurrent holds every step's gradient of h_t @ R, (steps * batch) rows; d projected the
      // same values in x's row order (b * steps + t), for the kernel's and the bias's gradients.
      tensor<T, Device> drecurrent(fluxion::shape{steps * batch, units}), dprojected(fluxion::shape{batch * steps, units});
      tensor<T, Device> dr(r.shape());
      tensor<T, Device> dh_direct = carry.empty() ? tensor<T, Device>(fluxion::shape{batch, units}) : carry;
      run_backward_sequence<Device>(batch, units, steps, 1, drecurrent.data(), r,
                                    simple_rnn_backward_steps<T>{hs.data(), dy.empty() ? nullptr : dy.data(),
                                                                 keep.empty() ? nullptr : keep.data(),
                                                                 dh_direct.mutable_data(), drecurrent.mutable_data(),
                                                                 dprojected.mutable_data(), batch, units, steps,
                                                                 ReturnSequences, relu});
      // dR = sum over t of h_t^T d recurrent_t: h_0 .. h_{steps-1} and d recurrent are both (steps * batch) rows.
      eval::matmul(true, false, 1, units, units, steps * batch, hs.data(), &origin, drecurrent.data(), &origin,
                   dr.mutable_data());
      autodiff::tape_sink sink{*tape, store};
      sink.leaf(projected, dprojected);
      sink.leaf(r, dr);
      if constexpr (State) {
        if (!zero_start && tape->tracks(h0.id())) {  // h_0's gradient: d recurrent_0 @ R^T, plus what a masked row carried
          tensor<T, Device> dh_matmul(fluxion::shape{batch, units});
          eval::matmul(false, true, 1, batch, units, units, drecurrent.data(), &origin, r.data(), &origin,
                       dh_matmul.mutable_data());
          sink.leaf(h0, keep.empty() ? dh_matmul : tensor<T, Device>(dh_direct + dh_matmul));
        }
      }
    });
  }
  return result;
}

/// The statements of every SimpleRNN layer of element type T (see gru_forward in nn/gru.hpp): x is
/// (batch, time, features), already checked; initial the initial state {h} (nullptr: zeros; only
/// with State); keep Keras's mask as T (batch, time), state_keep Keras's recurrent_dropout mask
/// (batch, units), which the step's product reads h through; activation Keras's.
template <class T, bool ReturnSequences, bool State = false, bool Masked = false,
          int Config = fluxion::detail::autodiff_config, class Device = cpu>
recurrent_result<T, Device, 1> simple_rnn_forward(const tensor<T, Device>& e, const variable<T, Device>& kernel,
                                                  const variable<T, Device>& recurrent_kernel,
                                                  const variable<T, Device>& bias, index_t units,
                                                  const std::array<tensor<T, Device>, 1>* initial,
                                                  const tensor<T, Device>* keep, const tensor<T, Device>* state_keep,
                                                  rnn_activation activation) {
  const fluxion::shape& s = e.shape();
  const index_t batch = s[0], steps = s[1], features = s[2];
  // Row b * steps + t holds example b at step t.
  const tensor<T, Device> projected = matmul(fluxion::reshape(e, {-1, features}), kernel) + bias;
  {
    const tensor<T, Device>& r = recurrent_kernel.read_value();
    gradient_tape* tape = nullptr;
    const tensor<T, Device>& h0 = initial ? (*initial)[0] : projected;
    if (batch > 0 && !state_keep && fused_recurrent_applies(tape, projected, r, h0))
      return simple_rnn_fused<T, ReturnSequences, State, Device, Config>(projected, r, batch, steps, units, tape,
                                                                         initial, keep,
                                                                         activation == rnn_activation::relu);
  }
  // Keras's recurrent_dropout: the product reads hr = h * mask, as Keras's SimpleRNNCell.
  return single_state_steps<T, ReturnSequences, State, Masked>(
      batch, steps, units, initial, keep, state_keep, [&](index_t t, const tensor<T, Device>& hr) {
        const tensor<T, Device> p = strided_slice(projected, {t, 0}, {fluxion::end, fluxion::end}, {steps, 1});
        return with_activation(activation,
                               [&](auto act) { return tensor<T, Device>(act(p + matmul(hr, recurrent_kernel))); });
      });
}
}  // namespace detail

template <index_t Units, bool ReturnSequences = false, class T = float, class Device = cpu>
class simple_rnn
    : public detail::recurrent_layer<simple_rnn<Units, ReturnSequences, T, Device>, 1, Units, T, Device> {
  FLUXION_RECURRENT_LAYER(simple_rnn)

  /// The checked input through the layer (detail::recurrent_layer::checked_run).
  template <bool State, bool Masked>
  static detail::recurrent_result<T, Device, 1> run(const recurrent_options& options, const tensor<T, Device>& x,
                                                     const variable<T, Device>& kernel,
                                                     const variable<T, Device>& recurrent_kernel,
                                                     const variable<T, Device>& bias,
                                                     const std::array<tensor<T, Device>, 1>* initial,
                                                     const tensor<T, Device>* keep, const tensor<T, Device>* state_keep) {
    return detail::simple_rnn_forward<T, ReturnSequences, State, Masked>(x, kernel, recurrent_kernel, bias, Units,
                                                                         initial, keep, state_keep, options.activation);
  }
  /// Keras's bias (units): zeros unless bias_initializer says otherwise.
  static tensor<T, Device> initial_bias(const recurrent_options& options, random::generator& gen) {
    return detail::draw_weight<T, Device>(options.bias_initializer, {Units}, gen);
  }
};

}  // namespace fluxion::nn
