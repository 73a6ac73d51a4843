// Shared by the tests of layers with a kernel and a bias (tests/nn/conv1d.test.cpp,
// tests/nn/conv2d.test.cpp, tests/nn/conv2d_transpose.test.cpp): the gradients of the layer's
// output with respect to its input, kernel and bias against finite differences, in double.
#pragma once

#include <doctest/doctest.h>

#include <fluxion/fluxion.hpp>
#include <fluxion/testing/check_gradients.hpp>

namespace kernel_layer_check {

/// Builds `layer` for input of shape `input` ((batch, height, width, channels), or (batch, steps,
/// channels) for conv1d) and checks its gradients (a random bias, not the initial zeros).
template <class Layer>
void check_layer_gradients(Layer& layer, const fluxion::shape& input, unsigned seed) {
  fluxion::random::generator gen{seed};
  layer.build(fluxion::shape(input.begin() + 1, input.end()), gen);
  const fluxion::tensor<double> x = fluxion::random::normal<double>(input, gen);
  const fluxion::tensor<double> k = layer.kernel().peek(), b = fluxion::random::normal<double>(layer.bias().shape(), gen);
  auto r = fluxion::testing::check_gradients(
      [&](const auto& xi, const auto& ki, const auto& bi) {
        layer.kernel().assign(ki);
        layer.bias().assign(bi);
        return layer(xi);
      },
      fluxion::testing::check_options{.reverse = true, .forward = false}, x, k, b);
  CHECK_MESSAGE(r.ok, r.report);
}

}  // namespace kernel_layer_check
