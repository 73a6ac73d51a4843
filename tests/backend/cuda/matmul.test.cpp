// fx::matmul on fx::cuda gives the cpu's results: transposes, broadcast batch dimensions, integer
// types, and fused operands and consumers.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;
using fluxion_test::with_values;

}  // namespace

TEST_CASE("cuda matmul: a 2 x 2 product computed by hand") {
  auto a = with_values<float>({2, 2}, {1, 2, 3, 4});
  auto b = with_values<float>({2, 2}, {5, 6, 7, 8});
  auto r = same_on_both_devices([](const auto& a, const auto& b) { return fx::matmul(a, b); }, a, b);
  CHECK(r.to_vector() == std::vector<float>{19, 22, 43, 50});
  auto t = same_on_both_devices([](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_ab); }, a, b);
  CHECK(t.to_vector() == std::vector<float>{23, 31, 34, 46});
}

TEST_CASE_TEMPLATE("cuda matmul: every transpose combination", T, float, double, std::int32_t) {
  // Values in [-2, 2): float sums of 33 products are exact to a few ulps of their magnitude.
  auto a = filled<T>({17, 33}, 1), at = filled<T>({33, 17}, 2);
  auto b = filled<T>({33, 9}, 3), bt = filled<T>({9, 33}, 4);
  const double rtol = std::is_same_v<T, float> ? 1e-5 : (std::is_same_v<T, double> ? 1e-12 : 0.0);
  same_on_both_devices(rtol, [](const auto& a, const auto& b) { return fx::matmul(a, b); }, a, b);
  same_on_both_devices(rtol, [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_a); }, at, b);
  same_on_both_devices(rtol, [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_b); }, a, bt);
  same_on_both_devices(rtol, [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_ab); }, at, bt);
}

TEST_CASE("cuda matmul: batch dimensions broadcast") {
  auto a = filled<float>({3, 1, 4, 5}, 1), b = filled<float>({2, 5, 6}, 2);
  auto r = same_on_both_devices(1e-5, [](const auto& a, const auto& b) { return fx::matmul(a, b); }, a, b);
  CHECK(r.shape() == fx::shape{3, 2, 4, 6});
  same_on_both_devices(1e-5, [](const auto& a, const auto& b) { return fx::matmul(b, a, fx::transpose_ab); },
                       filled<float>({3, 1, 7, 5}, 3), filled<float>({2, 5, 6}, 4));
}

TEST_CASE("cuda matmul: fused operands and consumers, and empty inner dimensions") {
  auto x = filled<float>({8, 16}, 1), w = filled<float>({16, 4}, 2), bias = filled<float>({4}, 3);
  same_on_both_devices(1e-5, [](const auto& x, const auto& w, const auto& b) { return fx::relu(fx::matmul(x * 2.f, w) + b); },
                       x, w, bias);
  auto z = same_on_both_devices([](const auto& a, const auto& b) { return fx::matmul(a, b); }, filled<float>({3, 0}, 4),
                                filled<float>({0, 2}, 5));
  CHECK(z.to_vector() == std::vector<float>(6, 0.f));
  CHECK_THROWS_WITH_AS(fx::matmul(fx::to<fx::cuda>(x), fx::to<fx::cuda>(x)),
                       "matmul: inner dimensions differ: (8, 16) x (8, 16)", fx::shape_error);
}

TEST_CASE("cuda matmul: float products are full float32 unless TF32 is allowed") {
  // Sums of 512 products of values in [-2, 2) (the sums' spread is about 30): float32 rounding
  // leaves about 2e-5 of absolute error, TF32 (10-bit mantissas) about 2e-2 (seen on an H100). On
  // a GPU the default must be float32 (cuBLAS's default math mode), which the 1e-4 bound tells
  // apart from TF32; with allow_tf32 the result stays within TF32's error.
  CHECK_FALSE(fx::tf32_allowed());
  auto a = filled<float>({64, 512}, 11), b = filled<float>({512, 48}, 12);
  same_on_both_devices(1e-4, [](const auto& a, const auto& b) { return fx::matmul(a, b); }, a, b);
  fx::allow_tf32(true);
  CHECK(fx::tf32_allowed());
  same_on_both_devices(0.1, [](const auto& a, const auto& b) { return fx::matmul(a, b); }, a, b);
  fx::allow_tf32(false);
  // Evenly spaced batches (one strided-batched call) and a batch of one matrix against many.
  same_on_both_devices(1e-5, [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_b); },
                       filled<float>({5, 7, 33}, 13), filled<float>({5, 9, 33}, 14));
  same_on_both_devices(1e-12, [](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_a); },
                       filled<double>({33, 7}, 15), filled<double>({4, 33, 9}, 16));
}

TEST_CASE("cuda einsum: the cpu's results through transposes, sums, diagonals and batched matmuls") {
  const auto a = filled<double>({2, 3, 4}, 11), b = filled<double>({2, 4, 5}, 12);
  same_on_both_devices(1e-12, [](const auto& x, const auto& y) { return fx::einsum("bij,bjk->kb", x, y); }, a, b);
  same_on_both_devices(1e-12, [](const auto& x, const auto& y) { return fx::einsum("...ij,...jk", x, y); },
                       filled<double>({3, 1, 2, 4}, 13), filled<double>({2, 4, 3}, 14));
  same_on_both_devices(1e-12, [](const auto& x) { return fx::einsum("ijk->ki", x); }, a);
  // Three operands in pairs, and diagonals through a gather (stop 63).
  same_on_both_devices(1e-12, [](const auto& x, const auto& y, const auto& z) { return fx::einsum("bij,bjk,kb->ib", x, y, z); },
                       a, b, filled<double>({5, 2}, 17));
  same_on_both_devices(1e-12, [](const auto& x) { return fx::einsum("bii->bi", x); }, filled<double>({2, 3, 3}, 18));
  same_on_both_devices(1e-12, [](const auto& x, const auto& y) { return fx::einsum("ii,ij", x, y); },
                       filled<double>({3, 3}, 19), filled<double>({3, 4}, 20));
}
