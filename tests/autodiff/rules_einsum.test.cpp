#include "gradient_checks.hpp"

// einsum against finite differences in reverse and forward mode: one and two operands, batches,
// broadcasting ellipses, labels summed alone, outer products and transposed outputs.

using test::check_op;
using test::random_tensor;

TEST_CASE("rules: einsum with two operands") {
  const auto a = random_tensor<double>({2, 3, 4}, 31), b = random_tensor<double>({2, 4, 5}, 32);
  check_op("batched matmul", [](const auto& x, const auto& y) { return fx::einsum("bij,bjk->bik", x, y); }, a, b);
  check_op("summed alone, transposed output", [](const auto& x, const auto& y) { return fx::einsum("bij,bjk->kb", x, y); }, a, b);
  check_op("outer product", [](const auto& x, const auto& y) { return fx::einsum("i,j->ji", x, y); },
           random_tensor<double>({3}, 33), random_tensor<double>({4}, 34));
  check_op("broadcast ellipsis", [](const auto& x, const auto& y) { return fx::einsum("...ij,...jk->...ik", x, y); },
           random_tensor<double>({3, 1, 2, 4}, 35), random_tensor<double>({2, 4, 3}, 36));
  check_op("the same operand twice", [](const auto& x) { return fx::einsum("ij,ij->i", x, x * 2.0); },
           random_tensor<double>({3, 4}, 37));
}

TEST_CASE("rules: einsum with one operand") {
  const auto a = random_tensor<double>({2, 3, 4}, 38);
  check_op("transpose", [](const auto& x) { return fx::einsum("ijk->kij", x); }, a);
  check_op("sum and transpose", [](const auto& x) { return fx::einsum("ijk->ki", x); }, a);
  check_op("implicit", [](const auto& x) { return fx::einsum("kji", x * x); }, a);
}
