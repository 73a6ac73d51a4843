#include "gradient_checks.hpp"

// cumsum, sort, top_k, take_along_axis, reverse, tile, repeat and norm against finite differences
// in reverse and forward mode.

using test::check_op;
using test::random_tensor;

namespace {
const auto x_sort = random_tensor<double>({2, 3, 4}, 21);
}

TEST_CASE("rules: cumsum along each axis with each flag") {
  for (int axis : {0, 1, -1})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        check_op("cumsum", [&](const auto& v) { return fx::cumsum(v, axis, {.exclusive = exclusive, .reverse = reverse}); }, x_sort);
      }
  check_op("cumsum of an expression, weighted",
           [](const auto& v) { return fx::cumsum(fx::sin(v) * v, 1) * fx::tensor<double>{1.0, -2.0, 3.0, 0.5}; }, x_sort);
}

TEST_CASE("rules: sort, top_k and take_along_axis") {
  // Distinct values far apart compared with the differencing step, so the order does not change.
  const auto distinct = fx::tensor<double>(fx::reshape(fx::tensor<double>{0.3, -1.2, 2.5, 0.9, -0.4, 1.7, -2.1, 1.1, 0.0, -0.8, 2.9, 0.6}, {3, 4}));
  check_op("sort ascending", [](const auto& v) { return fx::sort(v) * fx::tensor<double>{1.0, 2.0, 3.0, 4.0}; }, distinct);
  check_op("sort descending along axis 0", [](const auto& v) { return fx::sort(v * v, 0, fx::descending); }, distinct);
  check_op("top_k values", [](const auto& v) { return fx::top_k(v, 2).values * fx::tensor<double>{1.0, -3.0}; }, distinct);
  check_op("take_along_axis with repeats", [](const auto& v) {
    return fx::take_along_axis(v, fx::tensor<std::int32_t>{{2, 2, 0}, {1, 0, 3}, {3, 3, 3}}, 1);
  }, distinct);
}

TEST_CASE("rules: reverse, tile and repeat") {
  check_op("reverse", [](const auto& v) { return fx::reverse(v, {0, 2}) * fx::tensor<double>{1.0, 2.0, 3.0, 4.0}; }, x_sort);
  check_op("tile", [](const auto& v) { return fx::tile(v, {2, 1, 3}); }, x_sort);
  check_op("tile of an expression", [](const auto& v) { return fx::tile(v * v, {1, 2, 1}) * 0.5; }, x_sort);
  check_op("repeat a scalar count", [](const auto& v) { return fx::repeat(v, 2, 1); }, x_sort);
  check_op("repeat a count per element", [](const auto& v) { return fx::repeat(v, {3, 0, 1, 2}, -1); }, x_sort);
}

TEST_CASE("rules: norm") {
  check_op("norm 2", [](const auto& v) { return fx::norm(v); }, x_sort);
  check_op("norm 1 over an axis", [](const auto& v) { return fx::norm(v, 1, 2); }, x_sort);
  check_op("norm 2 over two axes, keepdims", [](const auto& v) { return fx::norm(v, 2, {0, 2}, fx::keepdims); }, x_sort);
  check_op("norm 3 over an axis, keepdims", [](const auto& v) { return fx::norm(v, 3, 1, fx::keepdims); }, x_sort);
  check_op("norm 0.5", [](const auto& v) { return fx::norm(v, 0.5, 1); }, x_sort);
  check_op("norm infinity", [](const auto& v) { return fx::norm(v, INFINITY, 1); }, x_sort);
  // A zero vector's gradient is 0 (PyTorch's), not NaN (TensorFlow's).
  for (double ord : {0.5, 1.0, 2.0, 3.0}) {
    CAPTURE(ord);
    fx::tensor<double> zero = {{0.0, 0.0}, {3.0, -4.0}};
    fx::gradient_tape tape;
    tape.watch(zero);
    fx::tensor<double> n = fx::norm(zero, ord, 1);
    const auto g = tape.gradient(fx::reduce_sum(n), zero).to_vector();
    CHECK(g[0] == 0.0);
    CHECK(g[1] == 0.0);
    CHECK(std::isfinite(g[2]));
  }
}
