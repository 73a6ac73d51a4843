// fx::nn::gru<Units, ReturnSequences>: Keras's GRU with its defaults (tanh activation, sigmoid
// recurrent activation, reset_after = true, gates in Keras's order z, r, h), which is also cuDNN's
// and PyTorch's GRU; or with Keras's activation="relu" ({.activation = fx::nn::rnn_activation::relu}:
// the candidate's).
//
//   fx::nn::gru<32> rnn;                             // the last output: (batch, time, features) -> (batch, 32)
//   fx::tensor<float> h = rnn(x);
//   fx::nn::gru<32, true> seq;                       // every output: -> (batch, time, 32)
//   rnn.kernel().shape();                            // (features, 96): glorot-uniform
//   rnn.recurrent_kernel().shape();                  // (32, 96): orthogonal
//   rnn.bias().shape();                              // (2, 96): zeros; row 0 the input bias, row 1 the recurrent bias
//   auto [y, h] = rnn.call_with_state(x);            // Keras's return_state; seq.call_with_state(x2, {h}):
//                                                    // its initial_state (h_0's gradient: z dh + dr_0 R^T)
//
// As the LSTM (nn/lstm.hpp): the input projection of every time step is one GEMM up front, x
// (batch * time, features) times the kernel plus the input bias; each step is one GEMM h @
// recurrent_kernel and one fused cell pass (nn/gru_cell.hpp); the state starts at zeros. The whole
// sequence is one tape entry, whose backward pass runs a cell pass and a GEMM per step and one
// GEMM for the recurrent kernel's gradient. Where more than one tape records the sequence (nested
// tapes, for second derivatives), a forward accumulator sees it, or the batch is empty, the steps
// run as statements instead, differentiable to any order.
//
// Not Keras's: reset_after = false (Keras 1's GRU, which applies the reset gate before the
// candidate's recurrent GEMM), return_state, go_backwards, stateful, dropout and masking.
#pragma once

#include <array>
#include <string>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "gru_cell.hpp"
#include "recurrent.hpp"

namespace fluxion::nn {

namespace detail {

/// The forward pass's step t as a fused cell, whatever computes its recurrent product (P: the
/// per-step loop's row_product, the persistent kernel's staged_product).
template <class T>
struct gru_forward_steps {
  const T *rbias, *projected, *keep;
  T *h, *gates, *y;  // h: h_0 .. h_steps, each (batch, units)
  index_t batch, units, steps;
  bool every_step;  // ReturnSequences
  bool relu;        // Keras's activation: relu, else tanh

  template <class P>
  FLUXION_HOST_DEVICE gru_cell_forward<T, P> operator()(index_t t, const P& product) const {
    const index_t bu = batch * units;
    return {product, rbias, projected, h + t * bu, gates + t * batch * 4 * units, h + (t + 1) * bu,
            every_step || t == steps - 1 ? y : nullptr, units, steps, t, every_step ? steps : 1, every_step ? t : 0,
            keep, every_step, relu};
  }
};

/// The backward pass's step t (from the last down) as a fused cell, as gru_forward_steps.
template <class T>
struct gru_backward_steps {
  const T *gates, *h, *dy, *keep;  // dy: null where the output has no gradient
  T *dh_direct, *drecurrent, *dprojected;
  index_t batch, units, steps;
  bool every_step;
  bool relu;

  template <class P>
  FLUXION_HOST_DEVICE gru_cell_backward<T, P> operator()(index_t t, const P& product) const {
    return {gates + t * batch * 4 * units, h + t * batch * units, dy && (every_step || t == steps - 1) ? dy : nullptr,
            product, dh_direct, drecurrent + t * batch * 3 * units, dprojected, units, steps, t,
            every_step ? steps : 1, every_step ? t : 0, keep, every_step, relu};
  }
};

/// The whole sequence through the fused cell: projected is (batch * steps, 3 units), row b * steps
/// + t; r the recurrent kernel's value (units, 3 units); rbias the recurrent bias (1, 3 units);
/// relu Keras's activation (else tanh).
// Config: the autodiff settings (core/config.hpp), so that a unit without autodiff has its own copy.
template <class T, bool ReturnSequences, bool State, class Device, int Config = fluxion::detail::autodiff_config>
recurrent_result<T, Device, 1> gru_fused(const tensor<T, Device>& projected, const tensor<T, Device>& r,
                                         const tensor<T, Device>& rbias, index_t batch, index_t steps, index_t units,
                                         gradient_tape* tape, const std::array<tensor<T, Device>, 1>* initial,
                                         const tensor<T, Device>* keep_mask, bool relu) {
  using eval = fluxion::detail::evaluator<Device>;
  // h_0 .. h_steps, each (batch, units); h_0 zeros or the initial state.
  tensor<T, Device> hs = state_sequence<State>(initial ? &(*initial)[0] : nullptr, steps, batch, units);
  tensor<T, Device> gates(fluxion::shape{steps, batch, 4 * units});
  tensor<T, Device> y(ReturnSequences ? fluxion::shape{batch, steps, units} : fluxion::shape{batch, units});
  bool zero_start = !State || initial == nullptr;  // h_0 = 0: no product at the first step (not const: see h_id)
  const tensor<T, Device> keep = keep_mask ? *keep_mask : tensor<T, Device>();  // (batch, steps) or empty
  run_forward_sequence<Device>(batch, units, steps, 3, hs.mutable_data(), r.data(), zero_start,
                               gru_forward_steps<T>{rbias.data(), projected.data(), keep_mask ? keep.data() : nullptr,
                                                    hs.mutable_data(), gates.mutable_data(), y.mutable_data(), batch,
                                                    units, steps, ReturnSequences, relu});
  recurrent_result<T, Device, 1> result{y, {}};
  if constexpr (State) result.state = {final_state(hs, steps, batch, units)};
  if (!tape) return result;
  if constexpr (State) record_states<T, Device, 1, Config>(*tape, result.state);
  const std::uint64_t out_id = y.id();
  // Not const: where State is false, a const one would be a constant that the lambda below need not
  // capture, and clang's -Wunused-lambda-capture would say so.
  std::uint64_t h_id = State ? result.state[0].id() : 0;
  const tensor<T, Device> h0 = initial ? (*initial)[0] : tensor<T, Device>();
  if constexpr (Config < 2) {  // FLUXION_MAX_DERIVATIVE_ORDER 0
    tape->record(out_id, [out_id](autodiff::gradient_store& store) {
      if (store.find<T, Device>(out_id)) autodiff::throw_order_exceeded("gradient_tape", 0);
    });
  } else {
    tape->record(out_id, [tape, out_id, h_id, projected, r, rbias, hs, gates, h0, keep, batch, steps, units,
                          zero_start, relu](autodiff::gradient_store& store) {
      (void)zero_start;  // read only with State: clang's -Wunused-lambda-capture otherwise
      // The store may rehash while we add to it: what it holds is copied out first. Under a mask,
      // the carried h gradient starts dh_direct, which every step then reads.
      auto [dy, carry, final_h] = sequence_output_gradients<State, T, Device>(
          store, out_id, h_id, ReturnSequences, !keep.empty(), batch, steps, units);
      if (dy.empty() && !final_h) return;
      const index_t g3 = 3 * units, origin = 0;
      // d recurrent holds every step's gradient of h_t @ R + b_rec, (steps * batch) rows.
      tensor<T, Device> drecurrent(fluxion::shape{steps * batch, g3}), dprojected(fluxion::shape{batch * steps, g3});
      tensor<T, Device> dr(r.shape());
      tensor<T, Device> dh_direct = carry.empty() ? tensor<T, Device>(fluxion::shape{batch, units}) : carry;
      const T* h = hs.data();
      run_backward_sequence<Device>(batch, units, steps, 3, drecurrent.data(), r,
                                    gru_backward_steps<T>{gates.data(), h, dy.empty() ? nullptr : dy.data(),
                                                          keep.empty() ? nullptr : keep.data(),
                                                          dh_direct.mutable_data(), drecurrent.mutable_data(),
                                                          dprojected.mutable_data(), batch, units, steps,
                                                          ReturnSequences, relu});
      // dR = sum over t of h_t^T d recurrent_t: h_0 .. h_{steps-1} and d recurrent are both (steps * batch) rows.
      eval::matmul(true, false, 1, units, g3, steps * batch, h, &origin, drecurrent.data(), &origin,
                   dr.mutable_data());
      autodiff::tape_sink sink{*tape, store};
      sink.leaf(projected, dprojected);
      sink.leaf(r, dr);
      sink.leaf(rbias, drecurrent);  // summed over the rows to the bias's (1, 3 units)
      if constexpr (State) {
        if (!zero_start && tape->tracks(h0.id())) {  // h_0's gradient: z dh directly, plus d recurrent_0 @ R^T
          tensor<T, Device> dh_matmul(fluxion::shape{batch, units});
          eval::matmul(false, true, 1, batch, units, g3, drecurrent.data(), &origin, r.data(), &origin,
                       dh_matmul.mutable_data());
          sink.leaf(h0, tensor<T, Device>(dh_direct + dh_matmul));
        }
      }
    });
  }
  return result;
}

/// The statements of every GRU layer of element type T (one instance per program; see
/// dense_forward in nn/dense.hpp). x is (batch, time, features), already checked; initial the
/// initial state {h} (nullptr: zeros; only with State), already checked; with State the final h
/// comes back too (Keras's return_state). keep is Keras's mask as T (batch, time), and state_keep Keras's
/// recurrent_dropout mask (batch, units), and activation Keras's, as lstm_forward's.
template <class T, bool ReturnSequences, bool State = false, bool Masked = false,
          int Config = fluxion::detail::autodiff_config, class Device = cpu>
recurrent_result<T, Device, 1> gru_forward(const tensor<T, Device>& e, const variable<T, Device>& kernel,
                                           const variable<T, Device>& recurrent_kernel,
                                           const variable<T, Device>& bias, index_t units,
                                           const std::array<tensor<T, Device>, 1>* initial,
                                           const tensor<T, Device>* keep, const tensor<T, Device>* state_keep,
                                           rnn_activation activation) {
  const fluxion::shape& s = e.shape();
  const index_t batch = s[0], steps = s[1], features = s[2], g3 = 3 * units;
  // Row b * steps + t holds example b at step t.
  const tensor<T, Device> projected = matmul(reshape(e, {-1, features}), kernel) + slice(bias, {0, 0}, {1, g3});
  const tensor<T, Device> rbias = slice(bias, {1, 0}, {1, g3});
  {
    const tensor<T, Device>& r = recurrent_kernel.read_value();
    gradient_tape* tape = nullptr;
    const tensor<T, Device>& h0 = initial ? (*initial)[0] : projected;
    if (batch > 0 && !state_keep && fused_recurrent_applies(tape, projected, r, rbias, h0))
      return gru_fused<T, ReturnSequences, State, Device, Config>(projected, r, rbias, batch, steps, units, tape, initial,
                                                                  keep, activation == rnn_activation::relu);
  }
  // Keras's recurrent_dropout: the step reads h * mask (hr: the product and the z h term, as Keras's cell).
  return single_state_steps<T, ReturnSequences, State, Masked>(
      batch, steps, units, initial, keep, state_keep, [&](index_t t, const tensor<T, Device>& hr) {
        const tensor<T, Device> p = strided_slice(projected, {t, 0}, {fluxion::end, fluxion::end}, {steps, 1});
        const tensor<T, Device> rec = matmul(hr, recurrent_kernel) + rbias;
        const tensor<T, Device> zr = fluxion::sigmoid(slice(p, {0, 0}, {batch, 2 * units}) +
                                                      slice(rec, {0, 0}, {batch, 2 * units}));
        auto block = [&](const tensor<T, Device>& a, index_t k) { return slice(a, {0, k * units}, {batch, units}); };
        const auto z = block(zr, 0);
        return with_activation(activation, [&](auto act) {
          return tensor<T, Device>(z * hr + (T(1) - z) * act(block(p, 2) + block(zr, 1) * block(rec, 2)));
        });
      });
}
}  // namespace detail

template <index_t Units, bool ReturnSequences = false, class T = float, class Device = cpu>
class gru : public detail::recurrent_layer<gru<Units, ReturnSequences, T, Device>, 3, Units, T, Device> {
  FLUXION_RECURRENT_LAYER(gru)

  /// The checked input through the layer (detail::recurrent_layer::checked_run).
  template <bool State, bool Masked>
  static detail::recurrent_result<T, Device, 1> run(const recurrent_options& options, const tensor<T, Device>& x,
                                                     const variable<T, Device>& kernel,
                                                     const variable<T, Device>& recurrent_kernel,
                                                     const variable<T, Device>& bias,
                                                     const std::array<tensor<T, Device>, 1>* initial,
                                                     const tensor<T, Device>* keep, const tensor<T, Device>* state_keep) {
    return detail::gru_forward<T, ReturnSequences, State, Masked>(x, kernel, recurrent_kernel, bias, Units, initial,
                                                                  keep, state_keep, options.activation);
  }
  /// Keras's reset_after bias (2, 3 units): the input's and the recurrent product's, zeros unless
  /// bias_initializer says otherwise.
  static tensor<T, Device> initial_bias(const recurrent_options& options, random::generator& gen) {
    return detail::draw_weight<T, Device>(options.bias_initializer, {2, 3 * Units}, gen);
  }
};

}  // namespace fluxion::nn
