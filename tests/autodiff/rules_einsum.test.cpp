#include "gradient_checks.hpp"

// einsum against finite differences in reverse and forward mode: one, two and more operands, batches,
// broadcasting ellipses, labels summed alone, outer products, transposed outputs, diagonals and traces.

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

TEST_CASE("rules: einsum with three and more operands") {
  const auto x = random_tensor<double>({3}, 40), m = random_tensor<double>({3, 4}, 41), y = random_tensor<double>({4}, 42);
  check_op("bilinear form", [](const auto& p, const auto& q, const auto& r) { return fx::einsum("i,ij,j->", p, q, r); }, x, m,
           y);
  check_op("batched chain, transposed output",
           [](const auto& p, const auto& q, const auto& r) { return fx::einsum("bij,bjk,bkl->lib", p, q, r); },
           random_tensor<double>({2, 3, 2}, 43), random_tensor<double>({2, 2, 4}, 44), random_tensor<double>({2, 4, 3}, 45));
  check_op("four operands, one twice", [](const auto& p, const auto& q) { return fx::einsum("ij,jk,kl,lm->im", p, q, q * 0.5, q); },
           random_tensor<double>({2, 3}, 46), random_tensor<double>({3, 3}, 47));
  check_op("broadcast ellipses", [](const auto& p, const auto& q, const auto& r) { return fx::einsum("...i,...ij,...j", p, q, r); },
           random_tensor<double>({2, 1, 3}, 48), random_tensor<double>({3, 4}, 49), random_tensor<double>({1, 2, 4}, 50));
}

TEST_CASE("rules: einsum's diagonals and traces, and broadcast axes summed") {
  const auto a = random_tensor<double>({3, 3}, 51), batch = random_tensor<double>({2, 3, 3}, 52);
  check_op("diagonal", [](const auto& p) { return fx::einsum("ii->i", p); }, a);
  check_op("trace", [](const auto& p) { return fx::einsum("ii", p * p); }, a);
  check_op("batched traces", [](const auto& p) { return fx::einsum("bii->b", p); }, batch);
  check_op("a diagonal apart, three times", [](const auto& p) { return fx::einsum("iii->i", p); },
           random_tensor<double>({3, 3, 3}, 53));
  check_op("a diagonal in one operand of two", [](const auto& p, const auto& q) { return fx::einsum("ij,jj->ji", p, q); },
           random_tensor<double>({2, 3}, 54), a);
  check_op("broadcast ellipsis summed", [](const auto& p, const auto& q) { return fx::einsum("...ij,...jk->ik", p, q); },
           random_tensor<double>({3, 1, 2, 4}, 55), random_tensor<double>({2, 4, 3}, 56));
}
