// fx::nn::lstm<Units, ReturnSequences>: Keras's LSTM (tanh activation, sigmoid recurrent
// activation, gates in Keras's order i, f, c, o).
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
//   c = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_c),   h = sigmoid(z_o) * tanh(c)
// from the pre-activation z (batch, 4 units), keeping the gates for the backward pass. The state
// starts at zeros, or at call_with_state's initial h and c (then the first step has its product
// too, and the backward pass sends dz_0 R^T to h_0 and the carried cell gradient to c_0); the final
// states' gradients (return_state) join the last step's. The whole sequence is one tape entry, whose backward pass runs a cell pass and
// a GEMM per step (backpropagation through time) and one GEMM for the recurrent kernel's gradient.
// On a device, with recurrent_product_limit() raised (it is 0 by default: slower on an H200), a
// small layer (recurrent_cells<Device>::products_inside: at most 256 units and batch * units at
// most the limit) computes each step's products inside the cell kernel instead, a dot product per
// cell (h R forward, dz R^T backward, R^T transposed once), so that a step is one launch rather
// than a GEMM, often a split-K reduction beside it, and the cell pass.
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

/// The whole sequence through the fused cell (Device is not the cpu): projected is (batch * steps,
/// 4 units), row b * steps + t; r the recurrent kernel's value (units, 4 units).
template <class T, bool ReturnSequences, bool State, class Device>
recurrent_result<T, Device, 2> lstm_fused(const tensor<T, Device>& projected, const tensor<T, Device>& r,
                                          index_t batch, index_t steps, index_t units, gradient_tape* tape,
                                          const std::array<tensor<T, Device>, 2>* initial,
                                          const tensor<T, Device>* keep_mask) {
  using cells = recurrent_cells<Device>;
  using eval = fluxion::detail::evaluator<Device>;
  const index_t bu = batch * units, g4 = 4 * units, origin = 0;
  // h_0 .. h_steps and c_0 .. c_steps, each (batch, units); h_0 and c_0 zeros or the initial state.
  tensor<T, Device> hs = state_sequence<State>(initial ? &(*initial)[0] : nullptr, steps, batch, units),
                    cs = state_sequence<State>(initial ? &(*initial)[1] : nullptr, steps, batch, units);
  tensor<T, Device> gates(fluxion::shape{steps, batch, g4}), recurrent(fluxion::shape{batch, g4});
  tensor<T, Device> y(ReturnSequences ? fluxion::shape{batch, steps, units} : fluxion::shape{batch, units});
  T *h = hs.mutable_data(), *c = cs.mutable_data(), *z = recurrent.mutable_data();
  const bool inside = cells::products_inside(batch, units);
  const bool zero_start = !State || initial == nullptr;  // h_0 = 0: no product at the first step
  const tensor<T, Device> keep = keep_mask ? *keep_mask : tensor<T, Device>();  // (batch, steps) or empty
  for (index_t t = 0; t < steps; ++t) {
    if ((t > 0 || !zero_start) && !inside)
      eval::matmul(false, false, 1, batch, g4, units, h + t * bu, &origin, r.data(), &origin, z);
    const bool out = ReturnSequences || t == steps - 1;
    cells::run(batch, units, lstm_cell_forward<T>{step_product(t == 0 && zero_start, inside, z, h + t * bu, r.data(), units, g4),
                                       projected.data(), c + t * bu,
                                       gates.mutable_data() + t * batch * g4, c + (t + 1) * bu, h + (t + 1) * bu,
                                       out ? y.mutable_data() : nullptr, units, steps, t, ReturnSequences ? steps : 1,
                                       ReturnSequences ? t : 0, keep_mask ? keep.data() : nullptr, h + t * bu,
                                       ReturnSequences});
  }
  recurrent_result<T, Device, 2> result{y, {}};
  if constexpr (State) result.state = {final_state(hs, steps, batch, units), final_state(cs, steps, batch, units)};
  if (!tape) return result;
  if constexpr (State) record_states(*tape, result.state);
  const std::uint64_t out_id = y.id(), h_id = State ? result.state[0].id() : 0,
                      c_id = State ? result.state[1].id() : 0;
  const tensor<T, Device> h0 = initial ? (*initial)[0] : tensor<T, Device>(),
                          c0 = initial ? (*initial)[1] : tensor<T, Device>();
  if constexpr (fluxion::max_derivative_order < 1) {
    tape->record(out_id, [out_id](autodiff::gradient_store& store) {
      if (store.find<T, Device>(out_id)) autodiff::throw_order_exceeded("gradient_tape", 0);
    });
  } else {
    tape->record(out_id, [tape, out_id, h_id, c_id, projected, r, hs, cs, gates, h0, c0, keep, batch, steps, units,
                          inside, zero_start](autodiff::gradient_store& store) {
      // The store may rehash while we add to it: what it holds is copied out first. Under a mask,
      // h's gradient carried past the steps a row skipped is dh_carry.
      auto [dy, dh_carry, final_h] = sequence_output_gradients<State, T, Device>(
          store, out_id, h_id, ReturnSequences, !keep.empty(), batch, steps, units);
      // The final c's gradient (return_state) starts the cell's.
      const tensor<T, Device>* dc_last = State ? store.find<T, Device>(c_id) : nullptr;
      if (dy.empty() && !dc_last && !final_h) return;
      const index_t bu = batch * units, g4 = 4 * units, origin = 0;
      tensor<T, Device> dz(fluxion::shape{steps, batch, g4}), dprojected(fluxion::shape{batch * steps, g4});
      // The cell's gradient from the step after the last: zeros, or the final c's (return_state).
      tensor<T, Device> dc = zeros<T, Device>({batch, units});
      if constexpr (State)
        if (dc_last) dc = tensor<T, Device>(*dc_last * T(1));
      tensor<T, Device> dh(fluxion::shape{batch, units}), dr(r.shape());
      const T* c = cs.data();
      const tensor<T, Device> rt = inside ? tensor<T, Device>(transpose(r)) : tensor<T, Device>();  // (4 units, units)
      for (index_t t = steps - 1; t >= 0; --t) {
        const bool in = !dy.empty() && (ReturnSequences || t == steps - 1);
        cells::run(batch, units, lstm_cell_backward<T>{gates.data() + t * batch * g4, c + (t + 1) * bu, c + t * bu,
                                            in ? dy.data() : nullptr,
                                            step_product(t == steps - 1, inside, dh.data(),
                                                         dz.data() + (t + 1) * batch * g4, rt.data(), g4, units),
                                            dc.mutable_data(), dz.mutable_data() + t * batch * g4,
                                            dprojected.mutable_data(), units, steps, t, ReturnSequences ? steps : 1,
                                            ReturnSequences ? t : 0, keep.empty() ? nullptr : keep.data(),
                                            keep.empty() ? nullptr : dh_carry.mutable_data(), ReturnSequences});
        if (t > 0 && !inside)  // dh_t = dz_t @ R^T, for step t - 1
          eval::matmul(false, true, 1, batch, units, g4, dz.data() + t * batch * g4, &origin, r.data(), &origin,
                       dh.mutable_data());
      }
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
/// which the steps' statements apply to the state the recurrent product reads (nullptr: none).
template <class T, bool ReturnSequences, bool State = false, bool Masked = false,
          int Config = fluxion::detail::autodiff_config, class Device = cpu>
recurrent_result<T, Device, 2> lstm_forward(const tensor<T, Device>& e, const variable<T, Device>& kernel,
                                            const variable<T, Device>& recurrent_kernel,
                                            const variable<T, Device>& bias, index_t units,
                                            const std::array<tensor<T, Device>, 2>* initial,
                                            const tensor<T, Device>* keep = nullptr,
                                            const tensor<T, Device>* state_keep = nullptr) {
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
      return lstm_fused<T, ReturnSequences, State>(projected, r, batch, steps, units, tape, initial, keep);
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
    const tensor<T, Device> c_next = fluxion::sigmoid(gate(1)) * c + fluxion::sigmoid(gate(0)) * fluxion::tanh(gate(2));
    const tensor<T, Device> h_next = fluxion::sigmoid(gate(3)) * fluxion::tanh(c_next);
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
  static detail::recurrent_result<T, Device, 2> run(const tensor<T, Device>& x, const variable<T, Device>& kernel,
                                                     const variable<T, Device>& recurrent_kernel,
                                                     const variable<T, Device>& bias,
                                                     const std::array<tensor<T, Device>, 2>* initial,
                                                     const tensor<T, Device>* keep, const tensor<T, Device>* state_keep) {
    return detail::lstm_forward<T, ReturnSequences, State, Masked>(x, kernel, recurrent_kernel, bias, Units, initial,
                                                                  keep, state_keep);
  }
  static tensor<T, Device> initial_bias() {  // zeros, the forget gate's block at ones
    std::vector<T> b(static_cast<std::size_t>(4 * Units), T(0));
    std::fill(b.begin() + Units, b.begin() + 2 * Units, T(1));
    return fluxion::detail::device_copy<Device>(from_vector(b, {4 * Units}));
  }
};

}  // namespace fluxion::nn
