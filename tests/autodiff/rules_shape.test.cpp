#include "../test_util.hpp"

#include <fluxion/testing/check_gradients.hpp>

// Every differentiable op against central finite differences, in double, at several shapes
// including broadcasting.

namespace {

using fx::testing::check_gradients;

template <class F>
void check_unary(const char* name, F f, double lo = -2, double hi = 2, fx::testing::check_options opt = {}) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{5}, fx::shape{2, 3}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(s));
    auto x = test::random_tensor<double>(s, 3, lo, hi);
    auto r = check_gradients(f, opt, x);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

template <class F>
void check_binary(const char* name, F f, double lo = -2, double hi = 2) {
  struct Case {
    fx::shape a, b;
  };
  for (auto c : {Case{{4}, {4}}, Case{{2, 3}, {3}}, Case{{3, 1}, {1, 4}}, Case{{}, {2, 2}}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(c.a));
    CAPTURE(fx::to_string(c.b));
    auto a = test::random_tensor<double>(c.a, 5, lo, hi);
    auto b = test::random_tensor<double>(c.b, 6, lo, hi);
    auto r = check_gradients(f, a, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

}  // namespace

TEST_CASE("rules: shape ops, gather, concat, pad, matmul") {
  auto x = test::random_tensor<double>({2, 3, 4}, 8);
  auto m = test::random_tensor<double>({4, 5}, 9);
  auto checks = {
      check_gradients([](const auto& v) { return fx::transpose(v, {2, 0, 1}) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::reshape(v * 2.0, {6, -1}); }, x),
      check_gradients([](const auto& v) { return fx::expand_dims(v, 1) * fx::expand_dims(v, 1); }, x),
      check_gradients([](const auto& v) { return fx::squeeze(fx::expand_dims(v, 0)) * 3.0; }, x),
      check_gradients([](const auto& v) { return fx::broadcast_to(fx::reduce_sum(v, 0), {5, 3, 4}) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::strided_slice(v, {1, 0, 3}, {2, fx::end, 0}, {1, 2, -2}) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::gather(v, fx::tensor<int>{2, 0, 2}, 1) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::concat({v, fx::tensor<double>(v * v)}, 2) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::stack({v, fx::tensor<double>(v * 2.0)}, 1) * 1.0; }, x),
      check_gradients([](const auto& v) { return fx::pad(v * v, {{1, 0}, {0, 2}, {1, 1}}, 3.0); }, x),
      check_gradients([](const auto& a, const auto& b) { return fx::matmul(a, b); }, x, m),
      check_gradients([](const auto& a, const auto& b) { return fx::matmul(b, a, fx::transpose_ab); }, m,
                      test::random_tensor<double>({2, 3, 5}, 10)),
      check_gradients([](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_a); },
                      test::random_tensor<double>({4, 3}, 11), test::random_tensor<double>({4, 2}, 12)),
      check_gradients([](const auto& a, const auto& b) { return fx::matmul(a, b, fx::transpose_b); },
                      test::random_tensor<double>({3, 4}, 13), test::random_tensor<double>({2, 4}, 14)),
  };
  for (const auto& r : checks) CHECK_MESSAGE(r.ok, r.report);
}
