// fx::depthwise_conv2d and fx::separable_conv2d against a direct loop that works out TensorFlow's
// output sizes and padding on its own: multipliers, strides, dilations, `same` and `valid`, bitwise
// results for any thread count, and the messages of bad input. The gradients (against conv2d's with
// a block-diagonal filter, and finite differences) are in tests/autodiff/rules_conv.test.cpp.
#include "../test_util.hpp"

#include <fluxion/tensor/creation.hpp>

// A named namespace around the whole file: test files that share flags compile as one translation
// unit (cmake/tests.cmake), where conv.test.cpp's anonymous namespace has helpers of the same names.
namespace depthwise_conv_test {

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

TEST_CASE_TEMPLATE("depthwise_conv2d: forward and gradient kernels are bitwise the same for any thread count", T,
                   float, double) {
  // The kernels themselves (these tests build without autodiff; the tape's gradients are checked
  // in tests/autodiff/rules_conv.test.cpp), on shapes large enough for the threaded paths and the
  // filter gradient's chunks.
  namespace k = fx::detail::kernels;
  for (const auto& s : {k::depthwise2d_tf_shape(8, 24, 24, 35, 3, 3, 1, k::padding_mode::same),
                        k::depthwise2d_tf_shape(4, 20, 20, 6, 3, 3, 2, k::padding_mode::same, 2, 2)}) {
    CAPTURE(s.channels);
    const auto x = test::random_tensor<T>({s.batch, s.in_h, s.in_w, s.channels}, 70).to_vector();
    const auto w = test::random_tensor<T>({s.filter_h, s.filter_w, s.channels, s.multiplier}, 71).to_vector();
    const auto dy = test::random_tensor<T>({s.batch, s.out_h, s.out_w, s.out_c()}, 72).to_vector();
    auto run = [&] {
      std::vector<T> y(static_cast<std::size_t>(s.output_size())), dx(x.size()), dw(w.size());
      k::depthwise_conv2d_forward<T>(s, x.data(), w.data(), y.data());
      k::depthwise_conv2d_backward_input<T>(s, dy.data(), w.data(), dx.data());
      k::depthwise_conv2d_backward_filter<T>(s, x.data(), dy.data(), dw.data());
      return std::vector<std::vector<T>>{y, dx, dw};
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

TEST_CASE_TEMPLATE("depthwise_conv2d: the sliding window (stride 1, filters 3, 5 and 7 wide) adds the same taps in the same order",
                   T, float, double) {
  // A loop of std::fma over the taps inside the input, in (kh, kw) order from zero: the order of
  // every path of the kernels, so the results are equal to the bit. Widths narrower than the
  // filter, than a block of 8 outputs, and with a block left over; channels with and without a
  // remainder of the vector width; `same` and `valid`; the even and 1-wide filters that take the
  // other path.
  namespace k = fx::detail::kernels;
  auto check = [](const k::depthwise2d_shape& s) {
    CAPTURE(s.in_w);
    CAPTURE(s.channels);
    CAPTURE(s.filter_w);
    CAPTURE(s.out_w);
    const auto x = test::random_tensor<T>({s.batch, s.in_h, s.in_w, s.channels}, 80).to_vector();
    const auto w = test::random_tensor<T>({s.filter_h, s.filter_w, s.channels, 1}, 81).to_vector();
    const auto dy = test::random_tensor<T>({s.batch, s.out_h, s.out_w, s.channels}, 82).to_vector();
    std::vector<T> y(static_cast<std::size_t>(s.output_size())), dx(x.size());
    k::depthwise_conv2d_forward<T>(s, x.data(), w.data(), y.data());
    k::depthwise_conv2d_backward_input<T>(s, dy.data(), w.data(), dx.data());
    const fx::index_t c = s.channels;
    // The elements of `got` (got_h x got_w pixels) that differ from the fma loop over `src`: pixel
    // (gh, gw)'s tap (kh, kw) reads source pixel (gh + sign * kh - sign * pad_top, gw + sign * kw -
    // sign * pad_left), +1 for the forward pass, -1 for the input gradient.
    auto wrong = [&](const std::vector<T>& src, fx::index_t src_h, fx::index_t src_w, const std::vector<T>& got,
                     fx::index_t got_h, fx::index_t got_w, fx::index_t sign) {
      std::size_t differ = 0;
      for (fx::index_t n = 0; n < s.batch; ++n)
        for (fx::index_t gh = 0; gh < got_h; ++gh)
          for (fx::index_t gw = 0; gw < got_w; ++gw)
            for (fx::index_t ch = 0; ch < c; ++ch) {
              T sum = 0;
              for (fx::index_t kh = 0; kh < s.filter_h; ++kh)
                for (fx::index_t kw = 0; kw < s.filter_w; ++kw) {
                  const fx::index_t h = gh + sign * (kh - s.pad_top), w_ = gw + sign * (kw - s.pad_left);
                  if (h < 0 || h >= src_h || w_ < 0 || w_ >= src_w) continue;
                  sum = std::fma(src[static_cast<std::size_t>(((n * src_h + h) * src_w + w_) * c + ch)],
                                 w[static_cast<std::size_t>((kh * s.filter_w + kw) * c + ch)], sum);
                }
              differ += sum != got[static_cast<std::size_t>(((n * got_h + gh) * got_w + gw) * c + ch)];
            }
      return differ;
    };
    const std::size_t forward_wrong = wrong(x, s.in_h, s.in_w, y, s.out_h, s.out_w, 1);
    const std::size_t input_wrong = wrong(dy, s.out_h, s.out_w, dx, s.in_h, s.in_w, -1);
    CHECK(forward_wrong == 0);
    CHECK(input_wrong == 0);
  };
  for (fx::index_t filter : {1, 2, 3, 4, 5, 7})
    for (fx::index_t width : {1, 2, 5, 7, 8, 9, 14, 17})
      for (fx::index_t channels : {1, 17, 64}) {
        check(k::depthwise2d_tf_shape(2, 5, width, channels, filter > 3 ? 5 : 3, filter, 1, k::padding_mode::same));
        if (width >= filter)
          check(k::depthwise2d_tf_shape(1, 6, width, channels, 3, filter, 1, k::padding_mode::valid));
      }
  // A pixel of 2 KiB (MobileNet's 512 floats): on AVX2 the 3-wide window's blocks of two vectors
  // (slide_row), a whole block and one left over along the row.
  const auto line_channels = static_cast<fx::index_t>(2048 / sizeof(T));
  for (fx::index_t width : {3, 4, 6, 14})
    for (fx::index_t channels : {line_channels, 2 * line_channels}) {
      check(k::depthwise2d_tf_shape(1, 4, width, channels, 3, 3, 1, k::padding_mode::same));
      check(k::depthwise2d_tf_shape(1, 5, width, channels, 3, 3, 1, k::padding_mode::valid));
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

}  // namespace depthwise_conv_test
