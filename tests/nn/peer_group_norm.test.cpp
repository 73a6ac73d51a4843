// fx::nn::group_norm against PyTorch's GroupNorm (float, epsilon 1e-3): output and gradients
// (tests/fixtures/nn/make_fixtures_group_norm.py).
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
template <int Groups>
void check_against_pytorch(const std::string& prefix) {
  CAPTURE(prefix);
  const fx::tensor<float> x = peer::load(prefix + "_x");
  nn::group_norm<Groups> layer;
  layer.build(fx::shape{x.shape()[x.shape().rank() - 1]});
  layer.gamma().assign(peer::load(prefix + "_gamma"));
  layer.beta().assign(peer::load(prefix + "_beta"));
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<float> y = layer(x);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  const fx::tensor<float> dx = tape.gradient(s, x);
  auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(y, peer::load(prefix + "_y"), "y");
  peer::check_close(dx, peer::load(prefix + "_dx"), "d x");
  peer::check_close(g[0], peer::load(prefix + "_dgamma"), "d gamma");
  peer::check_close(g[1], peer::load(prefix + "_dbeta"), "d beta");
}
}  // namespace

TEST_CASE("group_norm: forward and backward equal PyTorch's GroupNorm") {
  check_against_pytorch<4>("gn");        // (2, 3, 5, 8), 4 groups of 2 channels
  check_against_pytorch<2>("gn_seq");    // (3, 7, 6), a sequence batch
  check_against_pytorch<-1>("gn_inst");  // instance normalization, one group per channel
}
