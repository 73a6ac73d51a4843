// fx::nn::conv2d: gradients against finite differences (double), forward and backward against
// PyTorch (float) for same, strided and dilated convolutions, initialization, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "fused_inference.hpp"
#include "kernel_layer_check.hpp"
#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
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
  kernel_layer_check::check_layer_gradients(same, {2, 5, 5, 2}, 1);
  nn::conv2d<2, 3, nn::valid, 2, 1, double> strided;
  kernel_layer_check::check_layer_gradients(strided, {1, 7, 6, 3}, 2);
  nn::conv2d<2, 2, nn::valid, 1, 2, double> dilated;
  kernel_layer_check::check_layer_gradients(dilated, {1, 6, 6, 2}, 3);
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
  // U(-l, l) has mean 0 (the mean of 600 draws: standard deviation l / 42) and variance l^2 / 3.
  CHECK(std::abs(sum / k.size()) < 0.1 * limit);
  CHECK(sum_sq / k.size() == doctest::Approx(limit * limit / 3).epsilon(0.1));
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(8, 0.f));
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 12, 12, 4})),
                       "conv2d 'conv2d': the input has 4 channels, the layer was built for 3 (input shape (2, 12, 12, 4))",
                       fx::shape_error);
  CHECK_THROWS_AS(layer(fx::zeros<float>({12, 12, 3})), fx::shape_error);
}

TEST_CASE_TEMPLATE("conv2d: inference applies bias and relu in the kernel, with the taped statement's numbers", T,
                   float, double) {
  // One shape per kernel path: direct (32 filters, rows of 14 or more, 8 channels), Winograd (5x5
  // over many tiles), single input channel, im2col (stride 2, 24 filters), pointwise (1x1).
  auto check = [](auto layer, fx::shape in, double scale_tolerance = 0) {
    fx::random::generator gen{5};
    layer.build(fx::shape{in[1], in[2], in[3]}, gen);
    layer.bias().assign(fx::random::normal<T>(layer.bias().shape(), gen));
    fused_inference::check_matches_taped(layer, fx::random::normal<T>(in, gen), scale_tolerance);
  };
  check(nn::conv2d<64, 5, nn::same, 1, 1, T>{}, {3, 14, 14, 32});
  // At batch 1 (49 tiles) the taped statement runs the direct kernel, and inference Winograd on
  // a filter transform it keeps (conv2d_forward_reused_filter): the same numbers within rounding.
  if (fluxion::detail::kernels::has_xsimd_arch)
    check(nn::conv2d<64, 5, nn::same, 1, 1, T>{}, {1, 14, 14, 32}, std::is_same_v<T, float> ? 1e-5 : 1e-13);
  check(nn::conv2d<32, 5, nn::same, 1, 1, T>{}, {1, 28, 28, 1});
  check(nn::conv2d<32, 5, nn::same, 1, 1, T>{}, {4, 28, 28, 8});
  check(nn::conv2d<24, 3, nn::valid, 2, 1, T>{}, {3, 9, 9, 5});
  check(nn::conv2d<16, 1, nn::valid, 1, 1, T>{}, {2, 5, 5, 8});
}

TEST_CASE("conv2d: inference after an update reads the new weights, not a kept filter transform") {
  // Batch-1 inference of a 5x5 layer over 32 channels keeps its filter's Winograd transform. Adam
  // then updates the kernel in place (nothing else holds its buffer: the same address, new values
  // under a new tensor id), and a plain assign swaps in another buffer; inference must follow both.
  fx::random::generator gen{9};
  nn::conv2d<64, 5, nn::same> layer;
  layer.build(fx::shape{14, 14, 32}, gen);
  const fx::tensor<float> x = fx::random::normal<float>({1, 14, 14, 32}, gen);
  auto taped = [&] {
    fx::gradient_tape tape;
    return fx::tensor<float>(layer(x));
  };
  auto close = [](const fx::tensor<float>& a, const fx::tensor<float>& b) {
    const float scale = fx::tensor<float>(fx::reduce_max(fx::abs(b))).item();
    return fx::tensor<float>(fx::reduce_max(fx::abs(a - b))).item() <= 1e-5f * scale;
  };
  const fx::tensor<float> before = layer(x);
  CHECK(close(before, taped()));
  const float* address = layer.kernel().peek().data();
  fx::optim::adam opt{0.05};
  std::vector<fx::variable<float>*> vars{&layer.kernel(), &layer.bias()};
  std::vector<fx::tensor<float>> grads;
  {
    fx::gradient_tape tape;
    const fx::tensor<float> loss = fx::reduce_sum(fx::square(layer(x)));
    grads = tape.gradient(loss, vars);
  }
  opt.apply_gradients(grads, vars);
  CHECK(layer.kernel().peek().data() == address);  // updated in place
  const fx::tensor<float> after = layer(x);
  CHECK(close(after, taped()));
  CHECK_FALSE(close(after, before));
  layer.kernel().assign(fx::random::normal<float>(layer.kernel().shape(), gen));
  const fx::tensor<float> reassigned = layer(x);
  CHECK(close(reassigned, taped()));
  CHECK_FALSE(close(reassigned, after));
}
