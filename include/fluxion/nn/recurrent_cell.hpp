// What the recurrent layers' fused cells share (nn/lstm_cell.hpp, nn/gru_cell.hpp): the few
// operations a cell body needs, for scalars and xsimd batches, the macro that writes a cell body
// once for both, and recurrent_cells<Device>::run(batch, units, f), which runs f.cell(b, u) on every
// (b, u) of a step as one kernel: below for the cpu (xsimd vectors along u, rows split over the
// thread pool), in backend/cuda/recurrent.hpp for fx::cuda (a thread per cell).
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
/// Keras's activation of the recurrent layers (recurrent_options::activation): relu, else tanh.
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V cell_activation(bool relu, const V& x) {
  return relu ? ops::relu::apply(x) : cell_tanh(x);
}
/// g times the activation's derivative, from the activation's value `out`: tanh's 1 - out^2, or
/// relu's g where out > 0 (the input was positive), as the rule table's.
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V cell_activation_backward(bool relu, const V& g, const V& out) {
  if (relu) return out > V(0) ? g : V(0);
  return g * (V(1) - out * out);
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
template <class V>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE V cell_activation(bool relu, const V& x) {
  return relu ? fluxion::detail::simd::op<ops::relu>::apply(x) : cell_tanh(x);
}
template <class V>
  requires(!std::is_floating_point_v<V>)
FLUXION_ALWAYS_INLINE V cell_activation_backward(bool relu, const V& g, const V& out) {
  using T = typename V::value_type;
  if (relu) return xsimd::select(out > V(T(0)), g, V(T(0)));
  return g * (V(T(1)) - out * out);
}

/// Defines a member function template over V from one body (`signature` names V): host-only for
/// xsimd batches, host-device for scalars.
#define FLUXION_RECURRENT_METHOD(signature, ...)                  \
  template <class V>                                              \
    requires(!std::is_floating_point_v<V>)                        \
  FLUXION_ALWAYS_INLINE signature const {                         \
    __VA_ARGS__                                                   \
  }                                                               \
  template <class V>                                              \
    requires std::is_floating_point_v<V>                          \
  FLUXION_HOST_DEVICE signature const {                           \
    __VA_ARGS__                                                   \
  }

/// Defines cell<V>(b, u) from one body: host-only for xsimd batches, host-device for scalars.
#define FLUXION_RECURRENT_CELL(...) FLUXION_RECURRENT_METHOD(void cell(index_t b, index_t u), __VA_ARGS__)

/// The entries of a row times a matrix, a[b, :] m, that a cell needs: `count` columns col, col +
/// stride, ... Either a GEMM computed them before the cell pass (`done`, (batch, n)), or the cell
/// computes them itself from a (batch, k) and m (k, n), summing over k in order, so that a step is
/// one kernel instead of a GEMM and a cell pass (recurrent_cells<Device>::products_inside). All
/// null: the product is zero (the state at the first step) and the cell skips it.
template <class T>
struct row_product {
  const T* done = nullptr;
  const T* a = nullptr;
  const T* m = nullptr;
  index_t k = 0, n = 0;

  FLUXION_HOST_DEVICE bool any() const { return done != nullptr || m != nullptr; }

  FLUXION_RECURRENT_METHOD(void columns(index_t b, index_t col, index_t stride, int count, V* out),
      if (done) {
        for (int g = 0; g < count; ++g) out[g] = cell_load<V>(done + b * n + col + g * stride);
        return;
      }
      for (int g = 0; g < count; ++g) out[g] = V(T(0));
      const T* row = a + b * k;
      const T* mj = m + col;
      for (index_t j = 0; j < k; ++j, mj += n) {
        const V x(row[j]);
        for (int g = 0; g < count; ++g) out[g] = out[g] + x * cell_load<V>(mj + g * stride);
      })
};

/// The recurrent products of one row that a persistent sequence kernel computed before the row's
/// cells (recurrent_cells<Device>::run_sequence): the cells of units first .. first + block - 1 read
/// the g-th of their columns at values[g * block + (u - first)]. values null: no product (the state
/// is zero). The cell functors take it in place of a row_product (their P).
template <class T>
struct staged_product {
  const T* values = nullptr;
  index_t first = 0, block = 0;

  FLUXION_HOST_DEVICE bool any() const { return values != nullptr; }
  template <class V>
  FLUXION_HOST_DEVICE void columns(index_t, index_t col, index_t, int count, V* out) const {
    for (int g = 0; g < count; ++g) out[g] = values[g * block + (col - first)];
  }
};

/// What every step of a sequence multiplies, for recurrent_cells<Device>::run_sequence: step t's cell
/// (b, u) reads `count` columns u, u + stride, ... of row b of a_t m, where a_t = a + (t + shift) *
/// a_step is (batch, k) and m is (k, n); step `none` has no product (a zero state). The forward
/// pass reads h_t R (shift 0), the backward pass dz_{t+1} R^T (shift 1, `reverse`: from the last
/// step to the first). m_transposed: m is given as its transpose (n, k), as R is to the backward
/// pass's R^T.
template <class T>
struct sequence_products {
  const T* a = nullptr;
  index_t a_step = 0, shift = 0;
  const T* m = nullptr;
  index_t k = 0, n = 0, stride = 0;
  int count = 1;
  index_t none = -1;
  bool reverse = false, m_transposed = false;

  /// Entry (j, col) of m.
  FLUXION_HOST_DEVICE T m_at(index_t j, index_t col) const { return m_transposed ? m[col * k + j] : m[j * n + col]; }
};

/// Whether a fused sequence on a device runs as one persistent kernel (recurrent_cells<Device>::
/// run_sequence; fx::cuda: a cooperative launch whose blocks each keep their units' columns of R
/// in shared memory and meet at a grid barrier between steps) instead of a kernel or three per
/// step. Process-wide. Off by default until it has been measured on a GPU (docs/benchmarks.md, GPU section);
/// the tests turn it on. Under Thrust's OpenMP system the same blocks run one after another on
/// the host.
inline bool& recurrent_persistent() noexcept {
  static bool on = false;
  return on;
}

/// Whether row b skips step t under Keras's mask: keep (batch, steps) holds 1 where a step runs and
/// 0 where it carries the states over unchanged; nullptr: every step runs.
template <class T>
FLUXION_HOST_DEVICE bool step_skipped(const T* keep, index_t b, index_t steps, index_t t) {
  return keep != nullptr && keep[b * steps + t] == T(0);
}

/// The row_product of a step: none at the first step (`first`: the state is zero), else the GEMM's
/// result `done` (batch, n), or, where the step computes its products inside (`inside`), a (batch,
/// k) times m (k, n).
template <class T>
row_product<T> step_product(bool first, bool inside, const T* done, const T* a, const T* m, index_t k, index_t n) {
  if (first) return {};
  if (inside) return {nullptr, a, m, k, n};
  return {done, nullptr, nullptr, k, n};
}

/// The largest batch * units for which a step on a device computes its recurrent products inside
/// the cell kernel (recurrent_cells<Device>::products_inside), for layers of at most
/// recurrent_product_max_units units. Process-wide. 0 by default: on an H200 (stop 48) the products
/// inside took the CNN+LSTM training step (LSTM 128 over 64 steps) from 3521 to 6874 us at batch 64
/// and from 3876 to 8142 at batch 256, a dot product per cell reading R from L2 being slower than
/// the GEMM and its launches. The tests and benchmarks raise it to run that path.
inline index_t& recurrent_product_limit() noexcept {
  static index_t limit = 0;
  return limit;
}
inline constexpr index_t recurrent_product_max_units = 256;

/// f.cell over every (b, u) of a (batch, units) step, as one kernel on Device: the cpu's below
/// (xsimd vectors along u, rows split over the thread pool); fx::cuda's in backend/cuda/recurrent.hpp.
template <class Device>
struct recurrent_cells;

template <>
struct recurrent_cells<cpu> {
  /// The cpu's GEMM is faster than a dot product per cell: the products stay GEMMs.
  static bool products_inside(index_t, index_t) { return false; }
  /// Nor does it run a sequence as one kernel: its steps cost no launches.
  template <class T, class Steps>
  static bool run_sequence(index_t, index_t, index_t, const sequence_products<T>&, const Steps&) {
    return false;
  }

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
