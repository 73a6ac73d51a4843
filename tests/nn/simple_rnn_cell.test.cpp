// The SimpleRNN's fused cell on the cpu (nn/simple_rnn.hpp decides when it runs). A sequence that
// one tape records (one-shot or persistent) is one tape entry over the fused cell; nested tapes give
// the reference: the same steps as statements, which tests/nn/simple_rnn.test.cpp checks against a
// hand-written SimpleRNN and tests/nn/peer_recurrent.test.cpp against PyTorch. Second derivatives
// through a SimpleRNN, and through a masked one (the last two test cases). The same fused checks
// with Keras's activation="relu".
#define FLUXION_MAX_DERIVATIVE_ORDER 2

#include "recurrent_check.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace simple_rnn_cell_test {

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;

}  // namespace

TEST_CASE("simple_rnn cell: the fused sequence gives the statements' output and gradients, double") {
  recurrent_check::check_fused_cases<nn::simple_rnn, double>(2);  // p, then tanh(p + h R): two statements a step
}

TEST_CASE("simple_rnn cell: the fused sequence gives the statements' output and gradients, float") {
  recurrent_check::check_fused_cases<nn::simple_rnn, float>(2);
}

TEST_CASE("simple_rnn cell: with activation relu, the fused sequence gives the statements' output and gradients") {
  const nn::recurrent_options relu{.activation = nn::rnn_activation::relu};
  recurrent_check::check_fused_cases<nn::simple_rnn, double>(2, relu);  // p, then relu(p + h R)
  recurrent_check::check_fused_cases<nn::simple_rnn, float>(2, relu);
}

TEST_CASE("simple_rnn cell: second derivatives through a SimpleRNN take the statements") {
  fx::random::generator gen{73};
  auto model = nn::sequential(gen, nn::typed_input<double, 3, 2>{}, nn::simple_rnn<4>{}, nn::dense<1>{});
  recurrent_check::check_second_derivative(model, fx::shape{2, 3, 2}, gen);
}

TEST_CASE("simple_rnn cell: second derivatives through a masked SimpleRNN (Keras's mask) take the statements") {
  recurrent_check::check_masked_second_derivative<nn::simple_rnn>(74);
}

}  // namespace simple_rnn_cell_test
