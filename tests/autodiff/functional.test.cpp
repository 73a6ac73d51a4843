#include "../test_util.hpp"

TEST_CASE("functional: gradients_function and value_and_gradients_function") {
  auto f = [](const auto& x, const auto& y) { return x * fx::sin(y); };
  auto g = fx::gradients_function(f)(2.0, 0.5);
  REQUIRE(g.size() == 2);
  CHECK(g[0].item() == doctest::Approx(std::sin(0.5)));
  CHECK(g[1].item() == doctest::Approx(2 * std::cos(0.5)));
  auto [v, vg] = fx::value_and_gradients_function(f)(2.0, 0.5);
  CHECK(v.item() == doctest::Approx(2 * std::sin(0.5)));
  CHECK(vg[1].item() == doctest::Approx(2 * std::cos(0.5)));
  // One gradient per argument, known when the call compiles: they unpack.
  auto [dx, dy] = fx::gradients_function(f)(2.0, 0.5);
  CHECK(dx.item() == doctest::Approx(std::sin(0.5)));
  CHECK(dy.item() == doctest::Approx(2 * std::cos(0.5)));
  auto [vdx, vdy] = vg;
  CHECK(vdx.item() == doctest::Approx(std::sin(0.5)));
  CHECK(vdy.item() == doctest::Approx(2 * std::cos(0.5)));
}

TEST_CASE("functional: implicit_gradients follows the variables the function reads") {
  fx::variable<double> w{fx::tensor<double>{3.0}, "w"}, b{fx::tensor<double>{1.0}, "b"};
  fx::tensor<double> x = {2.0};
  auto loss = [&] { return fx::square(w * x + b); };
  auto grads = fx::implicit_gradients(loss)();
  REQUIRE(grads.size() == 2);
  CHECK(grads[0].var == &w);
  CHECK(grads[0].gradient.item() == doctest::Approx(2 * 7.0 * 2.0));
  CHECK(grads[1].var == &b);
  CHECK(grads[1].gradient.item() == doctest::Approx(2 * 7.0));
  auto [value, vg] = fx::implicit_value_and_gradients(loss)();
  CHECK(value.item() == 49.0);
  CHECK(vg.size() == 2);
}

TEST_CASE("functional: graph mode differentiates by type, with no tape and only the output allocated") {
  auto f = [](const auto& x) { return fx::reduce_sum(x * x * 3.0 + fx::sin(x)); };
  auto dfdx = fx::grad(f);
  auto x = test::random_tensor<double>({1000}, 1);
  const auto before = fx::memory::stats().allocations;
  fx::tensor<double> g = dfdx(x);
  CHECK(fx::memory::stats().allocations - before == 1);
  CHECK(fx::detail::tape_stack::tapes.empty());
  for (int i = 0; i < 1000; i += 97) CHECK(g(i) == doctest::Approx(6 * x(i) + std::cos(x(i))));
  // graph mode and tape mode agree
  auto tg = fx::gradients_function(f)(x)[0];
  test::check_close(g.to_vector(), tg.to_vector(), 1e-12);
}

TEST_CASE("functional: graph mode through what f computes into tensors (reduce_logsumexp, an intermediate, a custom "
          "gradient): the tape's gradient, not a silent zero") {
  // Stop 89: these gave zeros (or a partial gradient) before: the result's type does not say how a
  // tensor computed inside f depends on x.
  const auto x = test::random_tensor<double>({3, 5}, 2);
  const auto w = test::random_tensor<double>({3, 5}, 3);
  auto softplus_by_hand = fx::custom_gradient([](const fx::tensor<double>& a) {
    fx::tensor<double> y = fx::log1p(fx::exp(a));
    return std::pair{y, [a](const fx::tensor<double>& dy) { return dy * fx::sigmoid(a); }};
  });
  auto lse = [](const auto& a) { return fx::reduce_logsumexp(a, -1); };
  auto intermediate = [&](const auto& a) {
    const fx::tensor<double> h = fx::exp(a) * w;
    return h * a + fx::sin(a);  // h reads x, and x is read directly too
  };
  auto custom = [&](const auto& a) { return softplus_by_hand(a) * w; };
  auto check = [&](auto f, const char* name) {
    CAPTURE(name);
    const fx::tensor<double> g = fx::grad(f)(x);
    const fx::tensor<double> want = fx::gradients_function(f)(x)[0];
    test::check_close(g.to_vector(), want.to_vector(), 1e-12);
    auto [value, vg] = fx::value_and_grad(f)(x);
    test::check_close(vg.to_vector(), want.to_vector(), 1e-12);
    CHECK(value.shape() == fx::tensor<double>(f(x)).shape());
    CHECK(fx::detail::tape_stack::tapes.empty());
    double largest = 0;
    for (double e : g.to_vector()) largest = std::max(largest, std::abs(e));
    CHECK(largest > 0.01);
  };
  check(lse, "reduce_logsumexp");
  check(intermediate, "intermediate");
  check(custom, "custom_gradient");
  // Against finite differences too: d logsumexp / dx is the softmax of each row.
  const fx::tensor<double> g = fx::grad(lse)(x);
  const fx::tensor<double> p = fx::exp(x - fx::reduce_logsumexp(x, -1, fx::keepdims));
  test::check_close(g.to_vector(), p.to_vector(), 1e-12);
  // A result of another element type, partly computed into a tensor: refused by name.
  test::check_throws_with<std::invalid_argument>(
      [&] { (void)fx::grad([](const auto& a) { return fx::tensor<float>(fx::cast<float>(fx::exp(a))) * 2.f; })(x); },
      "grad: f's result is of another element type");
}

TEST_CASE("functional: jvp and forward_accumulator") {
  fx::tensor<double> x = {0.3, 1.2}, v = {1.0, -2.0};
  auto [y, t] = fx::jvp([](const auto& p) { return fx::exp(p) * p; }, x, v);
  for (int i = 0; i < 2; ++i) {
    CHECK(y(i) == doctest::Approx(std::exp(x(i)) * x(i)));
    CHECK(t(i) == doctest::Approx((std::exp(x(i)) * x(i) + std::exp(x(i))) * v(i)));
  }
  fx::forward_accumulator acc(x, v);
  fx::tensor<double> s = fx::reduce_sum(fx::square(x));
  CHECK(acc.jvp(s).item() == doctest::Approx(2 * 0.3 * 1.0 + 2 * 1.2 * -2.0));
  test::check_throws_with<fx::shape_error>([&] { acc.watch(x, fx::tensor<double>{1.0}); },
                                           "forward_accumulator: tangent of shape (1,) does not match primal of shape (2,)");
}

TEST_CASE("functional: the tangent of a statement without a derivative is zeros of its shape") {
  fx::tensor<double> x = {{0.3, 1.2, -2.5}, {4.0, 0.5, -0.1}}, v = {{1.0, -2.0, 3.0}, {1.0, 1.0, 1.0}};
  fx::forward_accumulator acc(x, v);
  fx::tensor<double> f = fx::floor(x);
  fx::tensor<double> s = fx::sign(x) + fx::round(x);   // a differentiable op of two that are not
  fx::tensor<double> c = fx::cast<double>(x > 0.0);     // a comparison
  fx::tensor<double> r = fx::reduce_sum(fx::ceil(x), 1);
  fx::tensor<double> m = fx::floor(x) * 2.0;
  for (const auto* t : {&f, &s, &c, &r, &m}) {
    const fx::tensor<double> tangent = acc.jvp(*t);
    CHECK(tangent.shape() == t->shape());
    for (double e : tangent.to_vector()) CHECK(e == 0.0);
  }
  CHECK(acc.jvp(f).shape() == x.shape());
}
