// fx::conv2d, fx::max_pool2d and fx::avg_pool2d against direct loops that work out TensorFlow's
// output sizes and padding on their own: shapes, strides, dilations, `same` and `valid`, the
// operand kinds they accept, fusion with what reads them, and the messages of bad input.
#include "../test_util.hpp"

namespace {

struct axis_geometry {
  fx::index_t out, pad_before;
};

// TensorFlow's rule, written out: `valid` fits whole windows, `same` gives ceil(in / stride)
// positions and puts the odd extra padding after.
axis_geometry tf_axis(fx::index_t in, fx::index_t window, fx::index_t stride, fx::index_t dilation, bool same) {
  const fx::index_t span = (window - 1) * dilation + 1;
  if (!same) return {(in - span) / stride + 1, 0};
  const fx::index_t out = (in + stride - 1) / stride;
  const fx::index_t total = std::max<fx::index_t>((out - 1) * stride + span - in, 0);
  return {out, total / 2};
}

struct conv_case {
  fx::shape x, w;
  fx::spatial2d strides, dilations;
  fx::padding pad;
};

struct tap {
  fx::index_t ih, iw, kh, kw;
};

// Appends, for each output element (n, oh, ow, c) in order, f(n, c, the window's taps that fall
// inside the input).
template <class T, class F>
std::vector<T> naive_windows(const fx::shape& xs, fx::index_t kh, fx::index_t kw, fx::spatial2d strides,
                             fx::spatial2d dilations, fx::padding pad, fx::index_t channels, fx::shape& out, F f) {
  const bool same = pad == fx::padding::same;
  const auto gh = tf_axis(xs[1], kh, strides.height, dilations.height, same);
  const auto gw = tf_axis(xs[2], kw, strides.width, dilations.width, same);
  out = fx::shape{xs[0], gh.out, gw.out, channels};
  std::vector<T> y;
  for (fx::index_t n = 0; n < xs[0]; ++n)
    for (fx::index_t oh = 0; oh < gh.out; ++oh)
      for (fx::index_t ow = 0; ow < gw.out; ++ow) {
        std::vector<tap> taps;
        for (fx::index_t i = 0; i < kh; ++i)
          for (fx::index_t j = 0; j < kw; ++j) {
            const fx::index_t ih = oh * strides.height + i * dilations.height - gh.pad_before;
            const fx::index_t iw = ow * strides.width + j * dilations.width - gw.pad_before;
            if (ih >= 0 && iw >= 0 && ih < xs[1] && iw < xs[2]) taps.push_back({ih, iw, i, j});
          }
        for (fx::index_t c = 0; c < channels; ++c) y.push_back(static_cast<T>(f(n, c, taps)));
      }
  return y;
}

template <class T>
std::vector<T> naive_conv2d(const fx::tensor<T>& x, const fx::tensor<T>& w, const conv_case& c, fx::shape& out) {
  const auto& ws = w.shape();
  return naive_windows<T>(x.shape(), ws[0], ws[1], c.strides, c.dilations, c.pad, ws[3], out,
                          [&](fx::index_t n, fx::index_t co, const std::vector<tap>& taps) {
                            double sum = 0;
                            for (const tap& t : taps)
                              for (fx::index_t ci = 0; ci < ws[2]; ++ci)
                                sum += double(x(n, t.ih, t.iw, ci)) * double(w(t.kh, t.kw, ci, co));
                            return sum;
                          });
}

// Max or mean over the window's elements inside the input.
template <class T>
std::vector<T> naive_pool(const fx::tensor<T>& x, fx::spatial2d k, fx::spatial2d st, fx::padding pad, bool max,
                          fx::shape& out) {
  return naive_windows<T>(x.shape(), k.height, k.width, st, 1, pad, x.shape()[3], out,
                          [&](fx::index_t n, fx::index_t c, const std::vector<tap>& taps) {
                            double acc = max ? -INFINITY : 0;
                            for (const tap& t : taps)
                              acc = max ? std::max(acc, double(x(n, t.ih, t.iw, c))) : acc + double(x(n, t.ih, t.iw, c));
                            return max ? acc : acc / double(taps.size());
                          });
}

const std::vector<conv_case> conv_cases = {
    {{2, 5, 5, 3}, {3, 3, 3, 4}, 1, 1, fx::padding::valid},
    {{2, 5, 5, 3}, {3, 3, 3, 4}, 1, 1, fx::padding::same},
    {{1, 7, 6, 2}, {3, 2, 2, 3}, {2, 1}, 1, fx::padding::same},
    {{1, 7, 6, 2}, {3, 2, 2, 3}, 2, 1, fx::padding::valid},
    {{2, 8, 7, 1}, {3, 3, 1, 2}, 1, 2, fx::padding::same},
    {{1, 9, 8, 3}, {2, 3, 3, 2}, 2, {2, 1}, fx::padding::valid},
    {{3, 4, 4, 5}, {1, 1, 5, 2}, 1, 1, fx::padding::valid},  // pointwise
    {{1, 6, 6, 2}, {4, 4, 2, 1}, 3, 1, fx::padding::same},    // even window, uneven padding
};

std::string describe(const conv_case& c) {
  return "x " + fx::to_string(c.x) + ", w " + fx::to_string(c.w) + ", strides " + std::to_string(c.strides.height) +
         "x" + std::to_string(c.strides.width) + ", dilations " + std::to_string(c.dilations.height) + "x" +
         std::to_string(c.dilations.width) + (c.pad == fx::padding::same ? ", same" : ", valid");
}

}  // namespace

TEST_CASE_TEMPLATE("conv2d matches a direct loop over shapes, strides, dilations and padding", T, float, double) {
  unsigned seed = 1;
  for (const auto& c : conv_cases) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<T>(c.x, seed++);
    const auto w = test::random_tensor<T>(c.w, seed++);
    fx::tensor<T> y = fx::conv2d(x, w, c.strides, c.pad, c.dilations);
    fx::shape want_shape;
    const auto want = naive_conv2d(x, w, c, want_shape);
    CHECK(y.shape() == want_shape);
    test::check_close(y.to_vector(), want, std::is_same_v<T, float> ? 1e-5 : 1e-12, 1e-5);
  }
}

TEST_CASE("conv2d: output shapes follow TensorFlow") {
  const fx::tensor<float> x(fx::shape{2, 5, 5, 3}), w(fx::shape{3, 3, 3, 8});
  CHECK(fx::conv2d(x, w).shape() == fx::shape{2, 3, 3, 8});
  CHECK(fx::conv2d(x, w, 1, fx::padding::same).shape() == fx::shape{2, 5, 5, 8});
  CHECK(fx::conv2d(x, w, 2, fx::padding::same).shape() == fx::shape{2, 3, 3, 8});
  CHECK(fx::conv2d(x, w, {2, 1}, fx::padding::valid).shape() == fx::shape{2, 2, 3, 8});
  CHECK(fx::conv2d(x, w, 1, fx::padding::valid, 2).shape() == fx::shape{2, 1, 1, 8});
  CHECK(fx::conv2d(fx::tensor<float>(fx::shape{0, 5, 5, 3}), w).eval().shape() == fx::shape{0, 3, 3, 8});
}

TEST_CASE("conv2d takes expressions and variables, and fuses into what reads it") {
  const auto x = test::random_tensor<double>({2, 6, 5, 2}, 11);
  const auto w = test::random_tensor<double>({3, 3, 2, 3}, 12);
  const conv_case c{x.shape(), w.shape(), 1, 1, fx::padding::same};
  fx::shape s;
  const fx::tensor<double> x2 = x * 2.0;
  const auto want = naive_conv2d(x2, w, c, s);
  fx::variable<double> wv(w);
  fx::tensor<double> from_expr = fx::conv2d(x * 2.0, wv, 1, fx::padding::same);
  test::check_close(from_expr.to_vector(), want, 1e-12, 1e-12);
  fx::tensor<double> fused = fx::relu(fx::conv2d(x2, w, 1, fx::padding::same)) + 1.0;
  std::vector<double> relu_plus_one;
  for (double v : want) relu_plus_one.push_back(std::max(v, 0.0) + 1.0);
  test::check_close(fused.to_vector(), relu_plus_one, 1e-12, 1e-12);
}

TEST_CASE_TEMPLATE("max_pool2d and avg_pool2d match a direct loop", T, float, double) {
  struct pool_case {
    fx::shape x;
    fx::spatial2d k, st;
    fx::padding pad;
  };
  const std::vector<pool_case> cases = {
      {{2, 4, 4, 3}, 2, 2, fx::padding::valid}, {{1, 5, 5, 2}, 2, 2, fx::padding::same},
      {{2, 5, 6, 3}, 3, 1, fx::padding::same},  {{1, 7, 5, 4}, 3, 2, fx::padding::same},
      {{1, 7, 5, 1}, {3, 2}, {2, 1}, fx::padding::valid}, {{2, 3, 3, 17}, 3, 1, fx::padding::same},
  };
  unsigned seed = 20;
  for (const auto& c : cases) {
    CAPTURE(fx::to_string(c.x));
    CAPTURE(c.k.height);
    CAPTURE(c.st.height);
    // All negative: the zeros of `same` padding must not win a max.
    const auto x = test::random_tensor<T>(c.x, seed++, -3, -1);
    fx::shape want_shape;
    fx::tensor<T> ymax = fx::max_pool2d(x, c.k, c.st, c.pad);
    CHECK(ymax.to_vector() == naive_pool(x, c.k, c.st, c.pad, true, want_shape));
    CHECK(ymax.shape() == want_shape);
    fx::tensor<T> yavg = fx::avg_pool2d(x, c.k, c.st, c.pad);
    test::check_close(yavg.to_vector(), naive_pool(x, c.k, c.st, c.pad, false, want_shape),
                      std::is_same_v<T, float> ? 1e-6 : 1e-13, 1e-6);
    CHECK(yavg.shape() == want_shape);
  }
}

TEST_CASE_TEMPLATE("max_pool2d: a NaN is its window's maximum, and the routing picks the first NaN", T, float, double) {
  // As reduce_max, TensorFlow and PyTorch (the gradient: tests/autodiff/rules_conv.test.cpp). One image, 4x4x17 (vector lanes and a remainder), 2x2
  // windows: the window at (0, 0) holds NaN at its second and fourth pixels, the one at (0, 1) at its
  // last, the others none.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  auto x = test::random_tensor<T>({1, 4, 4, 17}, 31, -1, 1);
  auto at = [&](fx::index_t h, fx::index_t w, fx::index_t c) -> T& { return x.mutable_data()[(h * 4 + w) * 17 + c]; };
  for (fx::index_t c = 0; c < 17; ++c) at(0, 1, c) = at(1, 1, c) = at(1, 3, c) = nan;
  fx::tensor<T> y = fx::max_pool2d(x, 2, 2);
  const auto yv = y.to_vector();
  for (fx::index_t i = 0; i < y.size(); ++i) {
    const fx::index_t window = i / 17;
    CHECK(std::isnan(yv[static_cast<std::size_t>(i)]) == (window < 2));
  }
  // The routing's adjoint (max pooling's jvp and second derivatives) picks the same elements.
  const auto geometry = fx::detail::kernels::pool2d_tf_shape(1, 4, 4, 17, 2, 2, 2, 2, fx::detail::kernels::padding_mode::valid);
  std::vector<T> h(static_cast<std::size_t>(x.size())), picked(static_cast<std::size_t>(y.size()));
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = static_cast<T>(i);
  fx::detail::max_pool2d_select(geometry, x.data(), h.data(), picked.data());
  for (fx::index_t c = 0; c < 17; ++c) {
    CHECK(picked[static_cast<std::size_t>(c)] == static_cast<T>((0 * 4 + 1) * 17 + c));
    CHECK(picked[static_cast<std::size_t>(17 + c)] == static_cast<T>((1 * 4 + 3) * 17 + c));
  }
}

TEST_CASE("pooling takes expressions and variables") {
  const auto x = test::random_tensor<float>({1, 4, 4, 2}, 30);
  fx::variable<float> v(x);
  fx::tensor<float> a = fx::max_pool2d(v, 2, 2);
  fx::tensor<float> b = fx::max_pool2d(x * 1.f, 2, 2);
  CHECK(a.to_vector() == b.to_vector());
  fx::tensor<float> c = fx::avg_pool2d(-x, 2, 2) + fx::max_pool2d(x, 2, 2);
  fx::tensor<float> d = fx::max_pool2d(x, 2, 2) - fx::avg_pool2d(x, 2, 2);
  test::check_close(c.to_vector(), d.to_vector(), 1e-6, 1e-6);
}

TEST_CASE("conv2d and pooling: bad input gives clear errors") {
  const fx::tensor<float> x(fx::shape{2, 5, 5, 3}), w(fx::shape{3, 3, 4, 8});
  test::check_throws_with<fx::shape_error>([&] { (void)fx::conv2d(x, w); },
                                           "conv2d: input (2, 5, 5, 3) has 3 channels but filters (3, 3, 4, 8) expect 4");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::conv2d(fx::tensor<float>(fx::shape{5, 5}), w); },
      "conv2d: input must have rank 4 (batch, height, width, channels), got shape (5, 5)");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::conv2d(x, fx::tensor<float>(fx::shape{3, 3, 3})); },
      "conv2d: filters must have rank 4 (height, width, in_channels, out_channels), got shape (3, 3, 3)");
  const fx::tensor<float> w3(fx::shape{3, 3, 3, 8});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::conv2d(x, w3, 0); },
                                                "conv2d: stride = 0 must be at least 1");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::conv2d(x, w3, 1, fx::padding::same, {1, 0}); },
                                                "conv2d: dilation = 0 must be at least 1");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::conv2d(x, w3, 1, fx::padding::valid, 3); },
      "conv2d: with valid padding the window 7x7 of filters (3, 3, 3, 8) at dilation 3x3 is larger than the input "
      "(2, 5, 5, 3)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::conv2d(x, fx::tensor<float>(fx::shape{0, 3, 3, 8})); },
                                           "conv2d: filters (0, 3, 3, 8) have an empty window");
  CHECK(fx::conv2d(x, w3, 1, fx::padding::same, 3).shape() == fx::shape{2, 5, 5, 8});  // same always fits

  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::max_pool2d(fx::tensor<float>(fx::shape{4, 4, 3}), 2, 2); },
      "max_pool2d: input must have rank 4 (batch, height, width, channels), got shape (4, 4, 3)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::avg_pool2d(x, 0, 1); },
                                                "avg_pool2d: window size = 0 must be at least 1");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::max_pool2d(x, 2, {1, -1}); },
                                                "max_pool2d: stride = -1 must be at least 1");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::avg_pool2d(x, {6, 2}, 1); },
                                           "avg_pool2d: with valid padding the window 6x2 is larger than the input "
                                           "(2, 5, 5, 3)");
}
