// fx::nn::lstm<Units, ReturnSequences>: Keras's LSTM (tanh activation, or relu with
// {.activation = fx::nn::rnn_activation::relu}; sigmoid recurrent activation; gates in Keras's
// order i, f, c, o).
//
//   fx::nn::lstm<32> rnn;                            // the last output: (batch, time, features) -> (batch, 32)
//   fx::tensor<float> h = rnn(x);
//   fx::nn::lstm<32, true> seq;                      // every output: -> (batch, time, 32)
//   rnn.kernel().shape();                            // (features, 128): glorot-uniform
//   rnn.recurrent_kernel().shape();                  // (32, 128): orthogonal; rnn.bias(): (128)
//   auto [y, h, c] = rnn.call_with_state(x);         // Keras's return_state: the final h and c too
//   auto [z, h2, c2] = seq.call_with_state(x2, {h, c});  // and its initial_state: a decoder
//
// The bias starts at zeros with its forget block at ones (Keras's unit_forget_bias). The input
// projection of every time step is one GEMM up front, x (batch * time, features) times the kernel
// plus the bias. Each step is then one GEMM h @ recurrent_kernel and one fused cell pass
// (nn/lstm_cell.hpp) that adds that step's rows and computes
//   c = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_c),   h = sigmoid(z_o) * tanh(c)   (tanh: or relu)
// from the pre-activation z (batch, 4 units), keeping the gates for the backward pass. The state
// starts at zeros, or at call_with_state's initial h and c (then the first step has its product
// too, and the backward pass sends dz_0 R^T to h_0 and the carried cell gradient to c_0); the final
// states' gradients (return_state) join the last step's. The whole sequence is one tape entry, whose backward pass runs a cell pass and
// a GEMM per step (backpropagation through time) and one GEMM for the recurrent kernel's gradient.
// On a device, with recurrent_product_limit() raised (it is 0 by default: slower on an H200), a
// small layer (recurrent_cells<Device>::products_inside: at most 256 units and batch * units at
// most the limit) computes each step's products inside the cell kernel instead, a dot product per
// cell (h R forward, dz R^T backward, R^T transposed once), so that a step is one launch rather
// than a GEMM, often a split-K reduction beside it, and the cell pass. With recurrent_persistent()
// on (off by default until measured on a GPU), a device runs each pass over the sequence as one
// persistent kernel instead (backend/cuda/recurrent.hpp): R's columns stay in shared memory and a
// grid barrier separates the steps. The GRU (nn/gru.hpp) takes the same three paths.
// That backward pass is not itself differentiable, so a sequence that more than one tape records
// (nested tapes, for second derivatives), or that a forward accumulator sees, takes the same steps
// as statements instead (a tape never records its own backward pass, so one persistent tape can
// take the fused cell): z as the sum of a slice and a GEMM, then two fused
// statements over slices of z, each a tape entry, so that the C++ loop over time steps is
// differentiated as it ran, to any order. So does an empty batch.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "lstm_cell.hpp"
#include "recurrent.hpp"

namespace fluxion::nn {

namespace detail {

/// The forward pass's step t as a fused cell, whatever computes its recurrent product (P: the
/// per-step loop's row_product, the persistent kernel's staged_product).
template <class T>
struct lstm_forward_steps {
  const T *projected, *keep;
  T *c, *h, *gates, *y;  // c and h: c_0 .. c_steps and h_0 .. h_steps, each (batch, units)
  index_t batch, units, steps;
  bool every_step;  // ReturnSequences
  bool relu;        // Keras's activation: relu, else tanh

  template <class P>
  FLUXION_HOST_DEVICE lstm_cell_forward<T, P> operator()(index_t t, const P& product) const {
    const index_t bu = batch * units;
    return {product, projected, c + t * bu, gates + t * batch * 4 * units, c + (t + 1) * bu, h + (t + 1) * bu,
            every_step || t == steps - 1 ? y : nullptr, units, steps, t, every_step ? steps : 1, every_step ? t : 0,
            keep, h + t * bu, every_step, relu};
  }
};

/// The backward pass's step t (from the last down) as a fused cell, as lstm_forward_steps.
template <class T>
struct lstm_backward_steps {
  const T *gates, *c, *dy, *keep;  // dy: null where the output has no gradient
  T *dc, *dz, *dprojected, *dh_carry;
  index_t batch, units, steps;
  bool every_step;
  bool relu;

  template <class P>
  FLUXION_HOST_DEVICE lstm_cell_backward<T, P> operator()(index_t t, const P& product) const {
    const index_t bu = batch * units, g4 = 4 * units;
    return {gates + t * batch * g4, c + (t + 1) * bu, c + t * bu, dy && (every_step || t == steps - 1) ? dy : nullptr,
            product, dc, dz + t * batch * g4, dprojected, units, steps, t, every_step ? steps : 1,
            every_step ? t : 0, keep, dh_carry, every_step, relu};
  }
};

/// The whole sequence through the fused cell (Device is not the cpu): projected is (batch * steps,
/// 4 units), row b * steps + t; r the recurrent kernel's value (units, 4 units); relu Keras's
/// activation (else tanh).
// Config: the autodiff settings (core/config.hpp), so that a unit without autodiff has its own copy.
template <class T, bool ReturnSequences, bool State, class Device, int Config = fluxion::detail::autodiff_config>
recurrent_result<T, Device, 2> lstm_fused(const tensor<T, Device>& projected, const tensor<T, Device>& r,
                                          index_t batch, index_t steps, index_t units, gradient_tape* tape,
                                          const std::array<tensor<T, Device>, 2>* initial,
                                          const tensor<T, Device>* keep_mask, bool relu) {
  using eval = fluxion::detail::evaluator<Device>;
  const index_t g4 = 4 * units;
  // h_0 .. h_steps and c_0 .. c_steps, each (batch, units); h_0 and c_0 zeros or the initial state.
  tensor<T, Device> hs = state_sequence<State>(initial ? &(*initial)[0] : nullptr, steps, batch, units),
                    cs = state_sequence<State>(initial ? &(*initial)[1] : nullptr, steps, batch, units);
  tensor<T, Device> gates(fluxion::shape{steps, batch, g4});
  tensor<T, Device> y(ReturnSequences ? fluxion::shape{batch, steps, units} : fluxion::shape{batch, units});
  bool zero_start = !State || initial == nullptr;  // h_0 = 0: no product at the first step (not const: see h_id)
  const tensor<T, Device> keep = keep_mask ? *keep_mask : tensor<T, Device>();  // (batch, steps) or empty
  run_forward_sequence<Device>(batch, units, steps, 4, hs.mutable_data(), r.data(), zero_start,
                               lstm_forward_steps<T>{projected.data(), keep_mask ? keep.data() : nullptr,
                                                     cs.mutable_data(), hs.mutable_data(), gates.mutable_data(),
                                                     y.mutable_data(), batch, units, steps, ReturnSequences, relu});
  recurrent_result<T, Device, 2> result{y, {}};
  if constexpr (State) result.state = {final_state(hs, steps, batch, units), final_state(cs, steps, batch, units)};
  if (!tape) return result;
  if constexpr (State) record_states<T, Device, 2, Config>(*tape, result.state);
  const std::uint64_t out_id = y.id();
  // Not const: where State is false, a const one would be a constant that the lambda below need not
  // capture, and clang's -Wunused-lambda-capture would say so.
  std::uint64_t h_id = State ? result.state[0].id() : 0, c_id = State ? result.state[1].id() : 0;
  const tensor<T, Device> h0 = initial ? (*initial)[0] : tensor<T, Device>(),
                          c0 = initial ? (*initial)[1] : tensor<T, Device>();
  if constexpr (Config < 2) {  // FLUXION_MAX_DERIVATIVE_ORDER 0
    tape->record(out_id, [out_id](autodiff::gradient_store& store) {
      if (store.find<T, Device>(out_id)) autodiff::throw_order_exceeded("gradient_tape", 0);
    });
  } else {
    tape->record(out_id, [tape, out_id, h_id, c_id, projected, r, hs, cs, gates, h0, c0, keep, batch, steps, units,
                          zero_start, relu](autodiff::gradient_store& store) {
      // The store may rehash while we add to it: what it holds is copied out first. Under a mask,
      // h's gradient carried past the steps a row skipped is dh_carry.
      auto [dy, dh_carry, final_h] = sequence_output_gradients<State, T, Device>(
          store, out_id, h_id, ReturnSequences, !keep.empty(), batch, steps, units);
      // The final c's gradient (return_state) starts the cell's.
      const tensor<T, Device>* dc_last = State ? store.find<T, Device>(c_id) : nullptr;
      if (dy.empty() && !dc_last && !final_h) return;
      const index_t g4 = 4 * units, origin = 0;
      tensor<T, Device> dz(fluxion::shape{steps, batch, g4}), dprojected(fluxion::shape{batch * steps, g4});
      // The cell's gradient from the step after the last: zeros, or the final c's (return_state).
      tensor<T, Device> dc = zeros<T, Device>({batch, units});
      if constexpr (State)
        if (dc_last) dc = tensor<T, Device>(*dc_last * T(1));
      tensor<T, Device> dr(r.shape());
      run_backward_sequence<Device>(batch, units, steps, 4, dz.data(), r,
                                    lstm_backward_steps<T>{gates.data(), cs.data(), dy.empty() ? nullptr : dy.data(),
                                                           keep.empty() ? nullptr : keep.data(), dc.mutable_data(),
                                                           dz.mutable_data(), dprojected.mutable_data(),
                                                           keep.empty() ? nullptr : dh_carry.mutable_data(), batch,
                                                           units, steps, ReturnSequences, relu});
      // dR = sum over t of h_t^T dz_t: h_0 .. h_{steps-1} and dz are both (steps * batch) rows.
      eval::matmul(true, false, 1, units, g4, steps * batch, hs.data(), &origin, dz.data(), &origin, dr.mutable_data());
      autodiff::tape_sink sink{*tape, store};
      sink.leaf(projected, dprojected);
      sink.leaf(r, dr);
      if (!zero_start) {  // the initial state's gradients: dz_0 @ R^T for h_0, the cell's carried for c_0
        if (tape->tracks(h0.id())) {
          tensor<T, Device> dh0(fluxion::shape{batch, units});
          eval::matmul(false, true, 1, batch, units, g4, dz.data(), &origin, r.data(), &origin, dh0.mutable_data());
          sink.leaf(h0, keep.empty() ? dh0 : tensor<T, Device>(dh0 + dh_carry));  // and what skipped steps carried
        }
        sink.leaf(c0, dc);
      }
    });
  }
  return result;
}

/// The statements of every LSTM layer of element type T (one instance per program; see
/// dense_forward in nn/dense.hpp). x is (batch, time, features), already checked; initial the
/// initial state {h, c} (nullptr: zeros; only with State), already checked; with State the final h
/// and c come back too (Keras's return_state). keep is Keras's mask as T (batch, time): 1 where a
/// step runs, 0 where a row skips it (its states carried over, its output zeros with
/// ReturnSequences); nullptr: no mask. state_keep is Keras's recurrent_dropout mask (batch, units),
/// which the steps' statements apply to the state the recurrent product reads (nullptr: none);
/// activation Keras's.
template <class T, bool ReturnSequences, bool State = false, bool Masked = false,
          int Config = fluxion::detail::autodiff_config, class Device = cpu>
recurrent_result<T, Device, 2> lstm_forward(const tensor<T, Device>& e, const variable<T, Device>& kernel,
                                            const variable<T, Device>& recurrent_kernel,
                                            const variable<T, Device>& bias, index_t units,
                                            const std::array<tensor<T, Device>, 2>* initial,
                                            const tensor<T, Device>* keep, const tensor<T, Device>* state_keep,
                                            rnn_activation activation) {
  const fluxion::shape& s = e.shape();
  const index_t batch = s[0], steps = s[1], features = s[2];
  // Row b * steps + t holds example b at step t.
  const tensor<T, Device> projected = matmul(reshape(e, {-1, features}), kernel) + bias;
  {
    const tensor<T, Device>& r = recurrent_kernel.read_value();
    gradient_tape* tape = nullptr;
    const tensor<T, Device>& h0 = initial ? (*initial)[0] : projected;
    const tensor<T, Device>& c0 = initial ? (*initial)[1] : projected;
    if (batch > 0 && !state_keep && fused_recurrent_applies(tape, projected, r, h0, c0))
      return lstm_fused<T, ReturnSequences, State, Device, Config>(projected, r, batch, steps, units, tape, initial, keep,
                                                                   activation == rnn_activation::relu);
  }
  tensor<T, Device> h = initial ? (*initial)[0] : zeros<T, Device>({batch, units}),
                    c = initial ? (*initial)[1] : zeros<T, Device>({batch, units});
  std::vector<tensor<T, Device>> outputs;
  for (index_t t = 0; t < steps; ++t) {
    // Keras's recurrent_dropout: the product reads h * mask.
    const tensor<T, Device> hr = state_keep ? tensor<T, Device>(h * *state_keep) : h;
    const tensor<T, Device> z =
        strided_slice(projected, {t, 0}, {fluxion::end, fluxion::end}, {steps, 1}) + matmul(hr, recurrent_kernel);
    auto gate = [&](index_t k) { return slice(z, {0, k * units}, {batch, units}); };
    const auto [c_next, h_next] = with_activation(activation, [&](auto act) {
      const tensor<T, Device> c_new = fluxion::sigmoid(gate(1)) * c + fluxion::sigmoid(gate(0)) * act(gate(2));
      return std::array<tensor<T, Device>, 2>{c_new, tensor<T, Device>(fluxion::sigmoid(gate(3)) * act(c_new))};
    });
    if constexpr (Masked) {  // a row that skips the step keeps its states; its output is zeros
      const tensor<T, Device> m = step_keep(*keep, batch, t);
      c = c + m * (c_next - c);
      h = h + m * (h_next - h);
      if constexpr (ReturnSequences) outputs.push_back(m * h_next);
    } else {
      c = c_next;
      h = h_next;
      if constexpr (ReturnSequences) outputs.push_back(h);
    }
  }
  recurrent_result<T, Device, 2> result;
  if constexpr (ReturnSequences) result.output = tensor<T, Device>(stack(std::move(outputs), 1));
  else result.output = h;
  if constexpr (State) result.state = {h, c};
  return result;
}
}  // namespace detail

template <index_t Units, bool ReturnSequences = false, class T = float, class Device = cpu>
class lstm : public detail::recurrent_layer<lstm<Units, ReturnSequences, T, Device>, 4, Units, T, Device> {
  FLUXION_RECURRENT_LAYER(lstm)

  /// The checked input through the layer (detail::recurrent_layer::checked_run).
  template <bool State, bool Masked>
  static detail::recurrent_result<T, Device, 2> run(const recurrent_options& options, const tensor<T, Device>& x,
                                                     const variable<T, Device>& kernel,
                                                     const variable<T, Device>& recurrent_kernel,
                                                     const variable<T, Device>& bias,
                                                     const std::array<tensor<T, Device>, 2>* initial,
                                                     const tensor<T, Device>* keep, const tensor<T, Device>* state_keep) {
    return detail::lstm_forward<T, ReturnSequences, State, Masked>(x, kernel, recurrent_kernel, bias, Units, initial,
                                                                  keep, state_keep, options.activation);
  }
  /// Keras's: bias_initializer's values (zeros), with unit_forget_bias the forget gate's block at
  /// ones (Keras draws the input gate's block, then the cell's and output's).
  static tensor<T, Device> initial_bias(const recurrent_options& options, random::generator& gen) {
    if (!options.unit_forget_bias) return detail::draw_weight<T, Device>(options.bias_initializer, {4 * Units}, gen);
    std::vector<T> b = options.bias_initializer.template operator()<T>({Units}, gen).to_vector();
    b.resize(static_cast<std::size_t>(2 * Units), T(1));
    const std::vector<T> rest = options.bias_initializer.template operator()<T>({2 * Units}, gen).to_vector();
    b.insert(b.end(), rest.begin(), rest.end());
    return fluxion::detail::device_copy<Device>(from_vector(b, {4 * Units}));
  }
};

}  // namespace fluxion::nn
