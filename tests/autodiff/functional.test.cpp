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
