#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "gradient_checks.hpp"

// Second derivatives of matmul and shape ops: Hessian-vector products, reverse over reverse and
// forward over reverse, against central differences of the tape's gradients. Split from
// rules_second_order to keep each file's compile time short.

using test::check_second;
using test::random_tensor;

TEST_CASE("second order: matmul") {
  check_second("matmul", [](const auto& a, const auto& b) { return fx::matmul(a, b); }, random_tensor<double>({3, 4}, 4),
               random_tensor<double>({4, 2}, 5));
  check_second("matmul of a product", [](const auto& a, const auto& b) { return fx::matmul(a * a, b, fx::transpose_b); },
               random_tensor<double>({2, 3}, 6), random_tensor<double>({4, 3}, 7));
}

TEST_CASE("second order: shape ops") {
  const auto x = random_tensor<double>({2, 3}, 8);
  check_second("transpose", [](const auto& v) { return fx::square(fx::transpose(v)) * fx::exp(fx::transpose(v)); }, x);
  check_second("transpose broadcast", [](const auto& a, const auto& b) { return fx::transpose(a) * b * b; }, x,
               random_tensor<double>({2, 3, 1}, 9));
  check_second("strided_slice", [](const auto& v) { return fx::sin(fx::strided_slice(v, {1, fx::end}, {fx::end, 0}, {-1, -2})); }, x);
}

// linalg::diag_part is a view since stop 82: of a tensor a strided slice of the flattened matrices,
// of an expression a remap whose one axis steps by N + 1. The statements of either gradient (the
// gradient on a diagonal of zeros) differentiated again, wide and tall.
TEST_CASE("second order: linalg::diag_part and trace") {
  check_second("diag_part of a tensor, tall", [](const auto& x) {
    const auto d = fx::linalg::diag_part(x);
    return d * d * d;
  }, random_tensor<double>({4, 3}, 40, -1.5, 1.5));
  check_second("diag_part of an expression, wide", [](const auto& x) { return fx::linalg::diag_part(x * x * x); },
               random_tensor<double>({2, 3, 4}, 41, -1.5, 1.5));
  check_second("trace of an expression, tall", [](const auto& x) { return fx::linalg::trace(fx::sin(x) * x); },
               random_tensor<double>({4, 3}, 42, -1.5, 1.5));
}

TEST_CASE("second order: gradients summed down to a broadcast operand's shape") {
  // reduce_to's two paths at order 2: a kernel boundary's gradient (a batched matmul whose weights
  // are broadcast over the batch) is computed into a tensor and then summed; an elementwise one (a
  // scale and a shift broadcast over rows) is summed in one fused reduction. The second derivative
  // must pass through both.
  check_second("batched matmul, broadcast weights", [](const auto& a, const auto& b) { return fx::matmul(a, b); },
               random_tensor<double>({2, 3, 4}, 10), random_tensor<double>({4, 2}, 11));
  check_second("broadcast batches, a^T b^T", [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_ab); },
               random_tensor<double>({1, 4, 3}, 12), random_tensor<double>({2, 2, 4}, 13));
  check_second("scale and shift",
               [](const auto& x, const auto& g, const auto& b) { return fx::tanh(x * g + b) * x; },
               random_tensor<double>({4, 3}, 14), random_tensor<double>({3}, 15), random_tensor<double>({1, 3}, 16));
}
