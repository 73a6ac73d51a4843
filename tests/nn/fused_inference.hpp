// A layer's inference path (no tape alive: bias and relu applied by the GEMM or convolution
// kernel as it stores its output) against its recorded statement (a tape alive: the statement
// that the tape differentiates), bitwise unless told otherwise, with and without a relu after it.
#pragma once

#include <cstring>

#include <doctest/doctest.h>
#include <fluxion/fluxion.hpp>

namespace fused_inference {

/// `scale_tolerance` 0: bitwise. Otherwise the largest difference over the largest |value|, for
/// inference paths that run another algorithm (a 5x5 Winograd below its batch threshold).
template <class Layer, class T>
void check_matches_taped(Layer& layer, const fluxion::tensor<T>& x, double scale_tolerance = 0) {
  namespace nn = fluxion::nn;
  for (bool relu : {false, true}) {
    INFO("relu after the layer: " << relu << ", input " << fluxion::to_string(x.shape()));
    auto run = [&] { return relu ? fluxion::tensor<T>(layer(x, false, nn::relu{})) : fluxion::tensor<T>(layer(x)); };
    const fluxion::tensor<T> fused = run();
    fluxion::tensor<T> taped;
    {
      fluxion::gradient_tape tape;
      taped = run();
    }
    REQUIRE(fused.shape() == taped.shape());
    if (scale_tolerance == 0) {
      CHECK(std::memcmp(fused.data(), taped.data(), static_cast<std::size_t>(fused.size()) * sizeof(T)) == 0);
    } else {
      const double scale = fluxion::tensor<T>(fluxion::reduce_max(fluxion::abs(taped))).item();
      CHECK(fluxion::tensor<T>(fluxion::reduce_max(fluxion::abs(fused - taped))).item() <= scale_tolerance * scale);
      CHECK(std::memcmp(fused.data(), taped.data(), static_cast<std::size_t>(fused.size()) * sizeof(T)) != 0);
    }
    if (relu) CHECK(fluxion::all(fused >= T(0)));
  }
}

}  // namespace fused_inference
