// fx::nn::conv2d: gradients against finite differences (double), forward and backward against
// PyTorch (float) for same, strided and dilated convolutions, initialization, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "fused_inference.hpp"
#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
const fx::testing::check_options reverse_only{.reverse = true, .forward = false};

template <class Layer>
void check_layer_gradients(Layer& layer, const fx::shape& input, unsigned seed) {
  fx::random::generator gen{seed};
  layer.build(fx::shape{input[1], input[2], input[3]}, gen);
  const fx::tensor<double> x = fx::random::normal<double>(input, gen);
  const fx::tensor<double> k = layer.kernel().peek(), b = fx::random::normal<double>(layer.bias().shape(), gen);
  auto r = fx::testing::check_gradients(
      [&](const auto& xi, const auto& ki, const auto& bi) {
        layer.kernel().assign(ki);
        layer.bias().assign(bi);
        return layer(xi);
      },
      reverse_only, x, k, b);
  CHECK_MESSAGE(r.ok, r.report);
}

template <class Layer>
void check_peer(Layer& layer, const std::string& prefix) {
  const fx::tensor<float> x = peer::load(prefix + "_x");
  layer.build(fx::shape{x.shape()[1], x.shape()[2], x.shape()[3]});
  layer.kernel().assign(peer::load(prefix + "_kernel"));
  layer.bias().assign(peer::load(prefix + "_bias"));
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<float> y = layer(x);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  auto g = tape.gradient(s, {std::cref(x)});
  peer::check_close(y, peer::load(prefix + "_y"), prefix + " y");
  peer::check_close(g[0], peer::load(prefix + "_dx"), prefix + " dx");
}
}  // namespace

TEST_CASE("conv2d: gradients with respect to the input, kernel and bias") {
  nn::conv2d<3, 3, nn::same, 1, 1, double> same;
  check_layer_gradients(same, {2, 5, 5, 2}, 1);
  nn::conv2d<2, 3, nn::valid, 2, 1, double> strided;
  check_layer_gradients(strided, {1, 7, 6, 3}, 2);
  nn::conv2d<2, 2, nn::valid, 1, 2, double> dilated;
  check_layer_gradients(dilated, {1, 6, 6, 2}, 3);
}

TEST_CASE("conv2d: forward and backward equal PyTorch's") {
  nn::conv2d<4, 3, nn::same> same;
  check_peer(same, "conv_same");
  nn::conv2d<4, 3, nn::valid, 2> strided;
  check_peer(strided, "conv_valid_s2");
  nn::conv2d<4, 3, nn::valid, 1, 2> dilated;
  check_peer(dilated, "conv_dilated");
  // The kernel gradient, for one of them.
  nn::conv2d<4, 3, nn::same> layer;
  const fx::tensor<float> x = peer::load("conv_same_x");
  layer(x);
  layer.kernel().assign(peer::load("conv_same_kernel"));
  layer.bias().assign(peer::load("conv_same_bias"));
  fx::gradient_tape tape;
  fx::tensor<float> s = fx::reduce_sum(layer(x) * peer::load("conv_same_w"));
  auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(g[0], peer::load("conv_same_dkernel"), "d kernel");
  peer::check_close(g[1], peer::load("conv_same_dbias"), "d bias");
}

TEST_CASE("conv2d: glorot-uniform kernel, zero bias, clear errors") {
  fx::random::generator gen{9};
  nn::conv2d<8, 5, nn::same> layer;
  layer.build(fx::shape{12, 12, 3}, gen);
  CHECK(layer.kernel().shape() == fx::shape{5, 5, 3, 8});
  const double limit = std::sqrt(6.0 / (25 * 3 + 25 * 8));
  double sum = 0, sum_sq = 0;
  const auto k = layer.kernel().peek().to_vector();
  for (float v : k) {
    CHECK(std::abs(v) <= limit);
    sum += v, sum_sq += double(v) * v;
  }
  // U(-l, l) has variance l^2 / 3.
  CHECK(sum_sq / k.size() == doctest::Approx(limit * limit / 3).epsilon(0.1));
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(8, 0.f));
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 12, 12, 4})),
                       "conv2d 'conv2d': the input has 4 channels, the layer was built for 3 (input shape (2, 12, 12, 4))",
                       fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({12, 12, 3})), fx::shape_error);
}

TEST_CASE_TEMPLATE("conv2d: inference applies bias and relu in the kernel, with the taped statement's numbers", T,
                   float, double) {
  // One shape per kernel path: direct (32 filters, rows of 14 or more), Winograd (5x5 over many
  // tiles), single input channel, im2col (stride 2, 24 filters), pointwise (1x1).
  auto check = [](auto layer, fx::shape in) {
    fx::random::generator gen{5};
    layer.build(fx::shape{in[1], in[2], in[3]}, gen);
    layer.bias().assign(fx::random::normal<T>(layer.bias().shape(), gen));
    fused_inference::check_matches_taped(layer, fx::random::normal<T>(in, gen));
  };
  check(nn::conv2d<64, 5, nn::same, 1, 1, T>{}, {1, 14, 14, 32});
  check(nn::conv2d<32, 5, nn::same, 1, 1, T>{}, {1, 28, 28, 1});
  check(nn::conv2d<32, 5, nn::same, 1, 1, T>{}, {4, 28, 28, 8});
  check(nn::conv2d<24, 3, nn::valid, 2, 1, T>{}, {3, 9, 9, 5});
  check(nn::conv2d<16, 1, nn::valid, 1, 1, T>{}, {2, 5, 5, 8});
}
