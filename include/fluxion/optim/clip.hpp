// fx::optim::clip_by_global_norm: scales a list of gradients so that their joint L2 norm is at
// most clip_norm, with TensorFlow's semantics (tf.clip_by_global_norm).
//
//   auto grads = tape.gradient(loss, vars);
//   auto [clipped, norm] = fx::optim::clip_by_global_norm(grads, 5.0);
//   opt.apply_gradients(clipped, vars);
//
// global_norm = sqrt(sum over every element of every gradient of x^2), and each gradient becomes
// g * clip_norm / max(global_norm, clip_norm). When global_norm <= clip_norm the values are
// unchanged and the same tensors come back (tensors are immutable, so no copy is needed). None
// gradients (what the tape returns for an unconnected variable, TensorFlow's None) and empty ones
// are passed through and count for nothing. If the norm is inf or NaN, every clipped element is NaN, as in
// TensorFlow. The sum of squares is accumulated in double; the returned norm is a T.
#pragma once

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "../tensor/tensor.hpp"
#include "optimizer.hpp"  // FLUXION_DEVICE_OPTIMIZERS
#include "schedules.hpp"

namespace fluxion::optim {

template <class T, class Device>
std::pair<std::vector<tensor<T, Device>>, T> clip_by_global_norm(const std::vector<tensor<T, Device>>& gradients,
                                                               double clip_norm) {
  static_assert(std::is_same_v<Device, cpu> || FLUXION_DEVICE_OPTIMIZERS,
                "fluxion::optim::clip_by_global_norm: gradients on fluxion::cuda need the device backend; include "
                "<fluxion/cuda.hpp> and compile with nvcc (or with Thrust's OpenMP system).");
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "fluxion::optim::clip_by_global_norm: gradients must be float or double.");
  if (!(clip_norm > 0) || !std::isfinite(clip_norm))
    throw invalid_argument("clip_by_global_norm: clip_norm = " + detail::format_number(clip_norm) +
                           " must be finite and positive");
  double sum = 0;
  for (const auto& g : gradients) {
    if (g.size() == 0) continue;  // tensor::none() (an unconnected variable's) or empty: nothing to add
    if constexpr (std::is_same_v<Device, cpu>) {
      const T* p = g.data();
      for (index_t i = 0, n = g.size(); i < n; ++i) sum += static_cast<double>(p[i]) * static_cast<double>(p[i]);
    } else {  // on the device, in double there: one value read back per tensor
      sum += tensor<double, Device>(reduce_sum(square(cast<double>(g)))).item();
    }
  }
  const double norm = std::sqrt(sum);
  if (std::isfinite(norm) && norm <= clip_norm) return {gradients, static_cast<T>(norm)};
  const T scale = std::isfinite(norm) ? static_cast<T>(clip_norm / norm) : std::numeric_limits<T>::quiet_NaN();
  std::vector<tensor<T, Device>> clipped;
  clipped.reserve(gradients.size());
  for (const auto& g : gradients)  // one fused pass each; none and empty ones as they are
    clipped.push_back(g.size() == 0 ? g : tensor<T, Device>(g * scale));
  return {std::move(clipped), static_cast<T>(norm)};
}

}  // namespace fluxion::optim
