// TensorFlow's output size and padding for a sliding window along one spatial axis, shared by the
// convolution and pooling kernels.
//
//   auto g = tf_window("conv2d", /*in=*/28, /*window=*/5, /*stride=*/1, /*dilation=*/1, padding_mode::same);
//   // g.out == 28, g.pad_before == 2 (TF puts the odd extra padding after, at the bottom/right)
#pragma once

#include <algorithm>
#include <string>

#include "../../../core/config.hpp"
#include "../../../core/error.hpp"

namespace fluxion::detail::kernels {

enum class padding_mode { valid, same };

struct window_extent {
  index_t out;         // number of window positions
  index_t pad_before;  // zero rows (or columns) before the input
};

inline window_extent tf_window(const char* op, index_t in, index_t window, index_t stride, index_t dilation,
                               padding_mode padding) {
  auto s = [](index_t v) { return std::to_string(v); };
  if (in < 0) throw invalid_argument(std::string(op) + ": input size = " + s(in) + " is negative");
  if (window < 1) throw invalid_argument(std::string(op) + ": window size = " + s(window) + " must be at least 1");
  if (stride < 1) throw invalid_argument(std::string(op) + ": stride = " + s(stride) + " must be at least 1");
  if (dilation < 1) throw invalid_argument(std::string(op) + ": dilation = " + s(dilation) + " must be at least 1");
  const index_t effective = (window - 1) * dilation + 1;
  if (padding == padding_mode::valid) return {in >= effective ? (in - effective) / stride + 1 : 0, 0};
  const index_t out = (in + stride - 1) / stride;
  const index_t total = std::max<index_t>((out - 1) * stride + effective - in, 0);
  return {out, total / 2};
}

}  // namespace fluxion::detail::kernels
