// The GRU's fused cell on the cpu (nn/gru_cell.hpp; nn/gru.hpp decides when it runs). A sequence
// that one tape records (one-shot or persistent) is one tape entry over the fused cell; nested tapes
// give the reference: the same steps as statements, which
// tests/nn/gru.test.cpp checks against a hand-written GRU and tests/nn/peer_recurrent.test.cpp against
// PyTorch. (tests/nn/gru.test.cpp's finite-difference check records with a one-shot tape, so it
// checks the fused cell's gradients; peer_recurrent.test.cpp checks both paths against PyTorch.)
// Second derivatives through a GRU, and through a masked one (the last two test cases).
#define FLUXION_MAX_DERIVATIVE_ORDER 2

#include "recurrent_check.hpp"

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;

}  // namespace

TEST_CASE("gru cell: the fused sequence gives the statements' output and gradients, double") {
  recurrent_check::check_fused_cases<nn::gru, double>(4);  // p, h R + b, z and r, h: four statements a step
}

TEST_CASE("gru cell: the fused sequence gives the statements' output and gradients, float") {
  recurrent_check::check_fused_cases<nn::gru, float>(4);
}

TEST_CASE("gru cell: with activation relu, the fused sequence gives the statements' output and gradients") {
  const nn::recurrent_options relu{.activation = nn::rnn_activation::relu};
  recurrent_check::check_fused_cases<nn::gru, double>(4, relu);
  recurrent_check::check_fused_cases<nn::gru, float>(4, relu);
}

TEST_CASE("gru cell: second derivatives through a GRU take the statements") {
  fx::random::generator gen{43};
  auto model = nn::sequential(gen, nn::typed_input<double, 3, 2>{}, nn::gru<4>{}, nn::dense<1>{});
  recurrent_check::check_second_derivative(model, fx::shape{2, 3, 2}, gen);
}

TEST_CASE("gru cell: second derivatives through a masked GRU (Keras's mask) take the statements") {
  recurrent_check::check_masked_second_derivative<nn::gru>(44);
}
