// The LSTM's fused cell on the cpu (nn/lstm_cell.hpp; nn/lstm.hpp decides when it runs). A sequence
// that one tape records (one-shot or persistent) is one tape entry over the fused cell; nested tapes
// give the reference: the same steps as statements, which
// tests/nn/lstm.test.cpp checks against a hand-written LSTM and tests/nn/peer_recurrent.test.cpp against
// PyTorch. (tests/nn/lstm.test.cpp's finite-difference check records with a one-shot tape, so it
// checks the fused cell's gradients; peer_recurrent.test.cpp checks both paths against PyTorch.)
// Second derivatives through an LSTM, and through a masked one (the last two test cases).
#define FLUXION_MAX_DERIVATIVE_ORDER 2

#include "recurrent_check.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace lstm_cell_test {

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;

}  // namespace

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, double") {
  recurrent_check::check_fused_cases<nn::lstm, double>(3);  // z, c and h: three statements a step
}

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, float") {
  recurrent_check::check_fused_cases<nn::lstm, float>(3);
}

TEST_CASE("lstm cell: with activation relu, the fused sequence gives the statements' output and gradients") {
  const nn::recurrent_options relu{.activation = nn::rnn_activation::relu};
  recurrent_check::check_fused_cases<nn::lstm, double>(3, relu);
  recurrent_check::check_fused_cases<nn::lstm, float>(3, relu);
}

TEST_CASE("lstm cell: second derivatives through an LSTM take the statements") {
  fx::random::generator gen{43};
  auto model = nn::sequential(gen, nn::typed_input<double, 3, 2>{}, nn::lstm<4>{}, nn::dense<1>{});
  recurrent_check::check_second_derivative(model, fx::shape{2, 3, 2}, gen);
}

TEST_CASE("lstm cell: second derivatives through a masked LSTM (Keras's mask) take the statements") {
  recurrent_check::check_masked_second_derivative<nn::lstm>(44);
}

}  // namespace lstm_cell_test
