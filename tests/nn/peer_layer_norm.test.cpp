// fx::nn::layer_norm against PyTorch's LayerNorm (float, epsilon 1e-3): output and gradients
// (tests/fixtures/nn/make_fixtures_norm_lstm.py).
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE("layer_norm: forward and backward equal PyTorch's") {
  nn::layer_norm<> layer;
  layer.build(fx::shape{3, 5});
  layer.gamma().assign(peer::load("ln_gamma"));
  layer.beta().assign(peer::load("ln_beta"));
  const fx::tensor<float> x = peer::load("ln_x");
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<float> y = layer(x);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load("ln_w"));
  const fx::tensor<float> dx = tape.gradient(s, x);
  auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(y, peer::load("ln_y"), "y");
  peer::check_close(dx, peer::load("ln_dx"), "d x");
  peer::check_close(g[0], peer::load("ln_dgamma"), "d gamma");
  peer::check_close(g[1], peer::load("ln_dbeta"), "d beta");
}
