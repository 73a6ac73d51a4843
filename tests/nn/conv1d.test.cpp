// fx::nn::conv1d, max_pool1d and avg_pool1d: forward against naive loops over (batch, steps,
// channels) for valid, same and causal padding, strides and dilations; gradients against finite
// differences (double); causality; a sequential model's compile-time shapes and training through
// fit; initialization and errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include "compiled_check.hpp"
#include "fused_inference.hpp"
#include "kernel_layer_check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace conv1d_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// Keras's Conv1D by loops: x (batch, steps, in), kernel (k, in, out), `left` zeros before the
/// first step and `right` after it, then each output step o reads steps o * stride + j * dilation.
std::vector<double> naive_conv1d(const fx::tensor<double>& x, const fx::tensor<double>& kernel, const fx::tensor<double>& bias,
                                 fx::index_t stride, fx::index_t dilation, fx::index_t left, fx::index_t right,
                                 fx::index_t& out_steps) {
  const auto xs = x.shape(), ks = kernel.shape();
  const fx::index_t batch = xs[0], steps = xs[1], in = xs[2], k = ks[0], out = ks[2];
  const fx::index_t span = dilation * (k - 1) + 1, padded = steps + left + right;
  out_steps = (padded - span) / stride + 1;
  const auto xv = x.to_vector(), kv = kernel.to_vector(), bv = bias.to_vector();
  std::vector<double> y(static_cast<std::size_t>(batch * out_steps * out));
  for (fx::index_t b = 0; b < batch; ++b)
    for (fx::index_t o = 0; o < out_steps; ++o)
      for (fx::index_t f = 0; f < out; ++f) {
        double sum = bv[static_cast<std::size_t>(f)];
        for (fx::index_t j = 0; j < k; ++j) {
          const fx::index_t t = o * stride + j * dilation - left;
          if (t < 0 || t >= steps) continue;
          for (fx::index_t c = 0; c < in; ++c)
            sum += xv[static_cast<std::size_t>((b * steps + t) * in + c)] * kv[static_cast<std::size_t>((j * in + c) * out + f)];
        }
        y[static_cast<std::size_t>((b * out_steps + o) * out + f)] = sum;
      }
  return y;
}

template <class Layer>
void check_against_loops(Layer& layer, const fx::shape& input, fx::index_t stride, fx::index_t dilation, fx::index_t left,
                         fx::index_t right, unsigned seed) {
  fx::random::generator gen{seed};
  layer.build(fx::shape{input[1], input[2]}, gen);
  layer.bias().assign(fx::random::normal<double>(layer.bias().shape(), gen));
  const fx::tensor<double> x = fx::random::normal<double>(input, gen);
  fx::index_t out_steps = 0;
  const auto want = naive_conv1d(x, layer.kernel().peek(), layer.bias().peek(), stride, dilation, left, right, out_steps);
  const fx::tensor<double> y = layer(x);
  REQUIRE(y.shape() == fx::shape{input[0], out_steps, layer.bias().shape()[0]});
  const auto got = y.to_vector();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("conv1d: valid, same and causal padding, strides and dilations against loops") {
  // same pads (span - 1) / 2 before and the rest after, as TensorFlow; causal pads span - 1 before.
  nn::conv1d<3, 3, nn::valid, 1, 1, double> valid;
  check_against_loops(valid, {2, 7, 2}, 1, 1, 0, 0, 1);
  nn::conv1d<3, 4, nn::same, 1, 1, double> same;
  check_against_loops(same, {2, 7, 2}, 1, 1, 1, 2, 2);
  nn::conv1d<2, 3, nn::causal, 1, 1, double> causal;
  check_against_loops(causal, {2, 6, 3}, 1, 1, 2, 0, 3);
  nn::conv1d<2, 3, nn::causal, 1, 2, double> causal_dilated;  // span 5: 4 zeros before
  check_against_loops(causal_dilated, {1, 9, 2}, 1, 2, 4, 0, 4);
  nn::conv1d<4, 3, nn::valid, 2, 1, double> strided;
  check_against_loops(strided, {3, 9, 2}, 2, 1, 0, 0, 5);
  nn::conv1d<2, 3, nn::same, 2, 1, double> same_strided;  // 8 steps: 4 out, padding 1 in all (0 before, 1 after)
  check_against_loops(same_strided, {1, 8, 2}, 2, 1, 0, 1, 6);
  nn::conv1d<2, 2, nn::valid, 1, 3, double> dilated;
  check_against_loops(dilated, {2, 8, 3}, 1, 3, 0, 0, 7);
}

TEST_CASE("conv1d: gradients with respect to the input, kernel and bias") {
  nn::conv1d<3, 3, nn::same, 1, 1, double> same;
  kernel_layer_check::check_layer_gradients(same, {2, 6, 2}, 1);
  nn::conv1d<2, 3, nn::causal, 1, 2, double> causal;
  kernel_layer_check::check_layer_gradients(causal, {1, 7, 2}, 2);
  nn::conv1d<2, 2, nn::valid, 2, 1, double> strided;
  kernel_layer_check::check_layer_gradients(strided, {2, 7, 3}, 3);
}

TEST_CASE("conv1d: causal padding never lets an output see a later step") {
  fx::random::generator gen{4};
  nn::conv1d<4, 3, nn::causal, 1, 2> conv;
  const fx::tensor<float> x = fx::random::normal<float>({1, 12, 3}, gen);
  const auto before = fx::tensor<float>(conv(x)).to_vector();
  std::vector<float> changed = x.to_vector();
  for (std::size_t i = 7 * 3; i < changed.size(); ++i) changed[i] += 5.f;  // steps 7 onward
  const auto after = fx::tensor<float>(conv(fx::from_vector(changed, {1, 12, 3}))).to_vector();
  for (std::size_t t = 0; t < 12; ++t)
    for (std::size_t f = 0; f < 4; ++f) {
      CAPTURE(t);
      if (t < 7) CHECK(after[t * 4 + f] == before[t * 4 + f]);
    }
  CHECK(after[7 * 4] != before[7 * 4]);
}

TEST_CASE("max_pool1d and avg_pool1d against loops, with their gradients") {
  fx::random::generator gen{6};
  const fx::tensor<double> x = fx::random::normal<double>({2, 7, 3}, gen);
  const auto xv = x.to_vector();
  auto naive = [&](bool max, fx::index_t pool, fx::index_t stride, bool same) {
    const fx::index_t steps = 7;
    const fx::index_t out = same ? (steps + stride - 1) / stride : (steps - pool) / stride + 1;
    const fx::index_t total_pad = same ? std::max<fx::index_t>((out - 1) * stride + pool - steps, 0) : 0;
    const fx::index_t left = total_pad / 2;
    std::vector<double> y;
    for (fx::index_t b = 0; b < 2; ++b)
      for (fx::index_t o = 0; o < out; ++o)
        for (fx::index_t c = 0; c < 3; ++c) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          int n = 0;
          for (fx::index_t j = 0; j < pool; ++j) {
            const fx::index_t t = o * stride + j - left;
            if (t < 0 || t >= steps) continue;  // Keras's same padding: the window's steps inside the input
            const double v = xv[static_cast<std::size_t>((b * steps + t) * 3 + c)];
            acc = max ? std::max(acc, v) : acc + v;
            ++n;
          }
          y.push_back(max ? acc : acc / n);
        }
    return y;
  };
  auto check = [](const fx::tensor<double>& got, const std::vector<double>& want) {
    const auto g = got.to_vector();
    REQUIRE(g.size() == want.size());
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]).epsilon(1e-12));
  };
  check(nn::max_pool1d<2>{}(x), naive(true, 2, 2, false));
  check(nn::avg_pool1d<3, 2>{}(x), naive(false, 3, 2, false));
  check(nn::max_pool1d<2, 2, nn::same>{}(x), naive(true, 2, 2, true));
  check(nn::avg_pool1d<3, 1, nn::same>{}(x), naive(false, 3, 1, true));
  CHECK(fx::tensor<double>(nn::max_pool1d<2>{}(x)).shape() == fx::shape{2, 3, 3});
  nn::avg_pool1d<3, 2, nn::same> avg;
  nn::max_pool1d<2, 1> max;
  const auto x_ties_free = fx::random::normal<double>({1, 6, 2}, gen);
  const fx::testing::check_options reverse{.reverse = true, .forward = false};
  const auto avg_report = fx::testing::check_gradients([&](const auto& xi) { return avg(xi); }, reverse, x);
  CHECK_MESSAGE(avg_report.ok, avg_report.report);
  const auto max_report = fx::testing::check_gradients([&](const auto& xi) { return max(xi); }, reverse, x_ties_free);
  CHECK_MESSAGE(max_report.ok, max_report.report);
}

TEST_CASE("conv1d in a sequential model: shapes checked when it compiles, trained by fit") {
  fx::random::generator gen{8};
  auto net = nn::sequential(gen, nn::input<16, 2>{}, nn::conv1d<8, 3, nn::causal>{}, nn::relu{},
                            nn::conv1d<8, 3, nn::valid, 1, 2>{}, nn::relu{}, nn::max_pool1d<2>{}, nn::avg_pool1d<2, 1>{},
                            nn::global_avg_pool1d{}, nn::dense<1>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<1>>);
  const std::string summary = net.summary();
  CHECK(summary.find("conv1d") != std::string::npos);
  CHECK(summary.find("(batch, 16, 8)") != std::string::npos);  // causal keeps the steps
  CHECK(summary.find("(batch, 12, 8)") != std::string::npos);  // valid, dilated by 2: 16 - 4
  CHECK(summary.find("(batch, 6, 8)") != std::string::npos);   // max_pool1d<2>
  CHECK(summary.find("(batch, 5, 8)") != std::string::npos);   // avg_pool1d<2, 1>
  // y: the sum of the second channel: a model that can learn it.
  std::vector<std::pair<fx::tensor<float>, fx::tensor<float>>> data;
  for (int b = 0; b < 8; ++b) {
    const fx::tensor<float> x = fx::random::normal<float>({16, 16, 2}, gen);
    const fx::tensor<float> second(fx::strided_slice(x, {0, 0, 1}, {fx::end, fx::end, 2}));  // (16, 16, 1)
    data.emplace_back(x, fx::tensor<float>(fx::reduce_sum(fx::reshape(second, {16, 16}), 1)));
  }
  fx::optim::adam opt{1e-2};
  auto mse = [](const auto& out, const auto& y) { return fx::losses::mean_squared_error(out, fx::reshape(y, {-1, 1})); };
  const auto history = fx::fit(net, opt, mse, data, {.epochs = 6, .verbose = 0});
  CHECK(history.loss.back() < 0.7 * history.loss.front());
  CHECK(net.trainable_variables().size() == 6);
  CHECK(net.trainable_variables()[0]->name() == "conv1d/kernel");
  CHECK(net.trainable_variables()[0]->shape() == fx::shape{3, 2, 8});
}

TEST_CASE("conv1d and the 1-D pools in nn::compile_step: the tape-based step's numbers") {
  auto make = [] {
    fx::random::generator g{10};
    return nn::sequential(g, nn::input<9, 3>{}, nn::conv1d<4, 3, nn::causal>{}, nn::relu{}, nn::max_pool1d<2>{},
                          nn::conv1d<4, 2, nn::same>{}, nn::avg_pool1d<2>{}, nn::flatten{}, nn::dense<3>{});
  };
  auto a = make(), b = make();
  fx::random::generator gen{11};
  const fx::tensor<float> x = fx::random::normal<float>({2, 9, 3}, gen);
  compiled_check::against_tape(a, b, x, fx::tensor<std::int32_t>{0, 2}, 3);
}

TEST_CASE_TEMPLATE("conv1d: inference applies bias and relu in conv2d's kernel, with the taped statement's numbers", T,
                   float, double) {
  auto check = [](auto layer, fx::shape in) {
    fx::random::generator gen{12};
    layer.build(fx::shape{in[1], in[2]}, gen);
    layer.bias().assign(fx::random::normal<T>(layer.bias().shape(), gen));
    fused_inference::check_matches_taped(layer, fx::random::normal<T>(in, gen));
  };
  check(nn::conv1d<16, 3, nn::causal, 1, 2, T>{}, {3, 40, 8});
  check(nn::conv1d<24, 5, nn::same, 1, 1, T>{}, {2, 33, 16});
  check(nn::conv1d<8, 4, nn::valid, 2, 1, T>{}, {2, 17, 3});
  check(nn::conv1d<32, 1, nn::valid, 1, 1, T>{}, {4, 9, 8});
}

TEST_CASE("conv1d: glorot-uniform kernel (kernel, in, out), zero bias, clear errors") {
  fx::random::generator gen{9};
  nn::conv1d<8, 5, nn::same> layer;
  layer.build(fx::shape{20, 3}, gen);
  CHECK(layer.kernel().shape() == fx::shape{5, 3, 8});
  const double limit = std::sqrt(6.0 / (5 * 3 + 5 * 8));
  const auto k = layer.kernel().peek().to_vector();
  for (float v : k) CHECK(std::abs(v) <= limit);
  CHECK(layer.bias().peek().to_vector() == std::vector<float>(8, 0.f));
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({2, 20, 4})),
                       "conv1d 'conv1d': the input has 4 channels, the layer was built for 3 (input shape (2, 20, 4))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(layer(fx::zeros<float>({20, 3})),
                       "conv1d 'conv1d': expects input of shape (batch, steps, channels), got (20, 3)", fx::shape_error);
  nn::conv1d<2, 3, nn::valid, 1, 2> wide;
  CHECK_THROWS_WITH_AS(wide(fx::zeros<float>({1, 4, 1})),
                       "conv1d 'conv1d': the input's 4 steps are fewer than the kernel's 5 (dilated) with valid padding "
                       "(input shape (1, 4, 1))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(nn::max_pool1d<2>{}(fx::zeros<float>({2, 8})),
                       "max_pool1d 'max_pool1d': expects input of shape (batch, steps, channels), got (2, 8)",
                       fx::shape_error);
}

}  // namespace conv1d_test
