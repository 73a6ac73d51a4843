// The SimpleRNN's fused cell on the cpu (nn/simple_rnn.hpp decides when it runs). A sequence that
// one tape records (one-shot or persistent) is one tape entry over the fused cell; nested tapes give
// the reference: the same steps as statements, which tests/nn/simple_rnn.test.cpp checks against a
// hand-written SimpleRNN and tests/nn/peer_recurrent.test.cpp against PyTorch. Second derivatives
// through a SimpleRNN, and through a masked one (the last two test cases).
#define FLUXION_MAX_DERIVATIVE_ORDER 2

#include "recurrent_check.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace simple_rnn_cell_test {

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;

/// Two SimpleRNNs (the first returns its sequence) and a dense layer, with Units chosen so that the
/// cells' vector loop has a scalar tail (3, 17, 33: not multiples of 4, 8 or 16 lanes).
template <class T, fx::index_t Steps, fx::index_t Units1, fx::index_t Units2>
void check_fused(fx::index_t batch, double rtol) {
  CAPTURE(batch);
  CAPTURE(Units1);
  fx::random::generator gen{71};
  auto model = nn::sequential(gen, nn::typed_input<T, Steps, 3>{}, nn::simple_rnn<Units1, true>{},
                              nn::simple_rnn<Units2>{}, nn::dense<2>{});
  const fx::tensor<T> x = fx::random::normal<T>({batch, Steps, 3}, gen);
  recurrent_check::check_fused_model<T>(model, x, 8, Steps, 2, rtol);  // p, then tanh(p + h R): two statements a step
}

}  // namespace

TEST_CASE("simple_rnn cell: the fused sequence gives the statements' output and gradients, double") {
  check_fused<double, 5, 3, 4>(2, 1e-12);
  check_fused<double, 4, 17, 9>(300, 1e-12);  // 4096 / 17 = 240 rows a task: the thread pool's path
}

TEST_CASE("simple_rnn cell: the fused sequence gives the statements' output and gradients, float") {
  check_fused<float, 5, 33, 7>(3, 2e-5);
  check_fused<float, 3, 16, 16>(260, 2e-5);  // whole vectors only, and 256 rows a task
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
