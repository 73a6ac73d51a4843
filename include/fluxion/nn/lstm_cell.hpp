// The LSTM's fused cell: one pass per time step over (batch, units) that computes the four gates,
// the new cell and hidden state (forward), or the gates' pre-activation gradients and the cell's
// gradient (backward), instead of a statement per gate expression and a tape entry for each (issue
// 14: "LSTM steps with fused gates"). Gates are in Keras's order i, f, c (written g here), o.
//
// Each functor's cell(b, u) is written once for V = T (host and device: the cpu loop's tail and a
// device kernel's thread) and for V = an xsimd batch of T (host only: the cpu loop's vectors), as
// the optimizers' step functors are (optim/optimizer.hpp). recurrent_cells<Device>::run(batch,
// units, f) (nn/recurrent_cell.hpp) runs f on every cell.
#pragma once

#include "recurrent_cell.hpp"

namespace fluxion::nn::detail {

/// Step t of the forward pass.
template <class T, class P = row_product<T>>
struct lstm_cell_forward {
  using value_type = T;
  P recurrent;  // h_t @ R (batch, 4 units), none at t = 0 (h_0 = 0)
  const T* projected;  // (batch * steps, 4 units): x @ W + bias, row b * steps + t
  const T* c_prev;     // (batch, units)
  T* gates;            // (batch, 4 units): i, f, g, o after their activations, kept for the backward pass
  T* c_next;           // (batch, units)
  T* h_next;           // (batch, units)
  T* y;                // nullptr, or the output (batch, y_steps, units), written at step y_t
  index_t units, steps, t, y_steps, y_t;
  // Keras's mask (step_skipped): a row that skips the step carries h_prev and c_prev over, and its
  // output is zeros (zero_skipped: every step's output) or h_prev (the last output).
  const T* keep = nullptr;
  const T* h_prev = nullptr;  // (batch, units), read only where keep is given
  bool zero_skipped = false;
  bool relu = false;  // Keras's activation (the candidate's and the output's): relu, else tanh

  FLUXION_RECURRENT_CELL(
      if (step_skipped(keep, b, steps, t)) {
        const index_t k = b * units + u;
        const V h = cell_load<V>(h_prev + k);
        cell_store(c_next + k, cell_load<V>(c_prev + k));
        cell_store(h_next + k, h);
        if (y) cell_store(y + (b * y_steps + y_t) * units + u, zero_skipped ? V(T(0)) : h);
        return;
      }
      const T* p = projected + (b * steps + t) * 4 * units + u;
      const bool r = recurrent.any();
      V rz[4];
      if (r) recurrent.template columns<V>(b, u, units, 4, rz);
      auto z = [&](index_t gate) {  // the gate's pre-activation: p + h_t @ R, as the statements add it
        const V pz = cell_load<V>(p + gate * units);
        return r ? V(pz + rz[gate]) : pz;
      };
      const V i = cell_sigmoid(z(0)), f = cell_sigmoid(z(1)), g = cell_activation(relu, z(2)),
              o = cell_sigmoid(z(3));
      const index_t k = b * units + u;
      const V c = f * cell_load<V>(c_prev + k) + i * g;
      const V h = o * cell_activation(relu, c);
      T* row = gates + b * 4 * units + u;
      cell_store(row, i);
      cell_store(row + units, f);
      cell_store(row + 2 * units, g);
      cell_store(row + 3 * units, o);
      cell_store(c_next + k, c);
      cell_store(h_next + k, h);
      if (y) cell_store(y + (b * y_steps + y_t) * units + u, h);)
};

/// Step t of the backward pass (t from the last step down): dh = dy_t + dh_next, then the gates'
/// pre-activation gradients dz (into this step's dz and into d projected), and dc carried to step
/// t - 1 in place. Under a mask, a row that skipped the step has zero dz and carries dc and dh
/// (in dh_carry) to step t - 1 unchanged.
template <class T, class P = row_product<T>>
struct lstm_cell_backward {
  using value_type = T;
  const T* gates;    // step t's (batch, 4 units)
  const T* c;        // c_{t+1}: the cell state step t made (batch, units)
  const T* c_prev;   // c_t (batch, units)
  const T* dy;       // nullptr, or the output's gradient (batch, dy_steps, units), read at step dy_t
  P dh_next;  // dz_{t+1} @ R^T (batch, units), none at the last step
  T* dc;             // (batch, units): the cell gradient from step t + 1 in, to step t - 1 out
  T* dz;             // (batch, 4 units): this step's pre-activation gradients
  T* dprojected;     // (batch * steps, 4 units), row b * steps + t
  index_t units, steps, t, dy_steps, dy_t;
  const T* keep = nullptr;  // Keras's mask, as the forward pass's
  T* dh_carry = nullptr;    // (batch, units) where keep is given: h's gradient carried past skipped steps
  bool zero_skipped = false;
  bool relu = false;  // the activation, as the forward pass's

  FLUXION_RECURRENT_CELL(
      const index_t k = b * units + u;
      V dh(T(0));
      if (dh_next.any()) dh_next.template columns<V>(b, u, 0, 1, &dh);
      if (dh_carry) dh = dh + cell_load<V>(dh_carry + k);
      const bool skipped = step_skipped(keep, b, steps, t);
      if (dy && !(skipped && zero_skipped)) dh = dh + cell_load<V>(dy + (b * dy_steps + dy_t) * units + u);
      T* out = dz + b * 4 * units + u;
      T* outp = dprojected + (b * steps + t) * 4 * units + u;
      if (skipped) {  // h_{t+1} = h_t and c_{t+1} = c_t: dc stays, dh goes on
        cell_store(dh_carry + k, dh);
        for (int gate = 0; gate < 4; ++gate) {
          cell_store(out + gate * units, V(T(0)));
          cell_store(outp + gate * units, V(T(0)));
        }
        return;
      }
      if (dh_carry) cell_store(dh_carry + k, V(T(0)));
      const T* row = gates + b * 4 * units + u;
      const V i = cell_load<V>(row), f = cell_load<V>(row + units), g = cell_load<V>(row + 2 * units),
              o = cell_load<V>(row + 3 * units);
      const V one(T(1));
      const V tc = cell_activation(relu, cell_load<V>(c + k));
      const V dct = cell_load<V>(dc + k) + cell_activation_backward(relu, V(dh * o), tc);
      const V dzi = dct * g * i * (one - i);
      const V dzf = dct * cell_load<V>(c_prev + k) * f * (one - f);
      const V dzg = cell_activation_backward(relu, V(dct * i), g);
      const V dzo = dh * tc * o * (one - o);
      cell_store(dc + k, V(dct * f));
      cell_store(out, dzi);
      cell_store(outp, dzi);
      cell_store(out + units, dzf);
      cell_store(outp + units, dzf);
      cell_store(out + 2 * units, dzg);
      cell_store(outp + 2 * units, dzg);
      cell_store(out + 3 * units, dzo);
      cell_store(outp + 3 * units, dzo);)
};

}  // namespace fluxion::nn::detail
