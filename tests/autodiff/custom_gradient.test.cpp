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

TEST_CASE("stop_gradient: a constant to tapes and forward accumulators, at every order") {
  const fx::tensor<double> x = {1.5, -0.5};
  {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = x * fx::stop_gradient(x);  // d/dx = stop(x) = x, not 2 x
    CHECK(tape.gradient(y, x).to_vector() == x.to_vector());
  }
  {
    // The result shares x's storage under a new id; an expression is computed unrecorded.
    const fx::tensor<double> s = fx::stop_gradient(x);
    CHECK(s.storage_id() == x.storage_id());
    CHECK(s.id() != x.id());
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<double> e = fx::stop_gradient(fx::exp(x) * 2.0);
    CHECK(tape.entries() == 0);
    CHECK(e(0) == doctest::Approx(2.0 * std::exp(1.5)));
    fx::tensor<double> y = x * e;
    CHECK(tape.gradient(y, x).to_vector() == e.to_vector());
  }
  {
    // Everything stopped: no path from the target to the source.
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = fx::stop_gradient(x) * 3.0;
    CHECK(tape.gradient(y, x).is_none());
  }
  {
    // A variable: its current value, not watched through the result.
    fx::variable<double> w{fx::tensor<double>{2.0, 3.0}, "w"};
    fx::gradient_tape tape;
    fx::tensor<double> y = w * fx::stop_gradient(w);
    CHECK(tape.gradient(y, w).to_vector() == std::vector<double>{2.0, 3.0});
  }
  {
    // Second order: y = x^2 stop(x); dy/dx = 2 x stop(x), d2y/dx2 = 2 stop(x) (not 6 x).
    fx::gradient_tape outer;
    outer.watch(x);
    fx::tensor<double> dy;
    {
      fx::gradient_tape inner;
      inner.watch(x);
      fx::tensor<double> y = x * x * fx::stop_gradient(x);
      dy = inner.gradient(y, x);
    }
    CHECK(dy(0) == doctest::Approx(2 * 1.5 * 1.5));
    CHECK(outer.gradient(dy, x).to_vector() == std::vector<double>{3.0, -1.0});
  }
  {
    // Forward mode: the tangent of x stop(x) is v stop(x).
    const fx::tensor<double> v = {1.0, 2.0};
    fx::forward_accumulator acc(x, v);
    fx::tensor<double> y = x * fx::stop_gradient(x);
    CHECK(acc.jvp(y).to_vector() == std::vector<double>{1.5, -1.0});
    fx::tensor<double> z = fx::stop_gradient(x * x);
    CHECK(acc.jvp(z).is_none());  // TensorFlow's None: z does not depend on x
    CHECK(acc.jvp(z, fx::unconnected_gradients::zero).to_vector() == std::vector<double>{0.0, 0.0});
  }
}

TEST_CASE("custom_gradient: a function that returns its argument keeps its own backward") {
  // An identity whose gradient is clipped to [-1, 1]: the value is the argument itself.
  auto clip_grad = fx::custom_gradient([](const auto& v) {
    return std::pair{v, [](const auto& dy) { return fx::clip(dy, -1.0, 1.0); }};
  });
  const fx::tensor<double> x = {1.5, -0.5};
  {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> z = clip_grad(x) * 5.0;
    CHECK(z.to_vector() == std::vector<double>{7.5, -2.5});
    CHECK(tape.gradient(z, x).to_vector() == std::vector<double>{1.0, 1.0});  // clip(5), not 5
  }
  {
    // The same through a variable, and with a tensor the tape tracks returned from a capture.
    fx::variable<double> w{fx::tensor<double>{2.0}, "w"};
    fx::gradient_tape tape;
    fx::tensor<double> z = clip_grad(w) * -3.0;
    CHECK(tape.gradient(z, w).to_vector() == std::vector<double>{-1.0});
  }
  {
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<double> h = x * 2.0;  // recorded: the tape tracks h
    auto returns_h = fx::custom_gradient([&h](const auto&) {
      return std::pair{h, [](const auto& dy) { return dy * 0.0; }};
    });
    fx::tensor<double> z = returns_h(x) * 4.0;
    CHECK(tape.gradient(z, x).to_vector() == std::vector<double>{0.0, 0.0});  // the hand-written backward's zeros
  }
  {
    // Forward mode sees the identity: the tangent passes through.
    const fx::tensor<double> v = {1.0, 2.0};
    fx::forward_accumulator acc(x, v);
    fx::tensor<double> y = clip_grad(x);
    CHECK(acc.jvp(y).to_vector() == v.to_vector());
  }
}
