#include "gradient_checks.hpp"

// fx::linalg's band_part, diag_part, trace, diag, set_diag and l2_normalize against finite
// differences in reverse and forward mode, over a batch of wide and of tall matrices, and of
// expressions.

using test::check_op;
using test::random_tensor;

namespace {
const auto wide = random_tensor<double>({2, 3, 4}, 41, -1.5, 1.5);
const auto tall = random_tensor<double>({4, 3}, 42, -1.5, 1.5);
}  // namespace

TEST_CASE("rules: band_part, diag_part and trace") {
  check_op("band_part lower", [](const auto& x) { return fx::linalg::band_part(x, -1, 0); }, wide);
  check_op("band_part of an expression, a band", [](const auto& x) { return fx::linalg::band_part(fx::sin(x) * x, 1, 2); },
           tall);
  check_op("diag_part, wide", [](const auto& x) { return fx::linalg::diag_part(x); }, wide);
  check_op("diag_part of an expression, tall", [](const auto& x) { return fx::linalg::diag_part(x * x); }, tall);
  check_op("trace", [](const auto& x) { return fx::linalg::trace(fx::exp(x)); }, wide);
}

TEST_CASE("rules: diag and set_diag, in the matrices and in the diagonal") {
  check_op("diag", [](const auto& v) { return fx::linalg::diag(v * v); }, random_tensor<double>({2, 3}, 43));
  check_op("set_diag, wide", [](const auto& x, const auto& d) { return fx::linalg::set_diag(x, d); }, wide,
           random_tensor<double>({2, 3}, 44));
  check_op("set_diag, tall, of expressions",
           [](const auto& x, const auto& d) { return fx::linalg::set_diag(x * 2.0, fx::tanh(d)); }, tall,
           random_tensor<double>({3}, 45));
}

TEST_CASE("rules: l2_normalize along the last axis and along the first") {
  check_op("l2_normalize", [](const auto& x) { return fx::linalg::l2_normalize(x); }, wide);
  check_op("l2_normalize along axis 0, of an expression", [](const auto& x) { return fx::linalg::l2_normalize(x * x + 0.5, 0); },
           tall);
}

TEST_CASE("rules: l2_normalize's gradient at a zero vector is the incoming one over sqrt(epsilon), finite") {
  const fx::tensor<double> zero = {{0.0, 0.0, 0.0}}, w = {{1.0, -2.0, 0.5}};
  fx::gradient_tape tape;
  tape.watch(zero);
  const fx::tensor<double> y = fx::reduce_sum(fx::linalg::l2_normalize(zero) * w);
  CHECK(tape.gradient(y, zero).to_vector() == std::vector<double>{1e6, -2e6, 0.5e6});
}
