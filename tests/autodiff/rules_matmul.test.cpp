#include "gradient_checks.hpp"

// matmul against finite differences in reverse and forward mode: each combination of transposes,
// batched with broadcast batch dimensions, and fused with elementwise ops on either side.

using test::check_op;
using test::random_tensor;

TEST_CASE("rules: matmul, each combination of transposes") {
  check_op("a b", [](const auto& a, const auto& b) { return fx::matmul(a, b); }, random_tensor<double>({3, 4}, 1),
           random_tensor<double>({4, 2}, 2));
  check_op("a^T b", [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_a); },
           random_tensor<double>({4, 3}, 3), random_tensor<double>({4, 2}, 4));
  check_op("a b^T", [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_b); },
           random_tensor<double>({3, 4}, 5), random_tensor<double>({2, 4}, 6));
  check_op("a^T b^T", [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_ab); },
           random_tensor<double>({4, 3}, 7), random_tensor<double>({2, 4}, 8));
}

TEST_CASE("rules: batched matmul with broadcast batch dimensions") {
  auto mm = [](const auto& a, const auto& b) { return fx::matmul(a, b); };
  check_op("batch x matrix", mm, random_tensor<double>({2, 3, 4}, 9), random_tensor<double>({4, 5}, 10));
  check_op("matrix x batch", mm, random_tensor<double>({3, 4}, 11), random_tensor<double>({2, 4, 5}, 12));
  check_op("broadcast batches", mm, random_tensor<double>({2, 1, 3, 4}, 13), random_tensor<double>({3, 4, 2}, 14));
  check_op("batched a^T b^T", [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_ab); },
           random_tensor<double>({1, 4, 3}, 15), random_tensor<double>({2, 5, 4}, 16));
}

TEST_CASE("rules: matmul inside fused statements") {
  check_op("tanh(x w) + b",
           [](const auto& x, const auto& w, const auto& b) { return fx::tanh(fx::matmul(x, w) + b); },
           random_tensor<double>({5, 3}, 17), random_tensor<double>({3, 2}, 18), random_tensor<double>({2}, 19));
  check_op("matmul of expressions", [](const auto& a, const auto& b) { return fx::matmul(fx::sin(a), b * b); },
           random_tensor<double>({2, 3}, 20), random_tensor<double>({3, 3}, 21));
}
