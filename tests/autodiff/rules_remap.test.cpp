#include "gradient_checks.hpp"

// Shape ops that re-map indices, and reshape, against finite differences in reverse and forward
// mode: alone, inside fused statements, and under a broadcasting binary op (the gradient then
// reaches the remap with a larger shape and is summed down first).

using test::check_op;
using test::random_tensor;

namespace {
const auto x234 = random_tensor<double>({2, 3, 4}, 8);
}

TEST_CASE("rules: transpose and permute") {
  check_op("transpose", [](const auto& v) { return fx::transpose(v); }, x234);
  check_op("transpose 2-D", [](const auto& v) { return fx::transpose(v); }, random_tensor<double>({3, 5}, 1));
  check_op("permute", [](const auto& v) { return fx::permute(fx::sin(v), {2, 0, 1}); }, x234);
  // (4, 2, 3) under a (5, 4, 2, 3) product: the gradient is summed over the leading axis first
  check_op("permute broadcast", [](const auto& a, const auto& b) { return fx::permute(a, {2, 0, 1}) * b; }, x234,
           random_tensor<double>({5, 4, 1, 3}, 2));
}

TEST_CASE("rules: reshape") {
  check_op("reshape -1", [](const auto& v) { return fx::reshape(v, {6, -1}); }, x234);
  check_op("reshape of an expression", [](const auto& v) { return fx::reshape(fx::square(v), {-1}); }, x234);
  check_op("reshape broadcast", [](const auto& a, const auto& b) { return fx::reshape(a, {4, -1}) + b; },
           random_tensor<double>({2, 6}, 3), random_tensor<double>({2, 1, 3}, 4));
}

TEST_CASE("rules: expand_dims and squeeze") {
  check_op("expand_dims", [](const auto& v) { return fx::expand_dims(v, 1) * fx::expand_dims(v, -1); },
           random_tensor<double>({3, 2}, 5));
  check_op("expand_dims at 0", [](const auto& v) { return fx::expand_dims(v, 0); }, random_tensor<double>({4}, 6));
  check_op("squeeze all", [](const auto& v) { return fx::squeeze(fx::exp(v)); }, random_tensor<double>({1, 3, 1}, 7));
  check_op("squeeze one axis", [](const auto& v) { return fx::squeeze(v, {2}); }, random_tensor<double>({2, 3, 1}, 8));
  check_op("squeeze broadcast", [](const auto& a, const auto& b) { return fx::squeeze(a) * b; },
           random_tensor<double>({1, 4}, 9), random_tensor<double>({3, 1}, 10));
}

TEST_CASE("rules: broadcast_to") {
  check_op("broadcast_to", [](const auto& v) { return fx::broadcast_to(v, {5, 3, 4}); }, random_tensor<double>({3, 1}, 11));
  check_op("broadcast_to of a reduction", [](const auto& v) { return fx::broadcast_to(fx::reduce_sum(v, 0), {5, 3, 4}); },
           x234);
  check_op("broadcast_to of a scalar", [](const auto& v) { return fx::broadcast_to(v, {2, 2}); }, fx::tensor<double>(0.7));
}

TEST_CASE("rules: strided_slice and slice") {
  check_op("strided_slice, negative steps",
           [](const auto& v) { return fx::strided_slice(v, {1, 0, 3}, {2, fx::end, 0}, {1, 2, -2}); }, x234);
  check_op("strided_slice, reversed", [](const auto& v) { return fx::strided_slice(v, {fx::end}, {fx::end}, {-1}); },
           random_tensor<double>({5}, 12));
  check_op("strided_slice, every third",
           [](const auto& v) { return fx::strided_slice(fx::cos(v), {0, -1}, {fx::end, fx::end}, {3, -2}); },
           random_tensor<double>({7, 4}, 13));
  check_op("slice", [](const auto& v) { return fx::slice(v, {0, 1, 1}, {2, 2, -1}); }, x234);
  check_op("slice broadcast", [](const auto& a, const auto& b) { return fx::slice(a, {1, 0}, {2, -1}) - b; },
           random_tensor<double>({4, 3}, 14), random_tensor<double>({2, 2, 1}, 15));
}
