// fx::nn::upsampling2d (nearest and bilinear), zero_padding2d and cropping2d: values against naive
// loops (double; bilinear against tf.image.resize's half-pixel formula, written out per output
// pixel), gradients against finite differences, PyTorch's nearest and bilinear upsampling, static shapes in a
// sequential model (a small U-Net-style decoder), errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <vector>

#include "peer.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
using test::reverse_only;

/// x (b, h, w, c) at (n, i, j, k), row-major.
double at(const std::vector<double>& v, const fx::shape& s, fx::index_t n, fx::index_t i, fx::index_t j, fx::index_t k) {
  return v[static_cast<std::size_t>(((n * s[1] + i) * s[2] + j) * s[3] + k)];
}
}  // namespace

TEST_CASE("upsampling2d, zero_padding2d, cropping2d: values against naive loops") {
  fx::random::generator gen{71};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4, 2}, gen);
  const auto xv = x.to_vector();
  const fx::shape& s = x.shape();
  {
    const fx::tensor<double> y = nn::upsampling2d<2, 3>{}(x);
    REQUIRE(y.shape() == fx::shape{2, 6, 12, 2});
    const auto yv = y.to_vector();
    for (fx::index_t n = 0; n < 2; ++n)
      for (fx::index_t i = 0; i < 6; ++i)
        for (fx::index_t j = 0; j < 12; ++j)
          for (fx::index_t k = 0; k < 2; ++k) CHECK(at(yv, y.shape(), n, i, j, k) == at(xv, s, n, i / 2, j / 3, k));
  }
  {
    const fx::tensor<double> y = nn::zero_padding2d<1, 2>{}(x);
    REQUIRE(y.shape() == fx::shape{2, 5, 8, 2});
    const auto yv = y.to_vector();
    for (fx::index_t n = 0; n < 2; ++n)
      for (fx::index_t i = 0; i < 5; ++i)
        for (fx::index_t j = 0; j < 8; ++j)
          for (fx::index_t k = 0; k < 2; ++k) {
            const bool inside = i >= 1 && i < 4 && j >= 2 && j < 6;
            CHECK(at(yv, y.shape(), n, i, j, k) == (inside ? at(xv, s, n, i - 1, j - 2, k) : 0.0));
          }
  }
  {
    const fx::tensor<double> y = nn::cropping2d<1, 1>{}(x);
    REQUIRE(y.shape() == fx::shape{2, 1, 2, 2});
    const auto yv = y.to_vector();
    for (fx::index_t n = 0; n < 2; ++n)
      for (fx::index_t j = 0; j < 2; ++j)
        for (fx::index_t k = 0; k < 2; ++k) CHECK(at(yv, y.shape(), n, 0, j, k) == at(xv, s, n, 1, j + 1, k));
  }
}

TEST_CASE("upsampling2d, zero_padding2d, cropping2d: gradients against finite differences") {
  fx::random::generator gen{72};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4, 2}, gen);
  auto r1 = fx::testing::check_gradients([](const auto& v) { return nn::upsampling2d<2, 3>{}(v); }, reverse_only, x);
  CHECK_MESSAGE(r1.ok, r1.report);
  auto r2 = fx::testing::check_gradients([](const auto& v) { return nn::zero_padding2d<1, 2>{}(v); }, reverse_only, x);
  CHECK_MESSAGE(r2.ok, r2.report);
  auto r3 = fx::testing::check_gradients([](const auto& v) { return nn::cropping2d<1, 1>{}(v); }, reverse_only, x);
  CHECK_MESSAGE(r3.ok, r3.report);
  // The upsampled gradient sums each block: all ones give SizeH * SizeW everywhere.
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> y = nn::upsampling2d<2, 3>{}(x);
  CHECK(tape.gradient(fx::tensor<double>(fx::reduce_sum(y)), x).to_vector() == std::vector<double>(x.size(), 6.0));
}

namespace {
/// Bilinear resizing of x (b, h, w, c) to (b, h * sh, w * sw, c) as TensorFlow's resize kernel
/// computes it (half-pixel centers): per output pixel, the four corners around its source point,
/// top = max(floor(s), 0), bottom = min(ceil(s), h - 1), with s - floor(s) as the weight.
std::vector<double> bilinear_reference(const std::vector<double>& x, const fx::shape& s, fx::index_t sh, fx::index_t sw) {
  const fx::index_t oh = s[1] * sh, ow = s[2] * sw;
  std::vector<double> y;
  auto source = [](fx::index_t o, fx::index_t scale, fx::index_t size, fx::index_t& lo, fx::index_t& hi, double& f) {
    const double in = (double(o) + 0.5) / double(scale) - 0.5;
    lo = std::max<fx::index_t>(fx::index_t(std::floor(in)), 0);
    hi = std::min<fx::index_t>(fx::index_t(std::ceil(in)), size - 1);
    f = in - std::floor(in);
  };
  for (fx::index_t n = 0; n < s[0]; ++n)
    for (fx::index_t i = 0; i < oh; ++i)
      for (fx::index_t j = 0; j < ow; ++j)
        for (fx::index_t k = 0; k < s[3]; ++k) {
          fx::index_t top, bottom, left, right;
          double fy, fx_;
          source(i, sh, s[1], top, bottom, fy);
          source(j, sw, s[2], left, right, fx_);
          const double upper = at(x, s, n, top, left, k) + (at(x, s, n, top, right, k) - at(x, s, n, top, left, k)) * fx_;
          const double lower =
              at(x, s, n, bottom, left, k) + (at(x, s, n, bottom, right, k) - at(x, s, n, bottom, left, k)) * fx_;
          y.push_back(upper + (lower - upper) * fy);
        }
  return y;
}
}  // namespace

TEST_CASE("upsampling2d, bilinear: values as TensorFlow's half-pixel resize, gradients against finite differences") {
  fx::random::generator gen{74};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4, 2}, gen);
  {
    const fx::tensor<double> y = nn::upsampling2d<2, 3, nn::bilinear>{}(x);
    REQUIRE(y.shape() == fx::shape{2, 6, 12, 2});
    const auto want = bilinear_reference(x.to_vector(), x.shape(), 2, 3), got = y.to_vector();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  {
    const fx::tensor<double> y = nn::upsampling2d<3, 1, nn::bilinear>{}(x);  // one axis, the other left alone
    const auto want = bilinear_reference(x.to_vector(), x.shape(), 3, 1), got = y.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
  }
  // Scale 1 is the identity; a constant image stays constant (the weights sum to one).
  CHECK(fx::tensor<double>(nn::upsampling2d<1, 1, nn::bilinear>{}(x)).to_vector() == x.to_vector());
  for (double v : fx::tensor<double>(nn::upsampling2d<4, 2, nn::bilinear>{}(fx::full<double>({1, 3, 2, 1}, 1.5))).to_vector())
    CHECK(v == doctest::Approx(1.5).epsilon(1e-15));
  auto r = fx::testing::check_gradients([](const auto& v) { return nn::upsampling2d<2, 3, nn::bilinear>{}(v); },
                                        reverse_only, x);
  CHECK_MESSAGE(r.ok, r.report);
  // Every input's weights over the outputs sum to SizeH * SizeW: the gradient of the sum.
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> y = nn::upsampling2d<2, 3, nn::bilinear>{}(x);
  for (double g : tape.gradient(fx::tensor<double>(fx::reduce_sum(y)), x).to_vector())
    CHECK(g == doctest::Approx(6.0).epsilon(1e-12));
  // In a model: the static shape is the nearest one's.
  auto net = nn::sequential(gen, nn::input<5, 4, 3>{}, nn::upsampling2d<2, 2, nn::bilinear>{}, nn::conv2d<2, 3, nn::same>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<10, 8, 2>>);
  CHECK(net(fx::random::normal<float>({2, 5, 4, 3}, gen)).shape() == fx::shape{2, 10, 8, 2});
}

TEST_CASE("upsampling2d equals PyTorch's nearest interpolation") {
  const fx::tensor<float> x = peer::load("upsampling_x");
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<float> y = nn::upsampling2d<2, 3>{}(x);
  peer::check_close(y, peer::load("upsampling_y"), "y");
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load("upsampling_w"));
  peer::check_close(tape.gradient(s, x), peer::load("upsampling_dx"), "d x");
}

TEST_CASE("upsampling2d, bilinear, equals PyTorch's bilinear interpolation (align_corners=False)") {
  const fx::tensor<float> x = peer::load("upsampling_bilinear_x");
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<float> y = nn::upsampling2d<2, 3, nn::bilinear>{}(x);
  peer::check_close(y, peer::load("upsampling_bilinear_y"), "y");
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load("upsampling_bilinear_w"));
  peer::check_close(tape.gradient(s, x), peer::load("upsampling_bilinear_dx"), "d x");
}

TEST_CASE("upsampling2d, zero_padding2d, cropping2d: static shapes in a decoder, names, errors") {
  fx::random::generator gen{73};
  // (7, 7, 4) -> up 2 -> (14, 14, 4) -> pad 1 -> (16, 16, 4) -> conv 3 valid -> (14, 14, 8)
  // -> crop 2 -> (10, 10, 8) -> conv2d_transpose 3 same 2 -> (20, 20, 1).
  auto net = nn::sequential(gen, nn::input<7, 7, 4>{}, nn::upsampling2d<2>{}, nn::zero_padding2d<1>{},
                            nn::conv2d<8, 3>{}, nn::relu{}, nn::cropping2d<2>{},
                            nn::conv2d_transpose<1, 3, nn::same, 2>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<20, 20, 1>>);
  CHECK(net.layer<0>().name() == "up_sampling2d");
  CHECK(net.layer<1>().name() == "zero_padding2d");
  CHECK(net.layer<4>().name() == "cropping2d");
  const fx::tensor<float> x = fx::random::normal<float>({3, 7, 7, 4}, gen);
  CHECK(net(x).shape() == fx::shape{3, 20, 20, 1});
  fx::gradient_tape tape;
  const fx::tensor<float> loss = fx::reduce_sum(fx::square(net(x, true)));
  for (const auto& g : tape.gradient(loss, net.trainable_variables()))
    CHECK(fx::tensor<float>(fx::reduce_max(fx::abs(g))).item() > 0.f);

  CHECK_THROWS_WITH_AS(nn::upsampling2d<2>{}(fx::zeros<float>({2, 3})),
                       "upsampling2d 'up_sampling2d': expects input of shape (batch, height, width, channels), got (2, 3)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(nn::cropping2d<2>{}(fx::zeros<float>({1, 4, 9, 1})),
                       "cropping2d 'cropping2d': cropping 2 rows and 2 columns from each side leaves nothing of input "
                       "(1, 4, 9, 1)",
                       fx::shape_error);
  CHECK_THROWS_AS(nn::zero_padding2d<1>{}(fx::zeros<float>({2, 3, 4})), fx::shape_error);
}
