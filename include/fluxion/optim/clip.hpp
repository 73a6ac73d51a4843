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

namespace detail {
/// f of each element of a cpu tensor, by a plain loop: a fused statement would be compiled into
/// every program that constructs an optimizer, for a path few take (about 1 CPU s more a program).
template <class T, class F>
tensor<T, cpu> map_elements(const tensor<T, cpu>& g, F f) {
  tensor<T, cpu> out(g.shape());
  const T* src = g.data();
  T* dst = out.mutable_data();
  for (index_t i = 0, n = g.size(); i < n; ++i) dst[i] = f(src[i]);
  return out;
}

/// The sum of the squares of every element of `gradients`, in double, as a 0-d tensor on their
/// device: one reduction each, added there, nothing read back.
template <class T, class Device>
tensor<double, Device> device_sum_of_squares(const std::vector<tensor<T, Device>>& gradients) {
  tensor<double, Device> sum = zeros<double, Device>(shape{});
  for (const auto& g : gradients)
    if (g.size() != 0) sum = tensor<double, Device>(sum + reduce_sum(square(cast<double>(g))));
  return sum;
}

/// clip_by_global_norm's gradients without its norm, for the optimizers' clipnorm and
/// global_clipnorm. On the cpu the same call; on a device the scale clip_norm / max(norm,
/// clip_norm) (NaN for a NaN or infinite norm) is a 0-d device tensor that each gradient is
/// multiplied by, so nothing is read back and the host does not wait for the device.
template <class T, class Device>
std::vector<tensor<T, Device>> clip_by_joint_norm(const std::vector<tensor<T, Device>>& gradients, double clip_norm) {
  if constexpr (std::is_same_v<Device, cpu>) {
    return clip_by_global_norm(gradients, clip_norm).first;
  } else {
    const tensor<double, Device> norm(sqrt(device_sum_of_squares(gradients)));
    const tensor<T, Device> scale(cast<T>(where(is_finite(norm), clip_norm / maximum(norm, clip_norm),
                                                std::numeric_limits<double>::quiet_NaN())));
    std::vector<tensor<T, Device>> clipped;
    clipped.reserve(gradients.size());
    for (const auto& g : gradients) clipped.push_back(g.size() == 0 ? g : tensor<T, Device>(g * scale));
    return clipped;
  }
}
}  // namespace detail

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
  if constexpr (std::is_same_v<Device, cpu>) {
    for (const auto& g : gradients) {
      const T* p = g.data();  // none (an unconnected variable's) and empty tensors add nothing
      for (index_t i = 0, n = g.size(); i < n; ++i) sum += static_cast<double>(p[i]) * static_cast<double>(p[i]);
    }
  } else {  // summed on the device, in double, and read back once
    sum = detail::device_sum_of_squares(gradients).item();
  }
  const double norm = std::sqrt(sum);
  if (std::isfinite(norm) && norm <= clip_norm) return {gradients, static_cast<T>(norm)};
  const T scale = std::isfinite(norm) ? static_cast<T>(clip_norm / norm) : std::numeric_limits<T>::quiet_NaN();
  std::vector<tensor<T, Device>> clipped;
  clipped.reserve(gradients.size());
  for (const auto& g : gradients) {  // one pass each; none and empty ones as they are
    if (g.size() == 0) clipped.push_back(g);
    else if constexpr (std::is_same_v<Device, cpu>) clipped.push_back(detail::map_elements(g, [scale](T x) { return x * scale; }));
    else clipped.push_back(tensor<T, Device>(g * scale));
  }
  return {std::move(clipped), static_cast<T>(norm)};
}

}  // namespace fluxion::optim
