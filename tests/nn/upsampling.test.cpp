// fx::nn::upsampling2d, zero_padding2d and cropping2d: values against naive loops (double),
// gradients against finite differences, PyTorch's nearest upsampling, static shapes in a sequential
// model (a small U-Net-style decoder), errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <vector>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
const fx::testing::check_options reverse_only{.reverse = true, .forward = false};

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

TEST_CASE("upsampling2d equals PyTorch's nearest interpolation") {
  const fx::tensor<float> x = peer::load("upsampling_x");
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<float> y = nn::upsampling2d<2, 3>{}(x);
  peer::check_close(y, peer::load("upsampling_y"), "y");
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load("upsampling_w"));
  peer::check_close(tape.gradient(s, x), peer::load("upsampling_dx"), "d x");
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
