// The LSTM's fused cell: one pass per time step over (batch, units) that computes the four gates,
// the new cell and hidden state (forward), or the gates' pre-activation gradients and the cell's
// gradient (backward), instead of a statement per gate expression and a tape entry for each (issue
// 14: "LSTM steps with fused gates"). Gates are in Keras's order i, f, c (written g here), o.
//
// Each functor's cell(b, u) is written once for V = T (host and device: the cpu loop's tail and a
// device kernel's thread) and for V = an xsimd batch of T (host only: the cpu loop's vectors), as
// the optimizers' step functors are (optim/optimizer.hpp). lstm_cells<Device>::run(batch, units, f)
// runs f on every cell: below for the cpu, in backend/cuda/lstm.hpp for fx::cuda.
#pragma once

#include <algorithm>
#include <type_traits>

#include "../backend/cpu/detail/simd_arch.hpp"
#include "../backend/cpu/simd_ops.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/shape.hpp"
#include "../expr/ops.hpp"

namespace fluxion::nn::detail {

// The few operations a cell needs, for scalars (host and device) and xsimd batches (host only).
template <class V, class T>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V cell_load(const T* p) {
  return *p;
}
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE void cell_store(typename std::remove_cv_t<V>* p, const V& v) {
  *p = v;
}
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V cell_sigmoid(const V& x) {
  return ops::sigmoid::apply(x);
}
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V cell_tanh(const V& x) {
  return ops::tanh::apply(x);
}
template <class V, class T>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE V cell_load(const T* p) {
  return V::load_unaligned(p);
}
template <class V>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE void cell_store(typename V::value_type* p, const V& v) {
  v.store_unaligned(p);
}
template <class V>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE V cell_sigmoid(const V& x) {
  return fluxion::detail::simd::op<ops::sigmoid>::apply(x);
}
template <class V>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE V cell_tanh(const V& x) {
  return fluxion::detail::simd::op<ops::tanh>::apply(x);
}

/// Defines cell<V>(b, u) from one body: host-only for xsimd batches, host-device for scalars.
#define FLUXION_LSTM_CELL(...)                                    \
  template <class V>                                              \
    requires(!std::is_floating_point_v<V>)                        \
  FLUXION_ALWAYS_INLINE void cell(index_t b, index_t u) const {   \
    __VA_ARGS__                                                   \
  }                                                               \
  template <class V>                                              \
    requires std::is_floating_point_v<V>                          \
  FLUXION_HOST_DEVICE void cell(index_t b, index_t u) const {     \
    __VA_ARGS__                                                   \
  }

/// Step t of the forward pass.
template <class T>
struct lstm_cell_forward {
  using value_type = T;
  const T* recurrent;  // (batch, 4 units): h_t @ R, or nullptr at t = 0 (h_0 = 0)
  const T* projected;  // (batch * steps, 4 units): x @ W + bias, row b * steps + t
  const T* c_prev;     // (batch, units)
  T* gates;            // (batch, 4 units): i, f, g, o after their activations, kept for the backward pass
  T* c_next;           // (batch, units)
  T* h_next;           // (batch, units)
  T* y;                // nullptr, or the output (batch, y_steps, units), written at step y_t
  index_t units, steps, t, y_steps, y_t;

  FLUXION_LSTM_CELL(
      const T* p = projected + (b * steps + t) * 4 * units + u;
      const T* r = recurrent ? recurrent + b * 4 * units + u : nullptr;
      auto z = [&](index_t gate) {  // the gate's pre-activation: p + h_t @ R, as the statements add it
        const V pz = cell_load<V>(p + gate * units);
        return r ? V(pz + cell_load<V>(r + gate * units)) : pz;
      };
      const V i = cell_sigmoid(z(0)), f = cell_sigmoid(z(1)), g = cell_tanh(z(2)), o = cell_sigmoid(z(3));
      const index_t k = b * units + u;
      const V c = f * cell_load<V>(c_prev + k) + i * g;
      const V h = o * cell_tanh(c);
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
/// t - 1 in place.
template <class T>
struct lstm_cell_backward {
  using value_type = T;
  const T* gates;    // step t's (batch, 4 units)
  const T* c;        // c_{t+1}: the cell state step t made (batch, units)
  const T* c_prev;   // c_t (batch, units)
  const T* dy;       // nullptr, or the output's gradient (batch, dy_steps, units), read at step dy_t
  const T* dh_next;  // nullptr at the last step, else dz_{t+1} @ R^T (batch, units)
  T* dc;             // (batch, units): the cell gradient from step t + 1 in, to step t - 1 out
  T* dz;             // (batch, 4 units): this step's pre-activation gradients
  T* dprojected;     // (batch * steps, 4 units), row b * steps + t
  index_t units, steps, t, dy_steps, dy_t;

  FLUXION_LSTM_CELL(
      const index_t k = b * units + u;
      V dh = dh_next ? cell_load<V>(dh_next + k) : V(T(0));
      if (dy) dh = dh + cell_load<V>(dy + (b * dy_steps + dy_t) * units + u);
      const T* row = gates + b * 4 * units + u;
      const V i = cell_load<V>(row), f = cell_load<V>(row + units), g = cell_load<V>(row + 2 * units),
              o = cell_load<V>(row + 3 * units);
      const V one(T(1));
      const V tc = cell_tanh(cell_load<V>(c + k));
      const V dct = cell_load<V>(dc + k) + dh * o * (one - tc * tc);
      const V dzi = dct * g * i * (one - i);
      const V dzf = dct * cell_load<V>(c_prev + k) * f * (one - f);
      const V dzg = dct * i * (one - g * g);
      const V dzo = dh * tc * o * (one - o);
      cell_store(dc + k, V(dct * f));
      T* out = dz + b * 4 * units + u;
      T* outp = dprojected + (b * steps + t) * 4 * units + u;
      cell_store(out, dzi);
      cell_store(outp, dzi);
      cell_store(out + units, dzf);
      cell_store(outp + units, dzf);
      cell_store(out + 2 * units, dzg);
      cell_store(outp + 2 * units, dzg);
      cell_store(out + 3 * units, dzo);
      cell_store(outp + 3 * units, dzo);)
};

#undef FLUXION_LSTM_CELL

/// f.cell over every (b, u) of a (batch, units) step, as one kernel on Device: the cpu's below
/// (xsimd vectors along u, rows split over the thread pool); fx::cuda's in backend/cuda/lstm.hpp.
template <class Device>
struct lstm_cells;

template <>
struct lstm_cells<cpu> {
  template <class F>
  static void run(index_t batch, index_t units, const F& f) {
    using T = typename F::value_type;
    auto rows = [&](index_t begin, index_t end) {
      for (index_t b = begin; b < end; ++b) {
        index_t u = 0;
        if constexpr (!std::is_same_v<fluxion::detail::simd_arch, xsimd::unavailable>) {
          using batch_type = xsimd::batch<T, fluxion::detail::simd_arch>;
          constexpr index_t width = static_cast<index_t>(batch_type::size);
          for (; u + width <= units; u += width) f.template cell<batch_type>(b, u);
        }
        for (; u < units; ++u) f.template cell<T>(b, u);
      }
    };
    // About 4096 cells a task: a step of a small batch stays on the calling thread.
    const index_t per_task = std::max<index_t>(1, 4096 / std::max<index_t>(1, units));
    const index_t tasks = (batch + per_task - 1) / per_task;
    if (tasks <= 1) return rows(0, batch);
    fluxion::detail::parallel_for(tasks, [&](index_t task) {
      rows(task * per_task, std::min(batch, (task + 1) * per_task));
    });
  }
};

}  // namespace fluxion::nn::detail
