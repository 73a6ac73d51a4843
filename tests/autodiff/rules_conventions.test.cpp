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

TEST_CASE("rules: TensorFlow's conventions at kinks and ties") {
  fx::tensor<double> x = {-1.0, 0.0, 2.0};
  auto g = fx::gradients_function([](const auto& v) { return fx::relu(v); })(x)[0];
  CHECK(g.to_vector() == std::vector<double>{0, 0, 1});  // relu'(0) = 0
  fx::tensor<double> t = {1.0, 3.0, 3.0};
  auto gm = fx::gradients_function([](const auto& v) { return fx::reduce_max(v); })(t)[0];
  CHECK(gm.to_vector() == std::vector<double>{0, 0.5, 0.5});  // ties share the gradient
  fx::tensor<double> a = {1.0, 2.0}, b = {1.0, 3.0};
  auto gab = fx::gradients_function([](const auto& p, const auto& q) { return fx::maximum(p, q); })(a, b);
  CHECK(gab[0].to_vector() == std::vector<double>{1, 0});  // a >= b picks a
  CHECK(gab[1].to_vector() == std::vector<double>{0, 1});
}
