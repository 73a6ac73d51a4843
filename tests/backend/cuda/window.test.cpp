// The window ops on fx::cuda (backend/cuda/window.hpp), conv2d and pooling: forward values and
// the tape's gradients through them agree with the cpu kernels, for same and valid padding,
// strides, dilation, 1x1 filters (no im2col), im2col in chunks of one image, overlapping pooling
// windows and windows that hang over the border.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
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
};

/// d/dx and d/dw of sum(square(relu(conv2d(x, w)) * c)) on Device (double).
template <class Device>
std::vector<std::vector<double>> conv_gradients(const conv_case& k, const fx::tensor<double>& x0,
                                                const fx::tensor<double>& w0, const fx::tensor<double>& c0) {
  fx::tensor<double, Device> x = fx::to<Device>(x0), w = fx::to<Device>(w0), c = fx::to<Device>(c0);
  fx::gradient_tape tape(fx::persistent);
  tape.watch(x);
  tape.watch(w);
  fx::tensor<double, Device> y = fx::reduce_sum(fx::square(fx::relu(fx::conv2d(x, w, k.strides, k.pad, k.dilations)) * c));
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
/// Sets a process-wide setting for one scope.
template <class T>
struct scoped_setting {
  T& setting;
  T saved;
  scoped_setting(T& s, T value) : setting(s), saved(s) { setting = value; }
  ~scoped_setting() { setting = saved; }
};
}  // namespace

TEST_CASE("cuda conv2d: im2col in chunks of one image gives the cpu's values and gradients") {
  // The chunked path (a filter gradient added over chunks) runs for batches larger than the
  // im2col budget allows at once; a budget of one byte makes every image its own chunk.
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
