// The seed's MNIST_HighLevel (a Keras Model subclass), shared by examples/mnist_cnn_lstm.cpp and
// bench/epoch.bench.cpp so that the benchmark trains exactly the example's model: conv 32 5x5 same,
// pool, conv 64 5x5 same, pool, the (7, 7, 64) map read as 64 steps of 49 values, LSTM 128,
// dense 10. The sublayers are members, listed once in FLUXION_LAYERS.
#pragma once

#include <fluxion/fluxion.hpp>

struct mnist_high_level : fluxion::nn::model<mnist_high_level> {
  fluxion::nn::sequential_t<fluxion::nn::input<28, 28, 1>, fluxion::nn::conv2d<32, 5, fluxion::nn::same>,
                            fluxion::nn::max_pool2d<2, 2, fluxion::nn::same>, fluxion::nn::conv2d<64, 5, fluxion::nn::same>,
                            fluxion::nn::max_pool2d<2, 2, fluxion::nn::same>, fluxion::nn::reshape<49, 64>,
                            fluxion::nn::permute<2, 1>, fluxion::nn::lstm<128>>
      features;
  fluxion::nn::dense<10> classifier;
  FLUXION_LAYERS(features, classifier)

  fluxion::tensor<float> call(const fluxion::tensor<float>& images, bool training = false) {
    return classifier(features(images, training));
  }
};
