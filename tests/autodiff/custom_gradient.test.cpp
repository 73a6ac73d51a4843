#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "../test_util.hpp"

namespace {
auto log1pexp_naive = [](const auto& x) { return fx::log(1.f + fx::exp(x)); };
auto log1pexp = fx::custom_gradient([](const auto& x) {
  auto e = fx::exp(x);
  return std::pair{fx::log(1.f + e), [e](const auto& dy) { return dy * (1.f - 1.f / (1.f + e)); }};
});
}  // namespace

TEST_CASE("custom_gradient: log1pexp is NaN at 100 without the rule and 1 with it") {
  auto naive = fx::gradients_function(log1pexp_naive);
  auto custom = fx::gradients_function([](const auto& x) { return log1pexp(x); });
  CHECK(std::isnan(naive(100.f)[0].item()));
  CHECK(custom(100.f)[0].item() == 1.f);
  CHECK(naive(0.f)[0].item() == doctest::Approx(0.5f));
  CHECK(custom(0.f)[0].item() == doctest::Approx(0.5f));
}

TEST_CASE("custom_gradient: inside nested tapes and with variables") {
  fx::variable<float> v{fx::tensor<float>{0.f}, "v"};
  {
    fx::gradient_tape tape;
    fx::tensor<float> y = log1pexp(v) * 2.f;
    CHECK(tape.gradient(y, v).item() == doctest::Approx(1.f));
  }
  // Second derivative of a custom function: d/dx sigmoid(x) = sigmoid(x)(1 - sigmoid(x)) = 0.25 at 0.
  fx::tensor<float> x = {0.f};
  fx::gradient_tape outer;
  outer.watch(x);
  fx::tensor<float> g;
  {
    fx::gradient_tape inner;
    inner.watch(x);
    fx::tensor<float> y = log1pexp(x);
    g = inner.gradient(y, x);
  }
  CHECK(g.item() == doctest::Approx(0.5f));
  CHECK(outer.gradient(g, x).item() == doctest::Approx(0.25f));
}

TEST_CASE("custom_gradient: several arguments and a wrong-shaped gradient") {
  auto mul = fx::custom_gradient([](const auto& a, const auto& b) {
    return std::pair{a * b, [a, b](const auto& dy) { return std::tuple{dy * b, dy * a}; }};
  });
  fx::tensor<double> a = {2.0, 3.0}, b = {5.0, 7.0};
  auto g = fx::gradients_function([&](const auto& p, const auto& q) { return mul(p, q); })(a, b);
  CHECK(g[0].to_vector() == std::vector<double>{5, 7});
  CHECK(g[1].to_vector() == std::vector<double>{2, 3});
  auto bad = fx::custom_gradient([](const auto& p) {
    return std::pair{p * 2.0, [](const auto&) { return fx::tensor<double>{1.0, 2.0, 3.0}; }};
  });
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gradients_function([&](const auto& p) { return bad(p); })(a); },
                                           "custom_gradient: the gradient's shape (3,) does not match its argument's shape (2,)");
}

TEST_CASE("custom_gradient: forward mode differentiates the function itself, not its backward") {
  // A deliberately wrong backward (4x instead of 2x) shows which one forward mode uses.
  auto f = fx::custom_gradient([](const auto& x) {
    return std::pair{x * x, [x](const auto& dy) { return dy * x * 4.0; }};
  });
  fx::tensor<double> x = {1.5, -0.5}, v = {1.0, 2.0};
  fx::forward_accumulator acc(x, v);
  fx::tensor<double> y = f(x);
  CHECK(acc.jvp(y).to_vector() == std::vector<double>{3.0, -2.0});  // 2 x v
}
