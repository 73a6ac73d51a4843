#include "gradient_checks.hpp"

// cumprod and linear_recurrence against finite differences in reverse and forward mode (second
// order: rules_second_order); cumprod's gradient at zeros against its closed form (TensorFlow's
// divides by x and gives NaN there).

using test::check_op;
using test::random_tensor;

namespace {
const auto x_rec = random_tensor<double>({2, 3, 4}, 31, -1.5, 1.5);
const auto a_rec = random_tensor<double>({2, 3, 4}, 32, -1.2, 1.2);
}  // namespace

TEST_CASE("rules: cumprod along each axis with each flag") {
  for (int axis : {0, 1, -1})
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        check_op("cumprod", [&](const auto& v) { return fx::cumprod(v, axis, {.exclusive = exclusive, .reverse = reverse}); }, x_rec);
      }
  check_op("cumprod of an expression, weighted",
           [](const auto& v) { return fx::cumprod(fx::sin(v) + 1.0, 2) * fx::tensor<double>{1.0, -2.0, 3.0, 0.5}; }, x_rec);
}

TEST_CASE("rules: linear_recurrence in a and in b, each flag, a broadcast coefficient") {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      CAPTURE(exclusive);
      CAPTURE(reverse);
      check_op("linear_recurrence", [&](const auto& a, const auto& b) {
        return fx::linear_recurrence(a, b, 2, {.exclusive = exclusive, .reverse = reverse});
      }, a_rec, x_rec);
    }
  check_op("linear_recurrence along axis 0, one coefficient per lane",
           [](const auto& a, const auto& b) { return fx::linear_recurrence(a, b * b, 0, {.reverse = true}); },
           random_tensor<double>({1, 3, 1}, 33, -1.2, 1.2), x_rec);
  check_op("linear_recurrence with a scalar coefficient", [](const auto& b) { return fx::linear_recurrence(0.9, b, 1); }, x_rec);
}

TEST_CASE("rules: linear_recurrence from an initial state, in a, b and the state") {
  const auto h0 = random_tensor<double>({2, 3}, 34, -1.5, 1.5);
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      CAPTURE(exclusive);
      CAPTURE(reverse);
      check_op("linear_recurrence from h0", [&](const auto& a, const auto& b, const auto& h) {
        return fx::linear_recurrence(a, b, h, 2, {.exclusive = exclusive, .reverse = reverse});
      }, a_rec, x_rec, h0);
      check_op("linear_recurrence from h0, a scalar coefficient", [&](const auto& b, const auto& h) {
        return fx::linear_recurrence(0.8, b, h, 1, {.exclusive = exclusive, .reverse = reverse});
      }, x_rec, random_tensor<double>({2, 4}, 35));
    }
  check_op("a state that broadcasts, of an expression", [](const auto& a, const auto& h) {
    return fx::linear_recurrence(a, a * a, fx::exp(h), 0);
  }, a_rec, random_tensor<double>({4}, 36));
}

TEST_CASE("cumprod: the gradient at zeros is exact") {
  // d/dx_i sum_j w_j prod_{k<=j} x_k = sum_{j>=i} w_j prod_{k<=j, k!=i} x_k, written out.
  fx::tensor<double> x = {2.0, 0.0, 3.0, 0.0, 5.0};
  const fx::tensor<double> weights = {1.0, -1.0, 2.0, 0.5, 3.0};
  const std::vector<double> w = weights.to_vector();
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> loss = fx::reduce_sum(fx::cumprod(x) * weights);
  const std::vector<double> g = tape.gradient(loss, x).to_vector();
  const auto xv = x.to_vector();
  for (std::size_t i = 0; i < xv.size(); ++i) {
    double want = 0;
    for (std::size_t j = i; j < xv.size(); ++j) {
      double p = w[j];
      for (std::size_t k = 0; k <= j; ++k)
        if (k != i) p *= xv[k];
      want += p;
    }
    CAPTURE(i);
    CHECK(std::isfinite(g[i]));
    CHECK(g[i] == doctest::Approx(want));
  }
  CHECK(g == std::vector<double>{1.0, 10.0, 0.0, 0.0, 0.0});  // 1 + 0; -2 + 2 * 2 * 3; then a zero before each
}

TEST_CASE("linear_recurrence: a constant coefficient gets no gradient kernel, b's gradient is the reversed recurrence") {
  fx::tensor<double> r = {1.0, 2.0, 3.0};
  fx::gradient_tape tape;
  tape.watch(r);
  const fx::tensor<double> g = fx::linear_recurrence(0.5, r, 0, {.reverse = true});  // discounted returns
  // d(sum g)/dr[t] = sum_{s<=t} 0.5^(t-s): 1, 1.5, 1.75.
  CHECK(tape.gradient(fx::reduce_sum(g), r).to_vector() == std::vector<double>{1.0, 1.5, 1.75});
}
