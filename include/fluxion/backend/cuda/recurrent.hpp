// The recurrent layers' fused cells (nn/lstm_cell.hpp, nn/gru_cell.hpp) on fx::cuda: each step's
// cells are one Thrust kernel, a thread per (b, u).
#pragma once

#include "../../core/device.hpp"
#include "../../nn/recurrent_cell.hpp"
#include "window.hpp"

namespace fluxion::nn::detail {

template <class F>
struct recurrent_cell_thread {
  F f;
  index_t units;
  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    const index_t b = k / units;
    f.template cell<typename F::value_type>(b, k - b * units);
  }
};

template <>
struct recurrent_cells<cuda> {
  /// Whether a step computes its recurrent products (h R forward, dz R^T backward) inside the cell
  /// kernel, a dot product of length units (or gates * units) per cell, instead of a cuBLAS GEMM
  /// before it: for small layers, where a step's time is its launches (a GEMM, often a split-K
  /// reduction beside it, and the cell: three), not its arithmetic.
  static bool products_inside(index_t batch, index_t units) {
    return units <= recurrent_product_max_units && batch * units <= recurrent_product_limit();
  }

  template <class F>
  static void run(index_t batch, index_t units, const F& f) {
    fluxion::detail::cuda_window::for_each_index(batch * units, recurrent_cell_thread<F>{f, units});
  }
};

}  // namespace fluxion::nn::detail
