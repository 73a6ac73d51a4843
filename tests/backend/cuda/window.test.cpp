// The window ops on fx::cuda (backend/cuda/window.hpp), conv2d, depthwise conv2d and pooling:
// forward values and the tape's gradients through them agree with the cpu kernels, for same and
// valid padding, strides, dilation, 1x1 filters (no im2col), im2col in chunks of one image,
// channel multipliers, a depthwise filter gradient over many chunks, overlapping pooling windows
// and windows that hang over the border.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::check_values;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;

struct conv_case {
  fx::shape input, filters;
  fx::spatial2d strides, dilations;
  fx::padding pad;
};

const conv_case conv_cases[] = {
    {{2, 7, 6, 3}, {3, 3, 3, 4}, 1, 1, fx::padding::same},
    {{2, 9, 8, 2}, {5, 5, 2, 3}, 1, 1, fx::padding::same},
    {{1, 9, 9, 3}, {3, 2, 3, 5}, {2, 3}, 1, fx::padding::valid},
    {{2, 8, 7, 2}, {3, 3, 2, 2}, 2, 1, fx::padding::same},
    {{1, 10, 9, 2}, {3, 3, 2, 3}, 1, {2, 1}, fx::padding::same},
    {{3, 4, 4, 1}, {1, 1, 1, 6}, 1, 1, fx::padding::valid},
    // Channels that fill 16-byte lanes (float x 4, double x 2): im2col and col2im move lanes.
    {{2, 6, 7, 4}, {3, 3, 4, 5}, 1, 1, fx::padding::same},
    {{2, 9, 8, 8}, {5, 5, 8, 3}, {2, 1}, 1, fx::padding::same},
    {{1, 9, 9, 4}, {3, 2, 4, 2}, 1, {2, 1}, fx::padding::valid},
};

struct pool_case {
  fx::shape input;
  fx::spatial2d ksize, strides;
  fx::padding pad;
};

const pool_case pool_cases[] = {
    {{2, 6, 8, 3}, 2, 2, fx::padding::valid},  // windows that tile the image
    {{2, 7, 7, 2}, 3, 2, fx::padding::same},   // overlapping windows over the border
    {{1, 5, 9, 4}, {2, 3}, {1, 2}, fx::padding::valid},
    {{1, 7, 5, 2}, 2, 2, fx::padding::same},  // odd extents: the last window is cut
    {{2, 7, 8, 2}, 2, 3, fx::padding::valid},  // windows apart: inputs between them get no gradient
};

/// The convolution conv_gradients differentiates: fx::conv2d, or fx::depthwise_conv2d (a case's
/// filters are then (height, width, channels, multiplier)).
struct dense_conv {
  template <class X, class W>
  auto operator()(const X& x, const W& w, const conv_case& k) const {
    return fx::conv2d(x, w, k.strides, k.pad, k.dilations);
  }
};
struct depthwise_conv {
  template <class X, class W>
  auto operator()(const X& x, const W& w, const conv_case& k) const {
    return fx::depthwise_conv2d(x, w, k.strides, k.pad, k.dilations);
  }
};

/// d/dx and d/dw of sum(square(relu(conv(x, w)) * c)) on Device, and the value.
template <class Device, class T, class Conv = dense_conv>
std::vector<std::vector<T>> conv_gradients(const conv_case& k, const fx::tensor<T>& x0, const fx::tensor<T>& w0,
                                           const fx::tensor<T>& c0, Conv conv = {}) {
  fx::tensor<T, Device> x = fx::to<Device>(x0), w = fx::to<Device>(w0), c = fx::to<Device>(c0);
  fx::gradient_tape tape(fx::persistent);
  tape.watch(x);
  tape.watch(w);
  fx::tensor<T, Device> y = fx::reduce_sum(fx::square(fx::relu(conv(x, w, k)) * c));
  return {tape.gradient(y, x).to_vector(), tape.gradient(y, w).to_vector(), y.to_vector()};
}

/// The tape's input and filter gradients (and the value) of conv_gradients for case k agree on
/// the two devices, from inputs drawn with seeds seed, seed + 1 and seed + 2.
void conv_gradients_agree(const conv_case& k, int seed) {
  INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
  const auto x = filled<double>(k.input, seed), w = filled<double>(k.filters, seed + 1, -0.5, 0.5);
  const fx::shape out = fx::conv2d(x, w, k.strides, k.pad, k.dilations).shape();
  const auto c = filled<double>(out, seed + 2);
  const auto want = conv_gradients<fx::cpu>(k, x, w, c);
  const auto got = conv_gradients<fx::cuda>(k, x, w, c);
  for (std::size_t i = 0; i < want.size(); ++i) check_values(got[i], want[i], 1e-12);
}

/// d/dx of sum(max_pool2d(x) * a + square(avg_pool2d(x)) * b) on Device (double).
template <class Device>
std::vector<double> pool_gradient(const pool_case& p, const fx::tensor<double>& x0, const fx::tensor<double>& a0,
                                  const fx::tensor<double>& b0) {
  fx::tensor<double, Device> x = fx::to<Device>(x0), a = fx::to<Device>(a0), b = fx::to<Device>(b0);
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double, Device> y = fx::reduce_sum(fx::max_pool2d(x, p.ksize, p.strides, p.pad) * a +
                                                fx::square(fx::avg_pool2d(x, p.ksize, p.strides, p.pad)) * b);
  return tape.gradient(y, x).to_vector();
}

}  // namespace

TEST_CASE_TEMPLATE("cuda conv2d: the same outputs as the cpu kernels", T, float, double) {
  int seed = 1;
  for (const conv_case& k : conv_cases) {
    INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
    const auto x = filled<T>(k.input, seed++), w = filled<T>(k.filters, seed++, -0.5, 0.5);
    same_on_both_devices(
        std::is_same_v<T, float> ? 1e-5 : 1e-12,
        [&](const auto& xi, const auto& wi) { return fx::conv2d(xi, wi, k.strides, k.pad, k.dilations); }, x, w);
  }
}

TEST_CASE_TEMPLATE("cuda pooling: max and average pooling as on the cpu", T, float, double) {
  int seed = 20;
  for (const pool_case& p : pool_cases) {
    INFO("input " << fx::to_string(p.input));
    auto x = filled<T>(p.input, seed++);
    // Ties: a window whose maximum appears twice routes to its first, on both devices.
    x.mutable_data()[1 * p.input[3]] = x.data()[0];
    same_on_both_devices([&](const auto& xi) { return fx::max_pool2d(xi, p.ksize, p.strides, p.pad); }, x);
    same_on_both_devices([&](const auto& xi) { return fx::avg_pool2d(xi, p.ksize, p.strides, p.pad); }, x);
  }
}

TEST_CASE("cuda pooling: a NaN is its window's maximum and takes its gradient, as on the cpu") {
  int seed = 90;
  for (const pool_case& p : pool_cases) {
    INFO("input " << fx::to_string(p.input));
    auto x = filled<double>(p.input, seed++);
    const fx::index_t c = p.input[3];
    for (fx::index_t k : {1, 2, 7}) x.mutable_data()[k * c + k % c] = std::numeric_limits<double>::quiet_NaN();
    same_on_both_devices([&](const auto& xi) { return fx::max_pool2d(xi, p.ksize, p.strides, p.pad); }, x);
    // ... and both keep the NaN: pixel 1 (channel 1) lies in the first window on every case here.
    fx::tensor<double> on_cuda = fx::to<fx::cpu>(fx::tensor<double, fx::cuda>(
        fx::max_pool2d(fx::to<fx::cuda>(x), p.ksize, p.strides, p.pad)));
    CHECK(std::isnan(on_cuda.data()[1 % c]));
    const auto a = filled<double>(fx::max_pool2d(x, p.ksize, p.strides, p.pad).shape(), seed++);
    auto gradient = [&]<class Device>(Device) {
      fx::tensor<double, Device> xd = fx::to<Device>(x), ad = fx::to<Device>(a);
      fx::gradient_tape tape;
      tape.watch(xd);
      fx::tensor<double, Device> y = fx::reduce_sum(fx::max_pool2d(xd, p.ksize, p.strides, p.pad) * ad);
      return tape.gradient(y, xd).to_vector();
    };
    check_values(gradient(fx::cuda{}), gradient(fx::cpu{}), 1e-12);
  }
}

TEST_CASE("cuda conv2d: input and filter gradients through the tape agree with the cpu's") {
  int seed = 40;
  for (const conv_case& k : conv_cases) {
    conv_gradients_agree(k, seed);
    seed += 3;
  }
}

TEST_CASE("cuda pooling: gradients route to the first maximum and share the average, as on the cpu") {
  int seed = 60;
  for (const pool_case& p : pool_cases) {
    INFO("input " << fx::to_string(p.input));
    auto x = filled<double>(p.input, seed++);
    x.mutable_data()[1 * p.input[3]] = x.data()[0];
    const fx::shape out = fx::max_pool2d(x, p.ksize, p.strides, p.pad).shape();
    const auto a = filled<double>(out, seed++), b = filled<double>(out, seed++);
    check_values(pool_gradient<fx::cuda>(p, x, a, b), pool_gradient<fx::cpu>(p, x, a, b), 1e-12);
  }
}

namespace {
using fluxion_test::scoped_setting;

/// Depthwise cases (filters (height, width, channels, multiplier)): multipliers 1 to 4, strides,
/// dilations, both together, same padding that is larger after than before, 1x1 filters, and
/// channels that fill the cpu's vectors with and without a remainder (72: the cpu's blocks of four
/// vectors, then single vectors or scalars, for AVX2 and AVX-512 widths).
const conv_case depthwise_cases[] = {
    {{2, 7, 6, 3}, {3, 3, 3, 1}, 1, 1, fx::padding::same},
    {{2, 9, 8, 4}, {5, 5, 4, 1}, 1, 1, fx::padding::valid},
    {{1, 7, 6, 19}, {3, 2, 19, 1}, {2, 1}, 1, fx::padding::same},
    {{1, 9, 9, 3}, {3, 2, 3, 2}, {2, 3}, 1, fx::padding::valid},
    {{2, 8, 7, 2}, {3, 3, 2, 3}, 2, 1, fx::padding::same},
    {{1, 10, 9, 2}, {3, 3, 2, 2}, 1, {2, 1}, fx::padding::same},
    {{2, 11, 10, 3}, {3, 3, 3, 2}, 2, 2, fx::padding::valid},
    {{1, 6, 6, 5}, {4, 4, 5, 1}, 3, 1, fx::padding::same},
    {{1, 8, 7, 2}, {2, 2, 2, 4}, 1, 1, fx::padding::same},
    {{3, 4, 4, 2}, {1, 1, 2, 3}, 1, 1, fx::padding::valid},
    {{1, 7, 6, 72}, {3, 3, 72, 1}, {2, 1}, 1, fx::padding::same},
};

/// Rows of 8192 output elements: the cpu's filter gradient cuts them into 8 chunks of 2 rows, and
/// chunks 2 and 5 span two images; with a multiplier of 4 (scalar loops on the cpu) and of 1.
const conv_case depthwise_chunked[] = {{{3, 5, 32, 64}, {3, 3, 64, 4}, 1, 1, fx::padding::same},
                                       {{3, 5, 32, 256}, {3, 3, 256, 1}, 1, 1, fx::padding::same}};

/// The depthwise kernels on cuda add the cpu's products in the cpu's order, each with one rounding
/// (fma). The cpu's vector loops round once as well where the target has a fused multiply-add (x86
/// with FMA3, AArch64), and then the two devices agree bit for bit; elsewhere xsimd emulates it
/// with a multiply and an add, and they agree to rounding.
#if defined(__FMA__) || defined(__aarch64__)
constexpr bool depthwise_fma_fused = true;
#else
constexpr bool depthwise_fma_fused = false;
#endif
template <class T>
constexpr double depthwise_rtol = depthwise_fma_fused ? 0.0 : std::is_same_v<T, float> ? 1e-4 : 1e-12;

/// The forward pass and both gradient ops of depthwise case k, each run alone as a window_expr
/// (the ops the tape builds) on the cpu and on cuda, agree within depthwise_rtol. With `one_image`,
/// every launch covers one image (forward pass and input gradient) or one chunk (filter gradient).
template <class T>
void depthwise_ops_agree(const conv_case& k, int seed, bool one_image = false) {
  INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters) << ", strides "
                << k.strides.height << "x" << k.strides.width << ", dilations " << k.dilations.height << "x"
                << k.dilations.width << (k.pad == fx::padding::same ? ", same" : ", valid"));
  const auto s = fx::detail::depthwise2d_geometry_of(k.input, k.filters, k.strides, k.pad, k.dilations);
  const fx::shape out{s.batch, s.out_h, s.out_w, s.out_c()};
  const auto x = filled<T>(k.input, seed), w = filled<T>(k.filters, seed + 1, -0.5, 0.5);
  const auto dy = filled<T>(out, seed + 2);
  auto op = [&]<class Op>(Op, fx::index_t per_launch) {
    return [&s, per_launch, one_image](const auto& a, const auto& b) {
      auto at = fx::eval(a);
      auto bt = fx::eval(b);
      scoped_setting<fx::index_t> limit(fx::detail::cuda_window::launch_limit(),
                                        one_image ? per_launch : fx::detail::cuda_window::launch_limit());
      return fx::eval(fx::window_expr<Op, decltype(at), decltype(bt)>(s, at, bt));
    };
  };
  const fx::index_t in_image = s.in_h * s.in_w * s.channels, out_image = s.out_h * s.out_w * s.out_c();
  same_on_both_devices(depthwise_rtol<T>, op(fx::window_ops::depthwise_conv2d{}, out_image), x, w);
  same_on_both_devices(depthwise_rtol<T>, op(fx::window_ops::depthwise_conv2d_input_gradient{}, in_image), dy, w);
  same_on_both_devices(depthwise_rtol<T>, op(fx::window_ops::depthwise_conv2d_filter_gradient{}, s.filter_size()),
                       x, dy);
}

/// The tape's input and filter gradients of sum(square(relu(depthwise_conv2d(x, w)) * c)), and its
/// value, agree on the two devices.
template <class T>
void depthwise_gradients_agree(const conv_case& k, int seed) {
  INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
  const auto x = filled<T>(k.input, seed), w = filled<T>(k.filters, seed + 1, -0.5, 0.5);
  const auto c = filled<T>(fx::depthwise_conv2d(x, w, k.strides, k.pad, k.dilations).shape(), seed + 2);
  const auto want = conv_gradients<fx::cpu>(k, x, w, c, depthwise_conv{});
  const auto got = conv_gradients<fx::cuda>(k, x, w, c, depthwise_conv{});
  for (std::size_t i = 0; i < want.size(); ++i) check_values(got[i], want[i], fluxion_test::default_rtol<T>());
}
}  // namespace

TEST_CASE_TEMPLATE("cuda depthwise_conv2d: the forward pass and both gradient ops give the cpu's values", T, float,
                   double) {
  int seed = 300;
  for (const conv_case& k : depthwise_cases) {
    depthwise_ops_agree<T>(k, seed);
    seed += 3;
  }
  for (const conv_case& k : depthwise_chunked) {
    depthwise_ops_agree<T>(k, seed);
    seed += 3;
  }
}

TEST_CASE_TEMPLATE("cuda depthwise_conv2d: launches of one image, and of one filter gradient chunk, give the "
                   "cpu's values", T, float, double) {
  int seed = 340;
  for (const conv_case& k : depthwise_cases) {
    depthwise_ops_agree<T>(k, seed, true);
    seed += 3;
  }
  for (const conv_case& k : depthwise_chunked) {
    depthwise_ops_agree<T>(k, seed, true);
    seed += 3;
  }
}

TEST_CASE_TEMPLATE("cuda depthwise_conv2d: input and filter gradients through the tape agree with the cpu's", T,
                   float, double) {
  int seed = 380;
  for (const conv_case& k : depthwise_cases) {
    depthwise_gradients_agree<T>(k, seed);
    seed += 3;
  }
  for (const conv_case& k : depthwise_chunked) {
    depthwise_gradients_agree<T>(k, seed);
    seed += 3;
  }
  // The same with launches of one image: a limit of the largest per-image launch of the three ops.
  seed = 420;
  for (const conv_case& k : depthwise_cases) {
    const auto s = fx::detail::depthwise2d_geometry_of(k.input, k.filters, k.strides, k.pad, k.dilations);
    const fx::index_t per_image = std::max({s.in_h * s.in_w * s.channels, s.out_h * s.out_w * s.out_c(),
                                            s.filter_size()});
    scoped_setting<fx::index_t> one_image(fx::detail::cuda_window::launch_limit(), per_image);
    depthwise_gradients_agree<T>(k, seed);
    seed += 3;
  }
}

TEST_CASE("cuda depthwise_conv2d: the same bits on every run") {
  // Nothing is added with atomics, and the filter gradient's chunks are added in order.
  const conv_case& k = depthwise_chunked[1];
  const auto x = filled<float>(k.input, 460), w = filled<float>(k.filters, 461, -0.5, 0.5);
  const auto c = filled<float>(fx::depthwise_conv2d(x, w, k.strides, k.pad, k.dilations).shape(), 462);
  const auto first = conv_gradients<fx::cuda>(k, x, w, c, depthwise_conv{});
  const auto again = conv_gradients<fx::cuda>(k, x, w, c, depthwise_conv{});
  for (std::size_t i = 0; i < first.size(); ++i) CHECK(again[i] == first[i]);
}

TEST_CASE("cuda depthwise_conv2d: an empty batch gives an empty output and a zero filter gradient") {
  const auto w = filled<float>({3, 3, 2, 2}, 470);
  fx::tensor<float, fx::cuda> x = fx::to<fx::cuda>(fx::tensor<float>(fx::shape{0, 5, 5, 2}));
  fx::tensor<float, fx::cuda> wd = fx::to<fx::cuda>(w);
  fx::gradient_tape tape;
  tape.watch(wd);
  fx::tensor<float, fx::cuda> y = fx::depthwise_conv2d(x, wd, 1, fx::padding::same);
  CHECK(y.shape() == fx::shape{0, 5, 5, 4});
  fx::tensor<float, fx::cuda> s = fx::reduce_sum(y);
  check_values(tape.gradient(s, wd).to_vector(), std::vector<float>(static_cast<std::size_t>(w.size()), 0.f), 0.0);
}

TEST_CASE("cuda depthwise_conv2d: an image larger than one launch can index fails cleanly, naming the op") {
  scoped_setting<fx::index_t> small(fx::detail::cuda_window::launch_limit(), 3);
  fx::tensor<float, fx::cuda> x = fx::to<fx::cuda>(filled<float>({1, 4, 4, 1}, 480));
  fx::tensor<float, fx::cuda> w = fx::to<fx::cuda>(filled<float>({3, 3, 1, 2}, 481));
  auto conv = [&] { return fx::tensor<float, fx::cuda>(fx::depthwise_conv2d(x, w, 1, fx::padding::same)); };
  CHECK_THROWS_WITH_AS(conv(), doctest::Contains("depthwise_conv2d on cuda: one image needs 32 threads"),
                       fx::invalid_argument);
}

TEST_CASE("cuda conv2d: an empty batch and a filter gradient over no positions give empty and zero results") {
  const auto w = filled<float>({3, 3, 2, 4}, 3);
  fx::tensor<float, fx::cuda> x = fx::to<fx::cuda>(fx::tensor<float>(fx::shape{0, 5, 5, 2}));
  fx::tensor<float, fx::cuda> wd = fx::to<fx::cuda>(w);
  fx::gradient_tape tape;
  tape.watch(wd);
  fx::tensor<float, fx::cuda> y = fx::conv2d(x, wd, 1, fx::padding::same);
  CHECK(y.shape() == fx::shape{0, 5, 5, 4});
  fx::tensor<float, fx::cuda> s = fx::reduce_sum(y);
  check_values(tape.gradient(s, wd).to_vector(), std::vector<float>(static_cast<std::size_t>(w.size()), 0.f), 0.0);
}

namespace {
using fluxion_test::scoped_setting;

/// Sends the convolutions of one scope to im2col + cuBLAS where the program is built with cuDNN.
struct im2col_only {
  im2col_only() { fx::allow_cudnn(false); }
  ~im2col_only() { fx::allow_cudnn(true); }
};
}  // namespace

TEST_CASE("cuda conv2d: im2col in chunks of one image gives the cpu's values and gradients") {
  // The chunked path (a filter gradient added over chunks) runs for batches larger than the
  // im2col budget allows at once; a budget of one byte makes every image its own chunk.
  im2col_only path;
  scoped_setting<std::size_t> one_image(fx::detail::cuda_window::im2col_budget_bytes(), 1);
  int seed = 80;
  for (const conv_case& k : conv_cases) {
    conv_gradients_agree(k, seed);
    seed += 3;
  }
}

TEST_CASE("cuda window ops: launches of one image each (the split at 2^31 threads) give the cpu's results") {
  // Each case's limit is its largest per-image launch, so every launch covers a single image and
  // the kernels run on pointers offset to it.
  im2col_only path;
  int seed = 100;
  for (const conv_case& k : conv_cases) {
    const fx::shape out = fx::conv2d(fx::tensor<double>(k.input), fx::tensor<double>(k.filters), k.strides, k.pad,
                                     k.dilations).shape();
    const fx::index_t image = k.input[1] * k.input[2] * k.input[3];
    const fx::index_t col = out[1] * out[2] * k.filters[0] * k.filters[1] * k.filters[2];
    scoped_setting<fx::index_t> one_image(fx::detail::cuda_window::launch_limit(), std::max(image, col));
    conv_gradients_agree(k, seed);
    seed += 3;
  }
  for (const pool_case& p : pool_cases) {
    INFO("input " << fx::to_string(p.input));
    auto x = filled<double>(p.input, seed++);
    x.mutable_data()[1 * p.input[3]] = x.data()[0];
    scoped_setting<fx::index_t> one_image(fx::detail::cuda_window::launch_limit(),
                                          p.input[1] * p.input[2] * p.input[3]);
    const fx::shape out = fx::max_pool2d(x, p.ksize, p.strides, p.pad).shape();
    const auto a = filled<double>(out, seed++), b = filled<double>(out, seed++);
    check_values(pool_gradient<fx::cuda>(p, x, a, b), pool_gradient<fx::cpu>(p, x, a, b), 1e-12);
    same_on_both_devices([&](const auto& xi) { return fx::max_pool2d(xi, p.ksize, p.strides, p.pad); }, x);
    same_on_both_devices([&](const auto& xi) { return fx::avg_pool2d(xi, p.ksize, p.strides, p.pad); }, x);
  }
}

TEST_CASE("cuda window ops: an image larger than one launch can index fails cleanly, naming the op") {
  im2col_only path;
  scoped_setting<fx::index_t> small(fx::detail::cuda_window::launch_limit(), 3);
  fx::tensor<float, fx::cuda> x = fx::to<fx::cuda>(filled<float>({1, 4, 4, 1}, 110));
  fx::tensor<float, fx::cuda> w = fx::to<fx::cuda>(filled<float>({3, 3, 1, 1}, 111));
  using device_tensor = fx::tensor<float, fx::cuda>;
  auto conv = [&] { return device_tensor(fx::conv2d(x, w, 1, fx::padding::same)); };
  auto pool = [&] { return device_tensor(fx::max_pool2d(x, 2, 2)); };
  CHECK_THROWS_WITH_AS(conv(), doctest::Contains("conv2d on cuda: one image needs 144 threads, more than one launch indexes (3)"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(pool(), doctest::Contains("max_pool2d on cuda: one image needs 4 threads"),
                       fx::invalid_argument);
}

TEST_CASE_TEMPLATE("cuda conv2d: im2col and col2im give the same bits in 16-byte lanes as one element at a time", T,
                   float, double) {
  // The lanes only regroup loads and stores: each element is copied, and each input gradient is
  // summed over the same taps in the same order.
  im2col_only path;
  int seed = 130;
  for (const conv_case& k : conv_cases) {
    INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
    const auto x = filled<T>(k.input, seed), w = filled<T>(k.filters, seed + 1, T(-0.5), T(0.5));
    const auto c = filled<T>(fx::conv2d(x, w, k.strides, k.pad, k.dilations).shape(), seed + 2);
    seed += 3;
    const auto wide = conv_gradients<fx::cuda>(k, x, w, c);
    scoped_setting<bool> narrow(fx::detail::cuda_window::wide_lanes(), false);
    const auto single = conv_gradients<fx::cuda>(k, x, w, c);
    for (std::size_t i = 0; i < wide.size(); ++i) CHECK(wide[i] == single[i]);
  }
}

TEST_CASE("cuda conv2d: lanes are used only where the channels divide and the buffers are 16-byte aligned") {
  using fx::detail::cuda_window::lane_width;
  alignas(16) float f[16] = {};
  alignas(16) double d[8] = {};
  CHECK(lane_width<float>(8, f, f + 4) == 4);
  CHECK(lane_width<float>(4, f, f) == 4);
  CHECK(lane_width<float>(6, f, f) == 1);   // channels not a multiple of 4
  CHECK(lane_width<float>(8, f + 1, f) == 1);  // a misaligned input
  CHECK(lane_width<float>(8, f, f + 2) == 1);  // a misaligned output
  CHECK(lane_width<double>(6, d, d + 2) == 2);
  CHECK(lane_width<double>(3, d, d) == 1);
  CHECK(lane_width<double>(4, d + 1, d) == 1);
  scoped_setting<bool> off(fx::detail::cuda_window::wide_lanes(), false);
  CHECK(lane_width<float>(8, f, f) == 1);
}

TEST_CASE("cuda window ops: the kernels' fixed-divisor division equals integer division below 2^31") {
  using fx::detail::cuda_window::divider;
  using u32 = std::uint32_t;
  const u32 top = 0x7FFFFFFFu;
  std::vector<u32> divisors = {1, 2, 3, 5, 7, 10, 25, 32, 49, 100, 196, 784, 800, 1000, 65537, (1u << 20) + 1,
                               top - 1, top, 1u << 31};
  std::uint64_t state = 12345;
  auto next = [&] {  // a 64-bit LCG: dividends spread over [0, 2^31)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<u32>(state >> 33);
  };
  for (int i = 0; i < 40; ++i) divisors.push_back(next() % 5000 + 1);
  for (u32 d : divisors) {
    const divider by(d);
    std::vector<u32> dividends = {0, 1, d - 1, d, top, top - 1};
    if (d < top) dividends.push_back(d + 1);
    for (u32 q : {2u, 3u, 1000u}) {
      if (std::uint64_t(d) * q <= top) {
        dividends.push_back(d * q - 1);
        dividends.push_back(d * q);
      }
    }
    for (int i = 0; i < 2000; ++i) dividends.push_back(next());
    int reported = 0;
    for (u32 n : dividends) {
      if (by.div(n) != n / d && reported++ < 3) {
        INFO(n << " / " << d << ": divider gives " << by.div(n) << ", expected " << n / d);
        CHECK(false);
      }
    }
    CHECK(reported == 0);
  }
}

namespace {
/// max |got - want| <= rtol * max(1, max |want|): float results of long sums that cancel.
void close_in_norm(const std::vector<float>& got, const std::vector<float>& want, double rtol) {
  REQUIRE(got.size() == want.size());
  double scale = 1, worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    scale = std::max(scale, std::abs(double(want[i])));
    worst = std::max(worst, std::abs(double(got[i]) - double(want[i])));
  }
  INFO("largest difference " << worst << ", largest element " << scale);
  CHECK(worst <= rtol * scale);
}

/// Whether padding both sides by the padding before (cuDNN's only kind) gives conv case k's output
/// size on both axes, an independent count of what backend/cuda/cudnn.hpp checks through cuDNN.
bool symmetric_padding_suffices(const conv_case& k) {
  const auto x = fx::tensor<double>(k.input), w = fx::tensor<double>(k.filters);
  const fx::shape out = fx::conv2d(x, w, k.strides, k.pad, k.dilations).shape();
  auto axis = [&](fx::index_t in, fx::index_t filter, fx::index_t stride, fx::index_t dilation, fx::index_t want) {
    const fx::index_t span = dilation * (filter - 1) + 1;
    // TensorFlow's same padding puts the smaller half before; valid pads nothing.
    const fx::index_t total = k.pad == fx::padding::same ? std::max<fx::index_t>((want - 1) * stride + span - in, 0) : 0;
    const fx::index_t before = total / 2;
    return (in + 2 * before - span) / stride + 1 == want;
  };
  return axis(k.input[1], k.filters[0], k.strides.height, k.dilations.height, out[1]) &&
         axis(k.input[2], k.filters[1], k.strides.width, k.dilations.width, out[2]);
}

/// Float inputs of conv case k (image, filter, output gradient) from seeds seed..seed + 2, and the
/// reference: the cpu's value and gradients in double from the same inputs, rounded to float.
struct float_conv {
  fx::tensor<float> x, w, c;
  std::vector<std::vector<float>> exact;
  float_conv(const conv_case& k, int seed)
      : x(filled<float>(k.input, seed)),
        w(filled<float>(k.filters, seed + 1, -0.5, 0.5)),
        c(filled<float>(fx::conv2d(x, w, k.strides, k.pad, k.dilations).shape(), seed + 2)) {
    for (const auto& v : conv_gradients<fx::cpu>(k, fx::tensor<double>(fx::cast<double>(x)),
                                                  fx::tensor<double>(fx::cast<double>(w)),
                                                  fx::tensor<double>(fx::cast<double>(c))))
      exact.emplace_back(v.begin(), v.end());
  }
};
}  // namespace

TEST_CASE("cuda conv2d: cuDNN, where built in, gives the cpu's and im2col's values and gradients, the same on every run") {
  // Float (cuDNN's type here). The conv cases, plus padding larger after than before that changes
  // the output size (same padding of an even filter, and of a stride that leaves a remainder),
  // which cuDNN cannot pad and leaves to im2col, and the CNN's second convolution. Each geometry
  // runs four ways: im2col alone, cuDNN wherever it has a deterministic algorithm (the test hook
  // cudnn_always) in NHWC and in NCHW (cudnn_layouts), and the library's own choice per pass (the
  // fastest, timed on the first call).
  std::vector<conv_case> cases(std::begin(conv_cases), std::end(conv_cases));
  cases.push_back({{2, 6, 7, 3}, {2, 2, 3, 4}, 1, 1, fx::padding::same});
  cases.push_back({{1, 8, 8, 2}, {3, 3, 2, 3}, 3, 1, fx::padding::same});
  cases.push_back({{4, 14, 14, 32}, {5, 5, 32, 64}, 1, 1, fx::padding::same});
  int seed = 130;
  for (const conv_case& k : cases) {
    INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
    const float_conv in(k, seed);  // the reference: the cpu in double, from the same float inputs
    const auto &x = in.x, &w = in.w, &c = in.c;
    const auto& cpu = in.exact;
    seed += 3;
    // Float sums of up to 1600 products (the CNN's case) that cancel: each float result is held to
    // 1e-4 of its largest element, the cpu's own float kernels included.
    const auto cpu_float = conv_gradients<fx::cpu>(k, x, w, c);
    for (std::size_t i = 0; i < cpu.size(); ++i) close_in_norm(cpu_float[i], cpu[i], 1e-4);
    std::vector<std::vector<float>> im2col;
    {
      im2col_only path;
      im2col = conv_gradients<fx::cuda>(k, x, w, c);
    }
    for (int layouts : {1, 2}) {  // cuDNN in fluxion's NHWC, then in NCHW through conversions
      INFO("cuDNN layouts " << (layouts == 1 ? "NHWC" : "NCHW"));
      long forced_passes = 0, forced_nchw = 0;
      std::vector<std::vector<float>> first, again;
      {
        scoped_setting<std::atomic<bool>> always(fx::detail::cudnn_always(), true);
        scoped_setting<std::atomic<int>> layout(fx::detail::cudnn_layouts(), layouts);
        const long before = fx::detail::cudnn_passes().load(), before_nchw = fx::detail::cudnn_nchw_passes().load();
        first = conv_gradients<fx::cuda>(k, x, w, c);  // each pass's algorithm search
        again = conv_gradients<fx::cuda>(k, x, w, c);  // the algorithms kept
        forced_passes = fx::detail::cudnn_passes().load() - before;
        forced_nchw = fx::detail::cudnn_nchw_passes().load() - before_nchw;
      }
      for (std::size_t i = 0; i < cpu.size(); ++i) {
        close_in_norm(first[i], cpu[i], 1e-4);
        CHECK(again[i] == first[i]);  // deterministic algorithms only: bit for bit
      }
      const bool pointwise = k.filters[0] == 1 && k.filters[1] == 1;  // one product through cuBLAS
      const bool asymmetric = !symmetric_padding_suffices(k);
      // Where cuDNN's symmetric padding changes the output size (both added cases, and the stride-2
      // same case), and for a 1x1 filter (one product), cuDNN is not called.
      if (!fx::cudnn_built || pointwise || asymmetric) {
        CHECK(forced_passes == 0);
      } else {
        // Each conv_gradients call: the forward pass, then tape.gradient(y, x) and
        // tape.gradient(y, w) each run the convolution's backward, both gradient passes: 5, twice.
        CHECK(forced_passes == 10);
        CHECK(forced_nchw == (layouts == 2 ? 10 : 0));
      }
    }
    // The library's own route per pass: the fastest of im2col and cuDNN's two layouts.
    const auto chosen = conv_gradients<fx::cuda>(k, x, w, c);
    const auto chosen_again = conv_gradients<fx::cuda>(k, x, w, c);
    for (std::size_t i = 0; i < cpu.size(); ++i) {
      close_in_norm(im2col[i], cpu[i], 1e-4);
      close_in_norm(chosen[i], cpu[i], 1e-4);
      CHECK(chosen_again[i] == chosen[i]);
    }
  }
#if FLUXION_HAVE_CUDNN
  MESSAGE("routes:\n" << fx::detail::cudnn::report());
#else
  MESSAGE("built without cuDNN: every run went through im2col");
#endif
}

TEST_CASE("cuda conv2d: with allow_nondeterministic_cudnn(true), any of cuDNN's algorithms gives the cpu's values and gradients") {
  // Off by default; on, a pass chooses among all of cuDNN's algorithms (filter gradients that add
  // with atomics too). Without cuDNN the setting changes nothing: im2col runs either way.
  CHECK(!fx::nondeterministic_cudnn_allowed());
  fx::allow_nondeterministic_cudnn(true);
  CHECK(fx::nondeterministic_cudnn_allowed());
  fx::allow_nondeterministic_cudnn(false);
  scoped_setting<std::atomic<bool>> any(fx::detail::cudnn_nondeterministic_flag(), true);
  const conv_case cases[] = {{{4, 14, 14, 32}, {5, 5, 32, 64}, 1, 1, fx::padding::same},
                             {{3, 9, 8, 5}, {3, 3, 5, 6}, 1, 1, fx::padding::valid}};
  int seed = 210;
  for (const conv_case& k : cases) {
    INFO("input " << fx::to_string(k.input) << ", filters " << fx::to_string(k.filters));
    const float_conv in(k, seed);
    seed += 3;
    for (int layouts : {1, 2}) {
      INFO("cuDNN layouts " << (layouts == 1 ? "NHWC" : "NCHW"));
      std::vector<std::vector<float>> forced;
      const long before = fx::detail::cudnn_passes().load();
      {
        scoped_setting<std::atomic<bool>> always(fx::detail::cudnn_always(), true);
        scoped_setting<std::atomic<int>> layout(fx::detail::cudnn_layouts(), layouts);
        forced = conv_gradients<fx::cuda>(k, in.x, in.w, in.c);
      }
      const long forced_passes = fx::detail::cudnn_passes().load() - before;
      for (std::size_t i = 0; i < in.exact.size(); ++i) close_in_norm(forced[i], in.exact[i], 1e-4);
      CHECK(forced_passes == (fx::cudnn_built ? 5 : 0));
    }
    const auto chosen = conv_gradients<fx::cuda>(k, in.x, in.w, in.c);
    for (std::size_t i = 0; i < in.exact.size(); ++i) close_in_norm(chosen[i], in.exact[i], 1e-4);
  }
#if FLUXION_HAVE_CUDNN
  MESSAGE("routes with any determinism:\n" << fx::detail::cudnn::report());
#endif
}
