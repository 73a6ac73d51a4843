// The LSTM's fused cell: one pass per time step over (batch, units) that computes the four gates,
// the new cell and hidden state (forward), or the gates' pre-activation gradients and the cell's
// gradient (backward). nn::lstm runs it on devices other than the cpu (issue 14: "LSTM steps with
// fused gates"), where each launch costs more than the arithmetic: a step is one product h @ R and
// one of these kernels, and one more product for the recurrent gradient, instead of a statement per
// gate expression and a tape entry for each. The cpu keeps nn/lstm.hpp's fused statements, which
// run on xsimd vectors. Gates are in Keras's order i, f, c (written g here), o.
#pragma once

#include "../core/config.hpp"
#include "../core/shape.hpp"
#include "../expr/ops.hpp"

namespace fluxion::detail {
/// f(i) for every i < n, as one kernel on Device: specialized by each device's backend
/// (backend/cuda/lstm.hpp for fx::cuda).
template <class Device>
struct device_loop;
}  // namespace fluxion::detail

namespace fluxion::nn::detail {

/// Step t of the forward pass, for element k = b * units + u.
template <class T>
struct lstm_cell_forward {
  const T* recurrent;  // (batch, 4 units): h_t @ R, or nullptr at t = 0 (h_0 = 0)
  const T* projected;  // (batch * steps, 4 units): x @ W + bias, row b * steps + t
  const T* c_prev;     // (batch, units)
  T* gates;            // (batch, 4 units): i, f, g, o after their activations, kept for the backward pass
  T* c_next;           // (batch, units)
  T* h_next;           // (batch, units)
  T* y;                // nullptr, or the output (batch, y_steps, units), written at step y_t
  index_t units, steps, t, y_steps, y_t;

  FLUXION_HOST_DEVICE T pre_activation(index_t b, index_t j) const {
    const T p = projected[(b * steps + t) * 4 * units + j];
    return recurrent ? p + recurrent[b * 4 * units + j] : p;
  }
  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    const index_t b = k / units, u = k - b * units;
    const T i = ops::sigmoid::apply(pre_activation(b, u));
    const T f = ops::sigmoid::apply(pre_activation(b, units + u));
    const T g = ops::tanh::apply(pre_activation(b, 2 * units + u));
    const T o = ops::sigmoid::apply(pre_activation(b, 3 * units + u));
    const T c = f * c_prev[k] + i * g;
    const T h = o * ops::tanh::apply(c);
    T* row = gates + b * 4 * units;
    row[u] = i;
    row[units + u] = f;
    row[2 * units + u] = g;
    row[3 * units + u] = o;
    c_next[k] = c;
    h_next[k] = h;
    if (y) y[(b * y_steps + y_t) * units + u] = h;
  }
};

/// Step t of the backward pass (t from the last step down), for element k = b * units + u:
/// dh = dy_t + dh_next, then the gates' pre-activation gradients dz (into the time-major dz of
/// this step and into d projected), and dc carried to step t - 1 in place.
template <class T>
struct lstm_cell_backward {
  const T* gates;    // step t's (batch, 4 units)
  const T* c;        // c_{t+1}: the cell state step t made (batch, units)
  const T* c_prev;   // c_t (batch, units)
  const T* dy;       // nullptr, or the output's gradient (batch, dy_steps, units), read at step dy_t
  const T* dh_next;  // nullptr at the last step, else dz_{t+1} @ R^T (batch, units)
  T* dc;             // (batch, units): the cell gradient from step t + 1 in, to step t - 1 out
  T* dz;             // (batch, 4 units): this step's pre-activation gradients
  T* dprojected;     // (batch * steps, 4 units), row b * steps + t
  index_t units, steps, t, dy_steps, dy_t;

  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    const index_t b = k / units, u = k - b * units;
    T dh = dh_next ? dh_next[k] : T(0);
    if (dy) dh += dy[(b * dy_steps + dy_t) * units + u];
    const T* row = gates + b * 4 * units;
    const T i = row[u], f = row[units + u], g = row[2 * units + u], o = row[3 * units + u];
    const T tc = ops::tanh::apply(c[k]);
    const T dct = dc[k] + dh * o * (T(1) - tc * tc);
    const T dzi = dct * g * i * (T(1) - i);
    const T dzf = dct * c_prev[k] * f * (T(1) - f);
    const T dzg = dct * i * (T(1) - g * g);
    const T dzo = dh * tc * o * (T(1) - o);
    dc[k] = dct * f;
    T* out = dz + b * 4 * units;
    T* outp = dprojected + (b * steps + t) * 4 * units;
    out[u] = outp[u] = dzi;
    out[units + u] = outp[units + u] = dzf;
    out[2 * units + u] = outp[2 * units + u] = dzg;
    out[3 * units + u] = outp[3 * units + u] = dzo;
  }
};

}  // namespace fluxion::nn::detail
