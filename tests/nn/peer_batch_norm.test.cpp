// fx::nn::batch_norm against PyTorch's BatchNorm1d and BatchNorm2d (float, NHWC), in training
// (output, gradients, moving statistics after the step, Keras's rule) and inference
// (tests/fixtures/nn/make_fixtures_norm_lstm.py).
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// One mode of the layer: y, and the gradients of sum(y * w) with respect to x, gamma and beta.
void check_mode(nn::batch_norm<>& layer, const fx::tensor<float>& x, const std::string& prefix, bool training) {
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<float> y = layer(x, training);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  const fx::tensor<float> dx = tape.gradient(s, x);
  auto g = tape.gradient(s, std::vector<const fx::variable<float>*>{&layer.gamma(), &layer.beta()});
  peer::check_close(y, peer::load(prefix + "_y"), prefix + ": y");
  peer::check_close(dx, peer::load(prefix + "_dx"), prefix + ": d x");
  peer::check_close(g[0], peer::load(prefix + "_dgamma"), prefix + ": d gamma");
  peer::check_close(g[1], peer::load(prefix + "_dbeta"), prefix + ": d beta");
}

}  // namespace

TEST_CASE("batch_norm: training and inference equal PyTorch's, after dense and conv2d layers") {
  for (const std::string prefix : {"bn_dense", "bn_conv"}) {
    CAPTURE(prefix);
    nn::batch_norm<> layer{0.9};
    const fx::tensor<float> x = peer::load(prefix + "_x");
    layer.build(fx::shape(std::vector<fx::index_t>(x.shape().begin() + 1, x.shape().end())));
    layer.gamma().assign(peer::load(prefix + "_gamma"));
    layer.beta().assign(peer::load(prefix + "_beta"));
    layer.moving_mean().assign(peer::load(prefix + "_moving_mean"));
    layer.moving_variance().assign(peer::load(prefix + "_moving_variance"));
    check_mode(layer, x, prefix + "_train", true);
    peer::check_close(layer.moving_mean().peek(), peer::load(prefix + "_moving_mean_after"), "moving mean");
    peer::check_close(layer.moving_variance().peek(), peer::load(prefix + "_moving_variance_after"),
                      "moving variance");
    check_mode(layer, x, prefix + "_infer", false);
  }
}
