// The GRU's fused cell: one pass per time step over (batch, units) for all three gates, forward
// and backward, as the LSTM's (nn/lstm_cell.hpp). Gates are in Keras's order z (update), r
// (reset), h (candidate), with Keras's reset_after = true (the default since Keras 2.3, cuDNN's
// and PyTorch's GRU): the reset gate multiplies the candidate's recurrent term after its GEMM,
//   x_z, x_r, x_h = x W + b_in              h_z, h_r, h_h = h R + b_rec
//   z = sigmoid(x_z + h_z)   r = sigmoid(x_r + h_r)   c = tanh(x_h + r h_h)   (tanh: or relu)
//   h' = z h + (1 - z) c
// so a step is one GEMM h R and one cell pass, or on a device, for a small layer, one cell pass
// that computes h R itself (row_product, nn/recurrent_cell.hpp; as the LSTM's, nn/lstm.hpp). The forward pass keeps z, r, c and h_h for the
// backward pass.
#pragma once

#include "recurrent_cell.hpp"

namespace fluxion::nn::detail {

/// Step t of the forward pass.
template <class T, class P = row_product<T>>
struct gru_cell_forward {
  using value_type = T;
  P recurrent;  // h_t @ R (batch, 3 units), none at t = 0 (h_0 = 0)
  const T* rbias;         // (3 units): the recurrent bias b_rec
  const T* projected;     // (batch * steps, 3 units): x @ W + b_in, row b * steps + t
  const T* h_prev;        // (batch, units)
  T* gates;               // (batch, 4 units): z, r, c and h_h, kept for the backward pass
  T* h_next;              // (batch, units)
  T* y;                   // nullptr, or the output (batch, y_steps, units), written at step y_t
  index_t units, steps, t, y_steps, y_t;
  // Keras's mask (step_skipped): a row that skips the step carries h_prev over, and its output is
  // zeros (zero_skipped: every step's output) or h_prev (the last output).
  const T* keep = nullptr;
  bool zero_skipped = false;
  bool relu = false;  // Keras's activation (the candidate's): relu, else tanh

  FLUXION_RECURRENT_CELL(
      if (step_skipped(keep, b, steps, t)) {
        const index_t k = b * units + u;
        const V h = cell_load<V>(h_prev + k);
        cell_store(h_next + k, h);
        if (y) cell_store(y + (b * y_steps + y_t) * units + u, zero_skipped ? V(T(0)) : h);
        return;
      }
      const T* p = projected + (b * steps + t) * 3 * units + u;
      const bool r = recurrent.any();
      V hr[3];
      if (r) recurrent.template columns<V>(b, u, units, 3, hr);
      auto rz = [&](index_t gate) {  // the recurrent term h_t @ R + b_rec of a gate
        const V bz = cell_load<V>(rbias + gate * units + u);
        return r ? V(hr[gate] + bz) : bz;
      };
      const V z = cell_sigmoid(V(cell_load<V>(p) + rz(0)));
      const V reset = cell_sigmoid(V(cell_load<V>(p + units) + rz(1)));
      const V hh = rz(2);
      const V c = cell_activation(relu, V(cell_load<V>(p + 2 * units) + reset * hh));
      const index_t k = b * units + u;
      const V h = z * cell_load<V>(h_prev + k) + (V(T(1)) - z) * c;
      T* row = gates + b * 4 * units + u;
      cell_store(row, z);
      cell_store(row + units, reset);
      cell_store(row + 2 * units, c);
      cell_store(row + 3 * units, hh);
      cell_store(h_next + k, h);
      if (y) cell_store(y + (b * y_steps + y_t) * units + u, h);)
};

/// Step t of the backward pass (t from the last step down). The gradient of h_{t+1} is dy_t plus
/// what step t + 1 sent back: z dh directly (dh_direct, in place) and d recurrent @ R^T (dh_matmul).
/// Writes the pre-activation gradients into d projected (x's side) and d recurrent (h R's side,
/// which also is the recurrent bias's), and z dh into dh_direct for step t - 1. Under a mask, a row
/// that skipped the step has zero gradients there and passes all of dh to step t - 1 in dh_direct.
template <class T, class P = row_product<T>>
struct gru_cell_backward {
  using value_type = T;
  const T* gates;      // step t's (batch, 4 units)
  const T* h_prev;     // h_t (batch, units)
  const T* dy;         // nullptr, or the output's gradient (batch, dy_steps, units), read at step dy_t
  P dh_matmul;  // d recurrent_{t+1} @ R^T (batch, units), none at the last step
  T* dh_direct;        // (batch, units): z dh from step t + 1 in (unread at the last step without a mask), to t - 1 out
  T* drecurrent;       // (batch, 3 units): this step's gradient of h_t @ R + b_rec
  T* dprojected;       // (batch * steps, 3 units), row b * steps + t
  index_t units, steps, t, dy_steps, dy_t;
  const T* keep = nullptr;  // Keras's mask, as the forward pass's
  bool zero_skipped = false;
  bool relu = false;  // the activation, as the forward pass's

  FLUXION_RECURRENT_CELL(
      const index_t k = b * units + u;
      V dh(T(0));
      if (dh_matmul.any()) dh_matmul.template columns<V>(b, u, 0, 1, &dh);
      if (dh_matmul.any() || keep) dh = dh + cell_load<V>(dh_direct + k);  // under a mask, the last step too
      const bool skipped = step_skipped(keep, b, steps, t);
      if (dy && !(skipped && zero_skipped)) dh = dh + cell_load<V>(dy + (b * dy_steps + dy_t) * units + u);
      T* out = drecurrent + b * 3 * units + u;
      T* outp = dprojected + (b * steps + t) * 3 * units + u;
      if (skipped) {  // h_{t+1} = h_t: all of dh goes on
        cell_store(dh_direct + k, dh);
        for (int gate = 0; gate < 3; ++gate) {
          cell_store(out + gate * units, V(T(0)));
          cell_store(outp + gate * units, V(T(0)));
        }
        return;
      }
      const T* row = gates + b * 4 * units + u;
      const V z = cell_load<V>(row), reset = cell_load<V>(row + units), c = cell_load<V>(row + 2 * units),
              hh = cell_load<V>(row + 3 * units);
      const V one(T(1));
      const V dc = cell_activation_backward(relu, V(dh * (one - z)), c);  // the candidate's pre-activation
      const V dz = dh * (cell_load<V>(h_prev + k) - c) * z * (one - z);
      const V dr = dc * hh * reset * (one - reset);
      cell_store(dh_direct + k, V(dh * z));
      cell_store(out, dz);
      cell_store(outp, dz);
      cell_store(out + units, dr);
      cell_store(outp + units, dr);
      cell_store(out + 2 * units, V(dc * reset));
      cell_store(outp + 2 * units, dc);)
};

}  // namespace fluxion::nn::detail
