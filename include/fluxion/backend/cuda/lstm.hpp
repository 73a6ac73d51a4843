// The LSTM's fused cell (nn/lstm_cell.hpp) on fx::cuda: each step's cell is one Thrust kernel.
#pragma once

#include "../../core/device.hpp"
#include "../../nn/lstm_cell.hpp"
#include "window.hpp"

namespace fluxion::detail {

template <>
struct device_loop<cuda> {
  template <class F>
  static void run(index_t n, const F& f) {
    cuda_window::for_each_index(n, f);
  }
};

}  // namespace fluxion::detail
