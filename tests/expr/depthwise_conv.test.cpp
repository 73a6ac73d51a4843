// fx::depthwise_conv2d and fx::separable_conv2d against a direct loop that works out TensorFlow's
// output sizes and padding on its own, and against fx::conv2d with a block-diagonal filter (which
// tests the gradient kernels against conv2d's); multipliers, strides, dilations, `same` and
// `valid`, bitwise results for any thread count, and the messages of bad input.
#include "../test_util.hpp"

#include <fluxion/tensor/creation.hpp>

namespace {

struct depthwise_case {
  fx::shape x, w;  // w: (height, width, channels, multiplier)
  fx::spatial2d strides, dilations;
  fx::padding pad;
};

std::string describe(const depthwise_case& c) {
  return "x " + fx::to_string(c.x) + ", w " + fx::to_string(c.w) + ", strides " + std::to_string(c.strides.height) +
         "x" + std::to_string(c.strides.width) + ", dilations " + std::to_string(c.dilations.height) + "x" +
         std::to_string(c.dilations.width) + (c.pad == fx::padding::same ? ", same" : ", valid");
}

const std::vector<depthwise_case> cases = {
    {{2, 5, 5, 3}, {3, 3, 3, 1}, 1, 1, fx::padding::valid},
    {{2, 5, 5, 3}, {3, 3, 3, 1}, 1, 1, fx::padding::same},
    {{1, 7, 6, 17}, {3, 2, 17, 1}, {2, 1}, 1, fx::padding::same},  // vector lanes and a remainder
    {{1, 7, 6, 2}, {3, 3, 2, 2}, 2, 1, fx::padding::valid},        // multiplier 2
    {{2, 8, 7, 4}, {3, 3, 4, 3}, 1, 2, fx::padding::same},         // multiplier 3, dilation
    {{1, 9, 8, 32}, {2, 3, 32, 1}, 2, {2, 1}, fx::padding::valid}, // stride and dilation together
    {{1, 6, 6, 5}, {4, 4, 5, 1}, 3, 1, fx::padding::same},         // even window, uneven padding
};

// TensorFlow's output size and padding before, for one axis.
std::pair<fx::index_t, fx::index_t> tf_axis(fx::index_t in, fx::index_t k, fx::index_t stride, fx::index_t dilation,
                                            bool same) {
  const fx::index_t span = (k - 1) * dilation + 1;
  if (!same) return {(in - span) / stride + 1, 0};
  const fx::index_t out = (in + stride - 1) / stride;
  return {out, std::max<fx::index_t>((out - 1) * stride + span - in, 0) / 2};
}

template <class T>
std::vector<T> naive_depthwise(const fx::tensor<T>& x, const fx::tensor<T>& w, const depthwise_case& c,
                               fx::shape& out) {
  const auto& xs = x.shape();
  const auto& ws = w.shape();
  const bool same = c.pad == fx::padding::same;
  const auto [oh_n, pt] = tf_axis(xs[1], ws[0], c.strides.height, c.dilations.height, same);
  const auto [ow_n, pl] = tf_axis(xs[2], ws[1], c.strides.width, c.dilations.width, same);
  out = fx::shape{xs[0], oh_n, ow_n, xs[3] * ws[3]};
  std::vector<T> y;
  for (fx::index_t n = 0; n < xs[0]; ++n)
    for (fx::index_t oh = 0; oh < oh_n; ++oh)
      for (fx::index_t ow = 0; ow < ow_n; ++ow)
        for (fx::index_t ch = 0; ch < xs[3]; ++ch)
          for (fx::index_t j = 0; j < ws[3]; ++j) {
            double sum = 0;
            for (fx::index_t kh = 0; kh < ws[0]; ++kh)
              for (fx::index_t kw = 0; kw < ws[1]; ++kw) {
                const fx::index_t ih = oh * c.strides.height - pt + kh * c.dilations.height;
                const fx::index_t iw = ow * c.strides.width - pl + kw * c.dilations.width;
                if (ih >= 0 && iw >= 0 && ih < xs[1] && iw < xs[2])
                  sum += double(x(n, ih, iw, ch)) * double(w(kh, kw, ch, j));
              }
            y.push_back(static_cast<T>(sum));
          }
  return y;
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

}  // namespace

TEST_CASE_TEMPLATE("depthwise_conv2d matches a direct loop over shapes, multipliers, strides, dilations and padding",
                   T, float, double) {
  unsigned seed = 1;
  for (const auto& c : cases) {
    CAPTURE(describe(c));
    const auto x = test::random_tensor<T>(c.x, seed++);
    const auto w = test::random_tensor<T>(c.w, seed++);
    fx::tensor<T> y = fx::depthwise_conv2d(x, w, c.strides, c.pad, c.dilations);
    fx::shape want_shape;
    const auto want = naive_depthwise(x, w, c, want_shape);
    CHECK(y.shape() == want_shape);
    test::check_close(y.to_vector(), want, std::is_same_v<T, float> ? 1e-5 : 1e-12, 1e-5);
  }
}

TEST_CASE("depthwise_conv2d and its gradients equal conv2d's with a block-diagonal filter") {
  // conv2d's kernels are tested on their own (conv.test.cpp, rules_conv.test.cpp); here they are
  // the reference for the depthwise input and filter gradients, on shapes big enough for the
  // threaded paths and the filter gradient's chunks.
  unsigned seed = 50;
  for (const auto& c : {depthwise_case{{4, 20, 18, 48}, {3, 3, 48, 1}, 1, 1, fx::padding::same},
                        depthwise_case{{3, 17, 15, 8}, {5, 3, 8, 2}, 2, 1, fx::padding::same},
                        depthwise_case{{2, 16, 16, 20}, {3, 3, 20, 1}, 1, 2, fx::padding::valid}}) {
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

TEST_CASE_TEMPLATE("depthwise_conv2d: forward and gradients are bitwise the same for any thread count", T, float,
                   double) {
  const depthwise_case c{{8, 24, 24, 35}, {3, 3, 35, 1}, 1, 1, fx::padding::same};
  const depthwise_case c2{{4, 20, 20, 6}, {3, 3, 6, 2}, 2, 1, fx::padding::same};
  for (const auto& cs : {c, c2}) {
    CAPTURE(describe(cs));
    const auto x = test::random_tensor<T>(cs.x, 70), w = test::random_tensor<T>(cs.w, 71);
    auto run = [&] {
      fx::gradient_tape tape;
      tape.watch(x);
      tape.watch(w);
      const fx::tensor<T> y = fx::depthwise_conv2d(x, w, cs.strides, cs.pad, cs.dilations);
      const fx::tensor<T> loss = fx::reduce_sum(fx::square(y));
      auto [dx, dw] = tape.gradient(loss, {x, w});
      return std::vector<std::vector<T>>{y.to_vector(), dx.to_vector(), dw.to_vector()};
    };
    const int threads = fx::get_num_threads();
    fx::set_num_threads(1);
    const auto one = run();
    fx::set_num_threads(2);
    const auto two = run();
    fx::set_num_threads(threads);
    for (std::size_t i = 0; i < one.size(); ++i) CHECK(one[i] == two[i]);
  }
}

TEST_CASE("separable_conv2d is a depthwise convolution, then a 1x1 conv2d") {
  const auto x = test::random_tensor<float>({2, 9, 8, 6}, 80);
  const auto dw = test::random_tensor<float>({3, 3, 6, 2}, 81);
  const auto pw = test::random_tensor<float>({1, 1, 12, 5}, 82);
  fx::tensor<float> y = fx::separable_conv2d(x, dw, pw, 2, fx::padding::same);
  CHECK(y.shape() == fx::shape{2, 5, 4, 5});
  const fx::tensor<float> d = fx::depthwise_conv2d(x, dw, 2, fx::padding::same);
  fx::tensor<float> want = fx::conv2d(d, pw);
  CHECK(y.to_vector() == want.to_vector());
}

TEST_CASE("depthwise_conv2d takes expressions and variables, and fuses into what reads it") {
  const auto x = test::random_tensor<double>({2, 6, 5, 3}, 90);
  const auto w = test::random_tensor<double>({3, 3, 3, 2}, 91);
  const depthwise_case c{x.shape(), w.shape(), 1, 1, fx::padding::same};
  const fx::tensor<double> x2 = x * 2.0;
  fx::shape s;
  const auto want = naive_depthwise(x2, w, c, s);
  fx::variable<double> wv(w);
  fx::tensor<double> from_expr = fx::depthwise_conv2d(x * 2.0, wv, 1, fx::padding::same);
  test::check_close(from_expr.to_vector(), want, 1e-12, 1e-12);
  fx::tensor<double> fused = fx::relu(fx::depthwise_conv2d(x2, w, 1, fx::padding::same)) + 1.0;
  std::vector<double> relu_plus_one;
  for (double v : want) relu_plus_one.push_back(std::max(v, 0.0) + 1.0);
  test::check_close(fused.to_vector(), relu_plus_one, 1e-12, 1e-12);
  CHECK(fx::depthwise_conv2d(fx::tensor<float>(fx::shape{0, 5, 5, 3}), fx::tensor<float>(fx::shape{3, 3, 3, 1}))
            .eval()
            .shape() == fx::shape{0, 3, 3, 3});
}

TEST_CASE("depthwise_conv2d and separable_conv2d: bad input gives clear errors") {
  const fx::tensor<float> x(fx::shape{2, 5, 5, 3});
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::depthwise_conv2d(x, fx::tensor<float>(fx::shape{3, 3, 4, 1})); },
      "depthwise_conv2d: input (2, 5, 5, 3) has 3 channels but filters (3, 3, 4, 1) expect 4 (their third axis; a "
      "depthwise filter is (height, width, in_channels, channel_multiplier))");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::depthwise_conv2d(fx::tensor<float>(fx::shape{5, 5, 3}), fx::tensor<float>(fx::shape{3, 3, 3, 1})); },
      "depthwise_conv2d: input must have rank 4 (batch, height, width, channels), got shape (5, 5, 3)");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::depthwise_conv2d(x, fx::tensor<float>(fx::shape{3, 3, 3})); },
      "depthwise_conv2d: filters must have rank 4 (height, width, in_channels, channel_multiplier), got shape (3, 3, "
      "3)");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::depthwise_conv2d(x, fx::tensor<float>(fx::shape{3, 3, 3, 0})); },
      "depthwise_conv2d: filters (3, 3, 3, 0) have a channel multiplier of 0");
  const fx::tensor<float> w(fx::shape{3, 3, 3, 1});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::depthwise_conv2d(x, w, 0); },
                                                "depthwise_conv2d: stride = 0 must be at least 1");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::depthwise_conv2d(x, w, 1, fx::padding::valid, 3); },
      "depthwise_conv2d: with valid padding the window 7x7 of filters (3, 3, 3, 1) at dilation 3x3 is larger than "
      "the input (2, 5, 5, 3)");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::separable_conv2d(x, fx::tensor<float>(fx::shape{3, 3, 3, 2}), fx::tensor<float>(fx::shape{1, 1, 3, 4})); },
      "separable_conv2d: pointwise filters (1, 1, 3, 4) must be (1, 1, 6, out_channels): the depthwise step makes 6 "
      "channels (in_channels * channel_multiplier)");
}
