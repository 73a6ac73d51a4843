#include "gradient_checks.hpp"

// gather_nd, scatter_nd, tensor_scatter_nd_add and tensor_scatter_nd_update against finite
// differences in reverse and forward mode, with repeated tuples (whose gradients add up; an update
// a later repeat overwrote gets none). Second order: rules_second_order.

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
  check_op("gather_nd with batch_dims 1, repeated",
           [](const auto& v) { return fx::gather_nd(v * v, fx::tensor<std::int64_t>{{{3}, {0}, {3}}, {{1}, {1}, {2}}, {{0}, {3}, {3}}}, 1); },
           x_nd);
  check_op("gather_nd with batch_dims 2", [](const auto& v) { return fx::gather_nd(v, fx::tensor<std::int32_t>(fx::reshape(
               fx::tensor<std::int32_t>{1, 0, 0, 1, 1, 1, 0, 0, 1, 1, 0, 1}, {3, 4, 1})), 2); }, x_nd);
}

TEST_CASE("rules: scatter_nd and tensor_scatter_nd_add") {
  const auto updates = random_tensor<double>({3, 2, 2}, 32);
  check_op("scatter_nd, repeated tuples", [](const auto& u) { return fx::scatter_nd(pairs, u, fx::shape{3, 4, 2}); }, updates);
  check_op("tensor_scatter_nd_add in both", [](const auto& a, const auto& u) { return fx::tensor_scatter_nd_add(a * a, pairs, fx::exp(u)); },
           x_nd, updates);
}

TEST_CASE("rules: tensor_scatter_nd_update") {
  const auto updates = random_tensor<double>({3, 2, 2}, 33);
  check_op("tensor_scatter_nd_update in both, repeated tuples",
           [](const auto& a, const auto& u) { return fx::tensor_scatter_nd_update(a * a, pairs, fx::exp(u)) * 2.0; }, x_nd, updates);
  // The overwritten update's gradient is 0, the replaced slices' too; the rest of the tensor's is g.
  fx::tensor<double> x = {1.0, 2.0, 3.0};
  fx::tensor<double> u = {10.0, 20.0};
  fx::gradient_tape tape(fx::persistent);
  tape.watch(x);
  tape.watch(u);
  const fx::tensor<double> y = fx::reduce_sum(fx::tensor_scatter_nd_update(x, fx::tensor<std::int32_t>{{1}, {1}}, u) *
                                              fx::tensor<double>{1.0, 2.0, 3.0});
  CHECK(y.item() == 50.0);  // 1 + 2 * 20 + 3 * 3: the second update wins
  CHECK(tape.gradient(y, x).to_vector() == std::vector<double>{1.0, 0.0, 3.0});
  CHECK(tape.gradient(y, u).to_vector() == std::vector<double>{0.0, 2.0});
}
