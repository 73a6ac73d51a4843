// conv2d, conv2d_transpose, depthwise_conv2d, separable_conv2d, max_pool2d and avg_pool2d against central finite differences, in double: first
// derivatives with respect to every operand over strides, dilations and `same`/`valid`; second
// derivatives (the gradient of a gradient is checked like any other function); forward mode, and
// forward over reverse.
#define FLUXION_MAX_DERIVATIVE_ORDER 2
#include "../test_util.hpp"

#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/tensor/creation.hpp>

#include <limits>

namespace {

using fx::testing::check_gradients;

struct window_case {
  fx::shape x, w;  // w: the filters of conv2d; for pooling, w[0] x w[1] is the window
  fx::spatial2d strides, dilations;
  fx::padding pad;
};

std::string describe(const window_case& c) {
  return "x " + fx::to_string(c.x) + ", w " + fx::to_string(c.w) + ", strides " + std::to_string(c.strides.height) +
         "x" + std::to_string(c.strides.width) + ", dilations " + std::to_string(c.dilations.height) + "x" +
         std::to_string(c.dilations.width) + (c.pad == fx::padding::same ? ", same" : ", valid");
}

const std::vector<window_case> conv_cases = {
    {{2, 5, 4, 2}, {3, 3, 2, 3}, 1, 1, fx::padding::valid},
    {{2, 5, 4, 2}, {3, 3, 2, 3}, 1, 1, fx::padding::same},
    {{1, 6, 5, 2}, {3, 2, 2, 2}, 2, 1, fx::padding::same},
    {{1, 7, 6, 3}, {2, 3, 3, 2}, {2, 1}, 1, fx::padding::valid},
    {{1, 7, 7, 1}, {3, 3, 1, 2}, 1, 2, fx::padding::same},
    {{1, 7, 6, 2}, {2, 2, 2, 2}, 1, {2, 1}, fx::padding::valid},
};

const std::vector<window_case> pool_cases = {
    {{2, 4, 4, 2}, {2, 2}, 2, 1, fx::padding::valid},
    {{1, 5, 5, 2}, {2, 2}, 2, 1, fx::padding::same},
    {{1, 5, 4, 3}, {3, 3}, 1, 1, fx::padding::same},   // overlapping windows
    {{1, 6, 5, 1}, {3, 2}, {2, 1}, 1, fx::padding::same},
};

auto conv_of(const window_case& c) {
  return [c](const auto& x, const auto& w) { return fx::conv2d(x, w, c.strides, c.pad, c.dilations); };
}
// Depthwise filters (height, width, channels, multiplier).
const std::vector<window_case> depthwise_cases = {
    {{2, 5, 4, 3}, {3, 3, 3, 1}, 1, 1, fx::padding::valid},
    {{1, 6, 5, 2}, {3, 2, 2, 2}, 2, 1, fx::padding::same},
    {{1, 7, 7, 3}, {3, 3, 3, 1}, 1, 2, fx::padding::same},
    {{1, 7, 6, 2}, {2, 2, 2, 3}, {2, 1}, {1, 2}, fx::padding::valid},
};
auto depthwise_of(const window_case& c) {
  return [c](const auto& x, const auto& w) { return fx::depthwise_conv2d(x, w, c.strides, c.pad, c.dilations); };
}

// The conv2d filter (height, width, C, C * M) that does what the depthwise filter w does: zero but
// for [:, :, c, c * M + j] = w[:, :, c, j].
template <class T>
fx::tensor<T> block_diagonal(const fx::tensor<T>& w) {
  const auto& s = w.shape();
  std::vector<T> v(static_cast<std::size_t>(s[0] * s[1] * s[2] * s[2] * s[3]), T(0));
  for (fx::index_t kh = 0; kh < s[0]; ++kh)
    for (fx::index_t kw = 0; kw < s[1]; ++kw)
      for (fx::index_t c = 0; c < s[2]; ++c)
        for (fx::index_t j = 0; j < s[3]; ++j)
          v[static_cast<std::size_t>(((kh * s[1] + kw) * s[2] + c) * s[2] * s[3] + c * s[3] + j)] = w(kh, kw, c, j);
  return fx::from_vector(v, {s[0], s[1], s[2], s[2] * s[3]});
}

auto max_pool_of(const window_case& c) {
  return [c](const auto& x) { return fx::max_pool2d(x, {c.w[0], c.w[1]}, c.strides, c.pad); };
}
auto avg_pool_of(const window_case& c) {
  return [c](const auto& x) { return fx::avg_pool2d(x, {c.w[0], c.w[1]}, c.strides, c.pad); };
}

// The gradient of sum(f(x)^2 * weight) with respect to x, from an inner tape: its own gradient
// exercises the rules of the gradient ops (second order).
template <class F, class... X>
fx::tensor<double> inner_gradient(const F& f, std::size_t which, const X&... x) {
  fx::gradient_tape tape;
  (tape.watch(x), ...);
  const fx::tensor<double> y = f(x...);
  const fx::tensor<double> loss = fx::reduce_sum(fx::square(y) * test::random_tensor<double>(y.shape(), 99, 0.5, 1.5));
  return tape.gradient(loss, std::vector<const fx::tensor<double>*>{&x...})[which];
}

// Central differences of f along v.
template <class F>
fx::tensor<double> directional_difference(const F& f, const fx::tensor<double>& x, const fx::tensor<double>& v) {
  const double h = 1e-6;
  const fx::tensor<double> up = f(fx::tensor<double>(x + h * v)), down = f(fx::tensor<double>(x - h * v));
  return (up - down) / (2 * h);
}

}  // namespace

TEST_CASE("rules: conv2d with respect to the input and the filters") {
  unsigned seed = 1;
  for (const auto& c : conv_cases) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    const auto w = test::random_tensor<double>(c.w, seed++);
    auto r = check_gradients(conv_of(c), x, w);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

TEST_CASE("rules: conv2d of expressions, and in graph mode") {
  const auto x = test::random_tensor<double>({1, 5, 5, 2}, 3);
  const auto w = test::random_tensor<double>({3, 3, 2, 2}, 4);
  auto r = check_gradients([](const auto& a, const auto& b) { return fx::conv2d(fx::sin(a), b, 2, fx::padding::same); },
                           x, w);
  CHECK_MESSAGE(r.ok, r.report);
  // fx::grad differentiates the expression's type with no tape; it agrees with the tape.
  auto graph = fx::grad([&](const auto& a) { return fx::reduce_sum(fx::conv2d(a, w, 1, fx::padding::same)); })(x);
  auto taped = fx::gradients_function([&](const auto& a) { return fx::conv2d(a, w, 1, fx::padding::same); })(x)[0];
  test::check_close(graph.to_vector(), taped.to_vector(), 1e-12, 1e-12);
}

TEST_CASE("rules: trainable filters are watched when conv2d reads them") {
  const auto x = test::random_tensor<double>({1, 4, 4, 1}, 5);
  fx::variable<double> w(test::random_tensor<double>({2, 2, 1, 1}, 6));
  fx::gradient_tape tape;
  const fx::tensor<double> loss = fx::reduce_sum(fx::conv2d(x, w));
  const fx::tensor<double> dw = tape.gradient(loss, w);
  // d sum(conv) / dw[kh, kw] = the sum of the input under that tap over all valid positions.
  for (int kh = 0; kh < 2; ++kh)
    for (int kw = 0; kw < 2; ++kw) {
      double want = 0;
      for (int oh = 0; oh < 3; ++oh)
        for (int ow = 0; ow < 3; ++ow) want += x(0, oh + kh, ow + kw, 0);
      CHECK(dw(kh, kw, 0, 0) == doctest::Approx(want).epsilon(1e-12));
    }
}

TEST_CASE("rules: float gradients agree with double ones") {
  const auto x = test::random_tensor<double>({2, 6, 5, 2}, 7), w = test::random_tensor<double>({3, 3, 2, 3}, 8);
  auto grads = fx::gradients_function([](const auto& a, const auto& b) {
    return fx::max_pool2d(fx::conv2d(a, b, 1, fx::padding::same), 2, 2);
  });
  const auto in_double = grads(x, w);
  const auto in_float = grads(fx::tensor<float>(fx::cast<float>(x)), fx::tensor<float>(fx::cast<float>(w)));
  for (std::size_t i = 0; i < 2; ++i) {
    const fx::tensor<double> got = fx::cast<double>(in_float[i]);
    test::check_close(got.to_vector(), in_double[i].to_vector(), 1e-4, 1e-5);
  }
}

TEST_CASE("rules: max_pool2d and avg_pool2d") {
  unsigned seed = 10;
  for (const auto& c : pool_cases) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    auto rm = check_gradients(max_pool_of(c), x);
    CHECK_MESSAGE(rm.ok, rm.report);
    auto ra = check_gradients(avg_pool_of(c), x);
    CHECK_MESSAGE(ra.ok, ra.report);
  }
}

TEST_CASE("rules: max_pool2d routes a tie's gradient to the window's first maximum, as TensorFlow") {
  const fx::tensor<double> x = fx::reshape(fx::tensor<double>{1.0, 3.0, 3.0, 2.0}, {1, 2, 2, 1});
  const auto g = fx::gradients_function([](const auto& v) { return fx::max_pool2d(v, 2, 2); })(x)[0];
  CHECK(g.to_vector() == std::vector<double>{0, 1, 0, 0});
}

TEST_CASE("rules: max_pool2d sends a window's gradient to its first NaN") {
  // A NaN beats every number (as reduce_max's rule): window (0, 0) holds NaN at its second and fourth
  // pixels, window (0, 1) at its last; 17 channels cover vector lanes and a remainder.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  auto x = test::random_tensor<double>({1, 4, 4, 17}, 32, -1, 1);
  auto at = [&](fx::index_t h, fx::index_t w, fx::index_t c) -> double& { return x.mutable_data()[(h * 4 + w) * 17 + c]; };
  for (fx::index_t c = 0; c < 17; ++c) at(0, 1, c) = at(1, 1, c) = at(1, 3, c) = nan;
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> s = fx::reduce_sum(fx::max_pool2d(x, 2, 2) * 3.0);
  const auto g = tape.gradient(s, x).to_vector();
  REQUIRE(g.size() == 4 * 4 * 17);
  for (fx::index_t c = 0; c < 17; ++c) {
    CHECK(g[static_cast<std::size_t>((0 * 4 + 1) * 17 + c)] == 3.0);
    CHECK(g[static_cast<std::size_t>((1 * 4 + 1) * 17 + c)] == 0.0);
    CHECK(g[static_cast<std::size_t>((1 * 4 + 3) * 17 + c)] == 3.0);
  }
}

TEST_CASE("rules: second derivatives of conv2d, max_pool2d and avg_pool2d") {
  unsigned seed = 20;
  for (const auto& c : {conv_cases[1], conv_cases[2], conv_cases[4]}) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    const auto w = test::random_tensor<double>(c.w, seed++);
    for (std::size_t which : {0u, 1u}) {
      CAPTURE(which);
      auto r = check_gradients(
          [&](const auto& a, const auto& b) { return inner_gradient(conv_of(c), which, a, b); }, x, w);
      CHECK_MESSAGE(r.ok, r.report);
    }
  }
  for (const auto& c : {pool_cases[0], pool_cases[2]}) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    auto rm = check_gradients([&](const auto& a) { return inner_gradient(max_pool_of(c), 0, a); }, x);
    CHECK_MESSAGE(rm.ok, rm.report);
    auto ra = check_gradients([&](const auto& a) { return inner_gradient(avg_pool_of(c), 0, a); }, x);
    CHECK_MESSAGE(ra.ok, ra.report);
  }
}

TEST_CASE("rules: forward mode of conv2d, max_pool2d and avg_pool2d, and forward over reverse") {
  const window_case c = conv_cases[2], p = pool_cases[2];
  const auto x = test::random_tensor<double>(c.x, 30), w = test::random_tensor<double>(c.w, 31);
  const auto vx = test::random_tensor<double>(c.x, 32), vw = test::random_tensor<double>(c.w, 33);
  {
    fx::forward_accumulator acc;
    acc.watch(x, vx);
    acc.watch(w, vw);
    const fx::tensor<double> y = fx::conv2d(x, w, c.strides, c.pad, c.dilations);
    const double h = 1e-6;
    const fx::tensor<double> fd = (fx::conv2d(fx::tensor<double>(x + h * vx), fx::tensor<double>(w + h * vw),
                                              c.strides, c.pad, c.dilations) -
                                   fx::conv2d(fx::tensor<double>(x - h * vx), fx::tensor<double>(w - h * vw),
                                              c.strides, c.pad, c.dilations)) /
                                  (2 * h);
    test::check_close(acc.jvp(y).to_vector(), fd.to_vector(), 1e-6, 1e-8);
  }
  const auto px = test::random_tensor<double>(p.x, 34), pv = test::random_tensor<double>(p.x, 35);
  for (bool max : {true, false}) {
    CAPTURE(max);
    auto pool = [&](const fx::tensor<double>& a) {
      return max ? fx::tensor<double>(max_pool_of(p)(a)) : fx::tensor<double>(avg_pool_of(p)(a));
    };
    auto [y, t] = fx::jvp(pool, px, pv);
    test::check_close(t.to_vector(), directional_difference(pool, px, pv).to_vector(), 1e-6, 1e-8);
    // Forward over reverse: the tangent of a gradient is a Hessian-vector product.
    auto grad = [&](const fx::tensor<double>& a) { return inner_gradient(pool, 0, a); };
    fx::forward_accumulator acc(px, pv);
    const fx::tensor<double> g = grad(px);
    test::check_close(acc.jvp(g).to_vector(), directional_difference(grad, px, pv).to_vector(), 1e-6, 1e-8);
  }
  auto conv_grad = [&](const fx::tensor<double>& a) { return inner_gradient(conv_of(c), 1, a, w); };
  fx::forward_accumulator acc(x, vx);
  const fx::tensor<double> g = conv_grad(x);
  test::check_close(acc.jvp(g).to_vector(), directional_difference(conv_grad, x, vx).to_vector(), 1e-6, 1e-8);
}

TEST_CASE("rules: conv2d_transpose in both modes and to second order, over every conv geometry") {
  // The transposed convolution is conv2d_input_gradient as an op of its own: x takes the place of
  // conv2d's output, and the filters are (height, width, out, in).
  for (const window_case& c : conv_cases) {
    CAPTURE(describe(c));
    const fx::tensor<double> probe(fx::conv2d(test::random_tensor<double>(c.x, 40), test::random_tensor<double>(c.w, 41),
                                              c.strides, c.pad, c.dilations));
    const fx::shape xs = probe.shape();
    auto transpose = [c, out = c.x](const auto& x, const auto& w) {
      return fx::conv2d_transpose(x, w, out, c.strides, c.pad, c.dilations);
    };
    const auto x = test::random_tensor<double>(xs, 42), w = test::random_tensor<double>(c.w, 43);
    auto r = check_gradients(transpose, x, w);  // reverse and forward mode
    CHECK_MESSAGE(r.ok, r.report);
    auto r2 = check_gradients([&](const auto& a) { return inner_gradient(transpose, 1, a, w); }, x);
    CHECK_MESSAGE(r2.ok, r2.report);
  }
}

TEST_CASE("rules: depthwise_conv2d in both modes and to second order") {
  unsigned seed = 60;
  for (const window_case& c : depthwise_cases) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    const auto w = test::random_tensor<double>(c.w, seed++);
    auto r = check_gradients(depthwise_of(c), x, w);  // reverse and forward mode
    CHECK_MESSAGE(r.ok, r.report);
    for (std::size_t which : {0u, 1u}) {
      CAPTURE(which);
      auto r2 = check_gradients(
          [&](const auto& a, const auto& b) { return inner_gradient(depthwise_of(c), which, a, b); }, x, w);
      CHECK_MESSAGE(r2.ok, r2.report);
    }
  }
}

TEST_CASE("rules: separable_conv2d with respect to the input and both filters") {
  const auto x = test::random_tensor<double>({1, 6, 5, 2}, 70);
  const auto dw = test::random_tensor<double>({3, 3, 2, 2}, 71);
  const auto pw = test::random_tensor<double>({1, 1, 4, 3}, 72);
  auto r = check_gradients(
      [](const auto& a, const auto& b, const auto& p) { return fx::separable_conv2d(a, b, p, 2, fx::padding::same); },
      x, dw, pw);
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("depthwise_conv2d and its gradients equal conv2d's with a block-diagonal filter") {
  // conv2d's kernels are tested on their own (tests/expr/conv.test.cpp and above); here they are
  // the reference for the depthwise input and filter gradients, on shapes big enough for the
  // threaded paths and the filter gradient's chunks.
  unsigned seed = 50;
  for (const auto& c : {window_case{{4, 20, 18, 48}, {3, 3, 48, 1}, 1, 1, fx::padding::same},
                        window_case{{3, 17, 15, 8}, {5, 3, 8, 2}, 2, 1, fx::padding::same},
                        window_case{{2, 16, 16, 20}, {3, 3, 20, 1}, 1, 2, fx::padding::valid}}) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<double>(c.x, seed++);
    const auto w = test::random_tensor<double>(c.w, seed++);
    const auto full = block_diagonal(w);
    fx::gradient_tape tape(fx::persistent);
    tape.watch(x);
    tape.watch(w);
    tape.watch(full);
    const fx::tensor<double> y = fx::depthwise_conv2d(x, w, c.strides, c.pad, c.dilations);
    const fx::tensor<double> z = fx::conv2d(x, full, c.strides, c.pad, c.dilations);
    test::check_close(y.to_vector(), z.to_vector(), 1e-12, 1e-12);
    const auto weight = test::random_tensor<double>(y.shape(), seed++);
    const fx::tensor<double> ly = fx::reduce_sum(y * weight), lz = fx::reduce_sum(z * weight);
    const auto [dx, dw] = tape.gradient(ly, {x, w});
    const auto [dx_full, dfull] = tape.gradient(lz, {x, full});
    REQUIRE(dx.shape() == x.shape());
    REQUIRE(dw.shape() == w.shape());
    test::check_close(dx.to_vector(), dx_full.to_vector(), 1e-12, 1e-12);
    // The depthwise filter gradient is the block diagonal of conv2d's.
    const auto& s = w.shape();
    for (fx::index_t kh = 0; kh < s[0]; ++kh)
      for (fx::index_t kw = 0; kw < s[1]; ++kw)
        for (fx::index_t ch = 0; ch < s[2]; ++ch)
          for (fx::index_t j = 0; j < s[3]; ++j)
            REQUIRE(dw(kh, kw, ch, j) == doctest::Approx(dfull(kh, kw, ch, ch * s[3] + j)).epsilon(1e-12));
  }
}

