// fx::nn::embedding against PyTorch's Embedding (float, int32 indices, one index repeated): the
// lookup and the gradient with respect to the table (tests/fixtures/nn/make_fixtures_norm_lstm.py).
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

#include <cstdint>

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE("embedding: lookup and gradient equal PyTorch's") {
  nn::embedding<10, 4> layer;
  layer.build();
  layer.embeddings().assign(peer::load("emb_embeddings"));
  const auto ids = fx::io::load_npy<std::int32_t>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/nn/emb_ids.npy");
  fx::gradient_tape tape;
  fx::tensor<float> y = layer(ids);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load("emb_w"));
  const fx::tensor<float> g = tape.gradient(s, layer.embeddings());
  peer::check_close(y, peer::load("emb_y"), "y");
  peer::check_close(g, peer::load("emb_dembeddings"), "d embeddings");
}
