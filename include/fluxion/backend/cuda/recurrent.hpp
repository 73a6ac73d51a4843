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
  template <class F>
  static void run(index_t batch, index_t units, const F& f) {
    fluxion::detail::cuda_window::for_each_index(batch * units, recurrent_cell_thread<F>{f, units});
  }
};

}  // namespace fluxion::nn::detail
