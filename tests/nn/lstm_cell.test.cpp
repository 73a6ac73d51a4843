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

/// Two LSTMs (the first returns its sequence) and a dense layer, with Units chosen so that the
/// cells' vector loop has a scalar tail (3, 17, 33: not multiples of 4, 8 or 16 lanes).
template <class T, fx::index_t Steps, fx::index_t Units1, fx::index_t Units2>
void check_fused(fx::index_t batch, double rtol) {
  CAPTURE(batch);
  CAPTURE(Units1);
  fx::random::generator gen{41};
  auto model = nn::sequential(gen, nn::typed_input<T, Steps, 3>{}, nn::lstm<Units1, true>{}, nn::lstm<Units2>{},
                              nn::dense<2>{});
  const fx::tensor<T> x = fx::random::normal<T>({batch, Steps, 3}, gen);
  recurrent_check::check_fused_model<T>(model, x, 8, Steps, 3, rtol);  // z, c and h: three statements a step
}

}  // namespace

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, double") {
  check_fused<double, 5, 3, 4>(2, 1e-12);
  check_fused<double, 4, 17, 9>(300, 1e-12);  // 4096 / 17 = 240 rows a task: the thread pool's path
}

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, float") {
  check_fused<float, 5, 33, 7>(3, 2e-5);
  check_fused<float, 3, 16, 16>(260, 2e-5);  // whole vectors only, and 256 rows a task
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
