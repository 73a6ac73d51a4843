// fx::conv2d_transpose and fx::nn::conv2d_transpose: a naive scatter loop (double), the adjoint of
// conv2d for every padding, stride and dilation (<conv2d_transpose(x, w), z> = <x, conv2d(z, w)>),
// gradients against finite differences (double), PyTorch's ConvTranspose2d (float: output and the
// gradients of input, kernel and bias), Keras's output sizes and parameter counts, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#define FLUXION_MAX_DERIVATIVE_ORDER 2  // the second derivatives' case
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <vector>

#include "kernel_layer_check.hpp"
#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// The transposed convolution with valid padding by its definition: every input pixel scatters
/// its channels through the kernel into the output, at stride s and dilation d.
std::vector<double> naive_transpose(const fx::tensor<double>& x, const fx::tensor<double>& w, fx::index_t s,
                                    fx::index_t d) {
  const auto xv = x.to_vector(), wv = w.to_vector();
  const fx::index_t n = x.shape()[0], h = x.shape()[1], wd = x.shape()[2], c = x.shape()[3];
  const fx::index_t kh = w.shape()[0], kw = w.shape()[1], o = w.shape()[2];
  const fx::index_t span_h = d * (kh - 1) + 1, span_w = d * (kw - 1) + 1;
  const fx::index_t oh = h * s + std::max<fx::index_t>(span_h - s, 0), ow = wd * s + std::max<fx::index_t>(span_w - s, 0);
  std::vector<double> out(static_cast<std::size_t>(n * oh * ow * o), 0.0);
  for (fx::index_t b = 0; b < n; ++b)
    for (fx::index_t i = 0; i < h; ++i)
      for (fx::index_t j = 0; j < wd; ++j)
        for (fx::index_t ci = 0; ci < c; ++ci)
          for (fx::index_t a = 0; a < kh; ++a)
            for (fx::index_t e = 0; e < kw; ++e)
              for (fx::index_t co = 0; co < o; ++co)
                out[static_cast<std::size_t>(((b * oh + i * s + a * d) * ow + j * s + e * d) * o + co)] +=
                    xv[static_cast<std::size_t>(((b * h + i) * wd + j) * c + ci)] *
                    wv[static_cast<std::size_t>(((a * kw + e) * o + co) * c + ci)];
  return out;
}

double dot(const fx::tensor<double>& a, const fx::tensor<double>& b) {
  return fx::tensor<double>(fx::reduce_sum(a * b)).item();
}

}  // namespace

TEST_CASE("conv2d_transpose: valid padding is the scatter loop; every geometry is conv2d's adjoint") {
  fx::random::generator gen{61};
  for (auto [stride_, dilation_, kernel_] : {std::tuple{1, 1, 3}, {2, 1, 3}, {3, 1, 2}, {1, 2, 3}, {2, 1, 1}}) {
    const auto& stride = stride_, &dilation = dilation_, &kernel = kernel_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(stride);
    CAPTURE(dilation);
    CAPTURE(kernel);
    const fx::tensor<double> x = fx::random::normal<double>({2, 4, 5, 3}, gen);
    const fx::tensor<double> w = fx::random::normal<double>({kernel, kernel, 2, 3}, gen);
    for (fx::padding pad : {fx::padding::valid, fx::padding::same}) {
      CAPTURE(pad == fx::padding::same);
      const fx::tensor<double> y = fx::conv2d_transpose(x, w, stride, pad, dilation);
      // Keras's extents: same in * s; valid in * s + max(span - s, 0).
      const fx::index_t span = dilation * (kernel - 1) + 1;
      const fx::index_t extra = pad == fx::padding::same ? 0 : std::max<fx::index_t>(span - stride, 0);
      CHECK(y.shape() == fx::shape{2, 4 * stride + extra, 5 * stride + extra, 2});
      if (pad == fx::padding::valid) {
        const auto want = naive_transpose(x, w, stride, dilation), got = y.to_vector();
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
      }
      // <conv2d_transpose(x, w), z> = <x, conv2d(z, w)> for any z of the output's shape.
      const fx::tensor<double> z = fx::random::normal<double>(y.shape(), gen);
      const fx::tensor<double> cz = fx::conv2d(z, w, stride, pad, dilation);
      REQUIRE(cz.shape() == x.shape());
      CHECK(dot(y, z) == doctest::Approx(dot(x, cz)).epsilon(1e-12));
    }
  }
  // TensorFlow's output_shape: any extent that conv2d maps back to the input's.
  const fx::tensor<double> x = fx::random::normal<double>({1, 3, 3, 2}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({3, 3, 1, 2}, gen);
  const fx::tensor<double> y = fx::conv2d_transpose(x, w, fx::shape{1, 8, 7, 1}, 2, fx::padding::valid);
  CHECK(y.shape() == fx::shape{1, 8, 7, 1});
  const fx::tensor<double> z = fx::random::normal<double>(y.shape(), gen);
  CHECK(dot(y, z) == doctest::Approx(dot(x, fx::conv2d(z, w, 2, fx::padding::valid))).epsilon(1e-12));
}

TEST_CASE("conv2d_transpose: gradients of the op and of the layer against finite differences") {
  fx::random::generator gen{62};
  const fx::tensor<double> x = fx::random::normal<double>({1, 3, 4, 2}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({2, 3, 3, 2}, gen);
  auto r = fx::testing::check_gradients(
      [](const auto& xi, const auto& wi) { return fx::conv2d_transpose(xi, wi, {2, 1}, fx::padding::same); },
      fx::testing::check_options{.reverse = true, .forward = false}, x, w);
  CHECK_MESSAGE(r.ok, r.report);
  nn::conv2d_transpose<2, 3, nn::same, 2, 1, double> strided;
  kernel_layer_check::check_layer_gradients(strided, {2, 3, 3, 2}, 63);
  nn::conv2d_transpose<3, 2, nn::valid, 1, 2, double> dilated;
  kernel_layer_check::check_layer_gradients(dilated, {1, 3, 4, 2}, 64);
}

TEST_CASE("conv2d_transpose: second derivatives through nested tapes") {
  // d/dx of sum(d sum(y^2) / dw * v): the gradient's gradient is again a window op.
  fx::random::generator gen{65};
  const fx::tensor<double> x = fx::random::normal<double>({1, 3, 3, 2}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({3, 3, 2, 2}, gen);
  const fx::tensor<double> v = fx::random::normal<double>(w.shape(), gen);
  auto first = [&](const fx::tensor<double>& at) {
    fx::gradient_tape tape;
    tape.watch(w);
    const fx::tensor<double> y = fx::conv2d_transpose(at, w, 2, fx::padding::same);
    return tape.gradient(fx::tensor<double>(fx::reduce_sum(fx::square(y))), w);
  };
  fx::gradient_tape outer;
  outer.watch(x);
  const fx::tensor<double> g = first(x);
  const std::vector<double> second = outer.gradient(fx::tensor<double>(fx::reduce_sum(g * v)), x).to_vector();
  const auto xs = x.to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    auto at = [&](double d) {
      std::vector<double> p = xs;
      p[i] += d;
      return dot(first(fx::from_vector(p, x.shape())), v);
    };
    CHECK(second[i] == doctest::Approx((at(1e-5) - at(-1e-5)) / 2e-5).epsilon(1e-6));
  }
}

TEST_CASE_TEMPLATE("conv2d_transpose: forward and backward equal PyTorch's ConvTranspose2d", L,
                   nn::conv2d_transpose<2, 3, nn::valid, 2>, nn::conv2d_transpose<2, 3, nn::valid, 1, 2>) {
  const std::string prefix = std::is_same_v<L, nn::conv2d_transpose<2, 3, nn::valid, 2>> ? "conv_transpose_strided"
                                                                                         : "conv_transpose_dilated";
  const fx::tensor<float> x = peer::load(prefix + "_x");
  L layer;
  layer.build(fx::shape{4, 5, 3});
  layer.kernel().assign(peer::load(prefix + "_kernel"));
  layer.bias().assign(peer::load(prefix + "_bias"));
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  const fx::tensor<float> y = layer(x);
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  peer::check_close(y, peer::load(prefix + "_y"), "y");
  peer::check_close(tape.gradient(s, x), peer::load(prefix + "_dx"), "d x");
  const auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(g[0], peer::load(prefix + "_dkernel"), "d kernel");
  peer::check_close(g[1], peer::load(prefix + "_dbias"), "d bias");
}

TEST_CASE("conv2d_transpose: Keras's shapes and parameters in a sequential model, initializers, errors") {
  fx::random::generator gen{66};
  // A decoder: (7, 7, 4) -> (14, 14, 8) -> (17, 17, 1).
  auto net = nn::sequential(gen, nn::input<7, 7, 4>{}, nn::conv2d_transpose<8, 3, nn::same, 2>{}, nn::relu{},
                            nn::conv2d_transpose<1, 4>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<17, 17, 1>>);
  static_assert(std::is_same_v<decltype(nn::conv2d_transpose<5, 2, nn::valid, 3>::output_shape(nn::static_shape<4, 6, 2>{})),
                               nn::static_shape<12, 18, 5>>);  // a kernel smaller than the stride: in * s
  CHECK(net.summary() ==
        "layer                      output shape          params\n"
        "conv2d_transpose           (batch, 14, 14, 8)    296\n"
        "relu                       (batch, 14, 14, 8)    0\n"
        "conv2d_transpose_1         (batch, 17, 17, 1)    129\n"
        "total trainable parameters: 425\n");
  CHECK(net.layer<0>().kernel().shape() == fx::shape{3, 3, 8, 4});  // (height, width, out, in)
  const float limit = std::sqrt(6.f / (3 * 3 * 8 + 3 * 3 * 4));
  for (float v : net.layer<0>().kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  CHECK(net.layer<0>().bias().peek().to_vector() == std::vector<float>(8, 0.f));
  const fx::tensor<float> x = fx::random::normal<float>({2, 7, 7, 4}, gen);
  CHECK(net(x).shape() == fx::shape{2, 17, 17, 1});

  auto& layer = net.layer<0>();
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 7, 7, 3})),
                       "conv2d_transpose 'conv2d_transpose': the input has 3 channels, the layer was built for 4 (input "
                       "shape (2, 7, 7, 3))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 7, 7})),
                       "conv2d_transpose 'conv2d_transpose': expects input of shape (batch, height, width, channels), "
                       "got (2, 7, 7)",
                       fx::shape_error);
  const fx::tensor<float> xs = fx::zeros<float>({2, 4, 5, 3});
  CHECK_THROWS_WITH_AS(fx::conv2d_transpose(xs, fx::zeros<float>({3, 3, 3, 2})),
                       "conv2d_transpose: input (2, 4, 5, 3) has 3 channels but filters (3, 3, 3, 2) expect 2 (their "
                       "last axis; a transposed convolution's filters are (height, width, out, in))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::conv2d_transpose(xs, fx::zeros<float>({3, 3, 2, 3}), fx::shape{2, 30, 11, 2}, 2),
                       "conv2d_transpose: an output of 30x11 cannot come from input (2, 4, 5, 3): conv2d with filters "
                       "(3, 3, 2, 3), strides 2x2 and valid padding maps it to 14x5, not 4x5",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::conv2d_transpose(xs, fx::zeros<float>({3, 3, 2, 3}), fx::shape{2, 9, 11, 5}, 2),
                       "conv2d_transpose: output_shape (2, 9, 11, 5) must be (batch 2, height, width, out_channels 2)",
                       fx::shape_error);
  CHECK_THROWS_AS(fx::conv2d_transpose(xs, fx::zeros<float>({3, 3, 2, 3}), fx::shape{2, 2, 2, 2}, 2), fx::shape_error);
  CHECK_THROWS_AS(fx::conv2d_transpose(xs, fx::zeros<float>({3, 3, 2, 3}), 0), fx::invalid_argument);
}
