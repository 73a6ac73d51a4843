#define FLUXION_MAX_DERIVATIVE_ORDER 3
#include "../test_util.hpp"

TEST_CASE("higher order: gradient of gradient, x*x at 3 gives 6 then 2") {
  auto square = [](const auto& x) { return x * x; };
  auto grad = fx::gradients_function(square);
  CHECK(grad(3.f)[0].item() == 6.f);
  auto gradgrad = fx::gradients_function([&](const auto& x) { return grad(x)[0]; });
  CHECK(gradgrad(3.f)[0].item() == 2.f);
}

TEST_CASE("higher order: the third derivative of x^4 is 24x") {
  fx::tensor<double> x = {1.5, -2.0};
  fx::gradient_tape t3, t2, t1;
  for (auto* t : {&t1, &t2, &t3}) t->watch(x);
  fx::tensor<double> y = fx::square(fx::square(x));
  fx::tensor<double> d1 = t1.gradient(y, x);
  fx::tensor<double> d2 = t2.gradient(d1, x);
  fx::tensor<double> d3 = t3.gradient(d2, x);
  CHECK(d1(0) == doctest::Approx(4 * 1.5 * 1.5 * 1.5));
  CHECK(d2(0) == doctest::Approx(12 * 1.5 * 1.5));
  CHECK(d3(0) == doctest::Approx(24 * 1.5));
  CHECK(d3(1) == doctest::Approx(24 * -2.0));
}

namespace {
// A small MLP loss: mean((tanh(x W1) W2 - y)^2) as a function of the flat parameters.
struct mlp {
  fx::tensor<double> x = test::random_tensor<double>({5, 3}, 1), y = test::random_tensor<double>({5, 1}, 2);
  template <class P>
  fx::tensor<double> loss(const P& p) const {
    fx::tensor<double> w1 = fx::reshape(fx::slice(p, {0}, {6}), {3, 2});
    fx::tensor<double> w2 = fx::reshape(fx::slice(p, {6}, {2}), {2, 1});
    fx::tensor<double> h = fx::tanh(fx::matmul(x, w1));
    return fx::reduce_mean(fx::square(fx::matmul(h, w2) - y));
  }
  fx::tensor<double> gradient(const fx::tensor<double>& p) const {
    fx::gradient_tape tape;
    tape.watch(p);
    fx::tensor<double> l = loss(p);
    return tape.gradient(l, p);
  }
};
}  // namespace

TEST_CASE("higher order: Hessian-vector products against finite differences of gradients") {
  mlp net;
  auto p = test::random_tensor<double>({8}, 3);
  auto v = test::random_tensor<double>({8}, 4);
  fx::tensor<double> hv;
  {  // reverse over reverse
    fx::gradient_tape outer;
    outer.watch(p);
    fx::tensor<double> g = net.gradient(p);
    fx::tensor<double> gv = fx::reduce_sum(g * v);
    hv = outer.gradient(gv, p);
  }
  const double h = 1e-5;
  fx::tensor<double> fd = (net.gradient(p + h * v) - net.gradient(p - h * v)) / (2 * h);
  test::check_close(hv.to_vector(), fd.to_vector(), 1e-5, 1e-7);
  // forward over reverse gives the same product
  fx::forward_accumulator acc(p, v);
  fx::tensor<double> g = net.gradient(p);
  test::check_close(acc.jvp(g).to_vector(), fd.to_vector(), 1e-5, 1e-7);
}

TEST_CASE("higher order: the Hessian of a small MLP loss is symmetric and matches finite differences") {
  mlp net;
  auto p = test::random_tensor<double>({8}, 5);
  fx::gradient_tape outer;
  outer.watch(p);
  fx::tensor<double> g = net.gradient(p);
  fx::tensor<double> hess = outer.jacobian(g, p);
  CHECK(hess.shape() == fx::shape{8, 8});
  const double h = 1e-5;
  for (int j = 0; j < 8; ++j) {
    fx::tensor<double> e = fx::one_hot<double>(fx::tensor<int>(j), 8);
    fx::tensor<double> col = (net.gradient(p + h * e) - net.gradient(p - h * e)) / (2 * h);
    for (int i = 0; i < 8; ++i) {
      CHECK(hess(i, j) == doctest::Approx(col(i)).epsilon(1e-5));
      CHECK(hess(i, j) == doctest::Approx(hess(j, i)).epsilon(1e-9));
    }
  }
}

TEST_CASE("higher order: beyond the configured order is a clear error") {
  fx::tensor<double> x = {1.0};
  fx::gradient_tape t4, t3, t2, t1;
  for (auto* t : {&t1, &t2, &t3, &t4}) t->watch(x);
  fx::tensor<double> y = fx::exp(x);
  fx::tensor<double> d1 = t1.gradient(y, x), d2 = t2.gradient(d1, x), d3 = t3.gradient(d2, x);
  test::check_throws_with<fx::error>([&] { (void)t4.gradient(d3, x); }, "a derivative of order above 3 was requested");
}
