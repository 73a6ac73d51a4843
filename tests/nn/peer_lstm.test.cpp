// fx::nn::lstm against PyTorch's LSTM (float; weights converted to Keras's layout), returning the
// last state and the whole sequence: outputs and the gradients with respect to the input, kernel,
// recurrent kernel and bias (tests/fixtures/nn/make_fixtures_norm_lstm.py).
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE_TEMPLATE("lstm: forward and backward equal PyTorch's", L, nn::lstm<5, false>, nn::lstm<5, true>) {
  const std::string prefix = L::return_sequences ? "lstm_seq" : "lstm_last";
  L layer;
  layer.build(fx::shape{4, 3});
  layer.kernel().assign(peer::load("lstm_kernel"));
  layer.recurrent_kernel().assign(peer::load("lstm_recurrent_kernel"));
  layer.bias().assign(peer::load("lstm_bias"));
  const fx::tensor<float> x = peer::load("lstm_x");
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<float> y = layer(x);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  const fx::tensor<float> dx = tape.gradient(s, x);
  auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(y, peer::load(prefix + "_y"), "y");
  peer::check_close(dx, peer::load(prefix + "_dx"), "d x");
  peer::check_close(g[0], peer::load(prefix + "_dkernel"), "d kernel");
  peer::check_close(g[1], peer::load(prefix + "_drecurrent_kernel"), "d recurrent kernel");
  peer::check_close(g[2], peer::load(prefix + "_dbias"), "d bias");
}
