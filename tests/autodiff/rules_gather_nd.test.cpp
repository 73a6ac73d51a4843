#include "gradient_checks.hpp"

// gather_nd, scatter_nd and tensor_scatter_nd_add against finite differences in reverse and
// forward mode, with repeated tuples (whose gradients add up). Second order: rules_second_order.

using test::check_op;
using test::random_tensor;

namespace {
const auto x_nd = random_tensor<double>({3, 4, 2}, 31);
const fx::tensor<std::int32_t> pairs = {{{2, 1}, {0, 3}}, {{2, 1}, {1, 0}}, {{0, 0}, {2, 1}}};  // (3, 2, 2), repeats
}  // namespace

TEST_CASE("rules: gather_nd") {
  check_op("gather_nd of pairs, repeated", [](const auto& v) { return fx::gather_nd(v, pairs) * fx::tensor<double>{1.0, -2.0}; }, x_nd);
  check_op("gather_nd of rows, of an expression",
           [](const auto& v) { return fx::gather_nd(fx::sin(v) * v, fx::tensor<std::int64_t>{{2}, {0}, {2}}); }, x_nd);
  check_op("gather_nd of elements", [](const auto& v) { return fx::gather_nd(v, fx::tensor<std::int32_t>{{2, 3, 1}, {0, 0, 0}, {2, 3, 1}}); }, x_nd);
}

TEST_CASE("rules: scatter_nd and tensor_scatter_nd_add") {
  const auto updates = random_tensor<double>({3, 2, 2}, 32);
  check_op("scatter_nd, repeated tuples", [](const auto& u) { return fx::scatter_nd(pairs, u, fx::shape{3, 4, 2}); }, updates);
  check_op("tensor_scatter_nd_add in both", [](const auto& a, const auto& u) { return fx::tensor_scatter_nd_add(a * a, pairs, fx::exp(u)); },
           x_nd, updates);
}
