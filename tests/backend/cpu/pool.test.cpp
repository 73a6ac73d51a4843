// Pooling kernels against a naive loop (forward) and central finite differences (backward, double),
// over `same`/`valid` padding, strides larger and smaller than the window, odd sizes and empty
// batches; plus TensorFlow's conventions: `same` averages divide by the valid count, and max pool
// routes a tie's gradient to the first maximal element.
#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fluxion/backend/cpu/pool.hpp>

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace pool_test {

namespace cpu = fluxion::detail::kernels;
using fluxion::index_t;

namespace {

template <class T>
std::vector<T> random_vector(index_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// Naive forward: the max or mean over the window's valid elements.
template <class T>
std::vector<T> naive_pool(const cpu::pool2d_shape& s, const std::vector<T>& x, bool max) {
  std::vector<T> y(static_cast<std::size_t>(s.output_size()));
  for (index_t n = 0; n < s.batch; ++n)
    for (index_t oh = 0; oh < s.out_h; ++oh)
      for (index_t ow = 0; ow < s.out_w; ++ow)
        for (index_t c = 0; c < s.channels; ++c) {
          double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
          index_t count = 0;
          for (index_t kh = 0; kh < s.window_h; ++kh)
            for (index_t kw = 0; kw < s.window_w; ++kw) {
              const index_t ih = oh * s.stride_h - s.pad_top + kh, iw = ow * s.stride_w - s.pad_left + kw;
              if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
              const double v = x[static_cast<std::size_t>(((n * s.in_h + ih) * s.in_w + iw) * s.channels + c)];
              acc = max ? std::max(acc, v) : acc + v;
              ++count;
            }
          y[static_cast<std::size_t>(((n * s.out_h + oh) * s.out_w + ow) * s.channels + c)] =
              static_cast<T>(count == 0 ? 0.0
                             : max      ? acc
                                        : acc / static_cast<double>(count));
        }
  return y;
}

std::vector<cpu::pool2d_shape> test_shapes() {
  using cpu::padding_mode;
  return {cpu::pool2d_tf_shape(2, 6, 6, 3, 2, 2, 2, 2, padding_mode::same),
          cpu::pool2d_tf_shape(2, 7, 5, 4, 2, 2, 2, 2, padding_mode::same),   // odd: a partial window
          cpu::pool2d_tf_shape(1, 7, 8, 3, 3, 3, 2, 2, padding_mode::valid),  // overlapping windows
          cpu::pool2d_tf_shape(1, 9, 7, 2, 3, 2, 1, 3, padding_mode::same),
          cpu::pool2d_tf_shape(3, 5, 5, 1, 2, 3, 3, 1, padding_mode::valid),
          cpu::pool2d_tf_shape(1, 4, 4, 17, 4, 4, 1, 1, padding_mode::same),  // window as big as the input
          cpu::pool2d_tf_shape(2, 8, 6, 33, 2, 2, 2, 2, padding_mode::same),  // windows tile the image
          cpu::pool2d_tf_shape(1, 8, 7, 3, 2, 2, 3, 3, padding_mode::valid),  // disjoint, with gaps between
          cpu::pool2d_tf_shape(1, 2, 2, 3, 3, 3, 1, 1, padding_mode::valid),  // empty output
          cpu::pool2d_tf_shape(0, 4, 4, 3, 2, 2, 2, 2, padding_mode::same)};  // empty batch
}

std::string describe(const cpu::pool2d_shape& s) {
  auto v = [](index_t x) { return std::to_string(x); };
  return "batch=" + v(s.batch) + " in=" + v(s.in_h) + "x" + v(s.in_w) + "x" + v(s.channels) +
         " window=" + v(s.window_h) + "x" + v(s.window_w) + " stride=" + v(s.stride_h) + "," + v(s.stride_w) +
         " out=" + v(s.out_h) + "x" + v(s.out_w);
}

}  // namespace

TEST_CASE_TEMPLATE("pooling forward matches a naive loop", T, float, double) {
  std::mt19937 rng(3);
  for (const auto& s : test_shapes()) {
    INFO(describe(s));
    auto x = random_vector<T>(s.input_size(), rng);
    std::vector<T> y(static_cast<std::size_t>(s.output_size()));
    cpu::max_pool2d_forward<T>(s, x.data(), y.data());
    CHECK(y == naive_pool(s, x, true));
    cpu::avg_pool2d_forward<T>(s, x.data(), y.data());
    const auto want = naive_pool(s, x, false);
    for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-5));
  }
}

TEST_CASE("pooling backward matches central finite differences of the forward kernels") {
  std::mt19937 rng(4);
  for (const auto& s : test_shapes()) {
    INFO(describe(s));
    auto x = random_vector<double>(s.input_size(), rng);  // distinct values: the max is unique
    auto dy = random_vector<double>(s.output_size(), rng);
    std::vector<double> y(static_cast<std::size_t>(s.output_size()));
    for (bool max : {true, false}) {
      auto loss = [&] {
        if (max)
          cpu::max_pool2d_forward<double>(s, x.data(), y.data());
        else
          cpu::avg_pool2d_forward<double>(s, x.data(), y.data());
        double l = 0;
        for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
        return l;
      };
      std::vector<double> dx(x.size(), 7.0);
      if (max)
        cpu::max_pool2d_backward<double>(s, x.data(), dy.data(), dx.data());
      else
        cpu::avg_pool2d_backward<double>(s, dy.data(), dx.data());
      for (std::size_t i = 0; i < x.size(); ++i) {
        const double h = 1e-6, saved = x[i];
        x[i] = saved + h;
        const double up = loss();
        x[i] = saved - h;
        const double down = loss();
        x[i] = saved;
        CHECK(dx[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE_TEMPLATE("pooling follows TensorFlow's conventions", T, float, double) {
  // One 3x3 image, one channel, 2x2 windows with stride 2 and `same` padding: windows of 4, 2, 2, 1.
  const auto s = cpu::pool2d_tf_shape(1, 3, 3, 1, 2, 2, 2, 2, cpu::padding_mode::same);
  REQUIRE(s.out_h == 2);
  REQUIRE(s.pad_top == 0);
  const std::vector<T> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<T> y(4);
  cpu::avg_pool2d_forward<T>(s, x.data(), y.data());
  CHECK(y == std::vector<T>{3, 4.5, 7.5, 9});  // divided by the valid count, not by 4

  // Ties: the whole gradient goes to the first maximal element in row-major window order.
  const std::vector<T> flat = {5, 5, 1, 5, 5, 1, 2, 2, 2};
  const std::vector<T> dy = {1, 10, 100, 1000};
  std::vector<T> dx(9);
  cpu::max_pool2d_backward<T>(s, flat.data(), dy.data(), dx.data());
  CHECK(dx == std::vector<T>{1, 0, 10, 0, 0, 0, 100, 0, 1000});

  CHECK_THROWS_WITH_AS(cpu::pool2d_tf_shape(1, 3, 3, 1, 0, 2, 1, 1, cpu::padding_mode::valid),
                       "pool2d: window size = 0 must be at least 1", fluxion::invalid_argument);
  cpu::pool2d_shape bad = s;
  bad.stride_w = 0;
  CHECK_THROWS_WITH_AS(cpu::max_pool2d_forward<T>(bad, x.data(), y.data()),
                       "max_pool2d_forward: stride_w = 0 must be at least 1", fluxion::invalid_argument);
}

TEST_CASE("pooling backward is bitwise identical for 1, 2 and 3 threads") {
  std::mt19937 rng(8);
  const int saved = fluxion::get_num_threads();
  const auto s = cpu::pool2d_tf_shape(8, 15, 15, 24, 3, 3, 2, 2, cpu::padding_mode::same);  // overlapping
  auto x = random_vector<float>(s.input_size(), rng);
  auto dy = random_vector<float>(s.output_size(), rng);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3}) {
    fluxion::set_num_threads(threads);
    std::vector<float> dx(x.size()), da(x.size());
    cpu::max_pool2d_backward<float>(s, x.data(), dy.data(), dx.data());
    cpu::avg_pool2d_backward<float>(s, dy.data(), da.data());
    dx.insert(dx.end(), da.begin(), da.end());
    results.push_back(std::move(dx));
  }
  fluxion::set_num_threads(saved);
  CHECK(results[0] == results[1]);
  CHECK(results[0] == results[2]);
}

TEST_CASE_TEMPLATE("max pooling propagates NaN, and its gradient goes to the first NaN", T, float, double) {
  // As reduce_max, TensorFlow and PyTorch: a window with a NaN pools to NaN, wherever the NaN is in
  // it, and the window's gradient goes to its first NaN (a NaN beats every number). Values from
  // {0, 1, NaN, inf, -inf}, on the 2x2 tiling path (vector lanes and a scalar remainder) and the generic
  // disjoint and overlapping paths.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> dist(0, 7);
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (const auto& s : {cpu::pool2d_tf_shape(2, 4, 6, 19, 2, 2, 2, 2, cpu::padding_mode::same),
                        cpu::pool2d_tf_shape(1, 6, 4, 40, 2, 2, 2, 2, cpu::padding_mode::valid),
                        cpu::pool2d_tf_shape(2, 5, 7, 19, 2, 2, 2, 2, cpu::padding_mode::same),
                        cpu::pool2d_tf_shape(1, 7, 7, 9, 3, 3, 2, 2, cpu::padding_mode::same),
                        cpu::pool2d_tf_shape(1, 8, 7, 3, 2, 2, 3, 3, cpu::padding_mode::valid)}) {
    INFO(describe(s));
    std::vector<T> x(static_cast<std::size_t>(s.input_size())), dy(static_cast<std::size_t>(s.output_size()));
    for (auto& v : x) {
      const int r = dist(rng);
      v = r == 0 ? nan : r == 1 ? inf : r == 2 ? -inf : static_cast<T>(r % 2);  // inf - inf: NaN too
    }
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<T>(i + 1);
    std::vector<T> want_dx(x.size(), T(0)), dx(x.size(), T(7));
    std::vector<index_t> source(dy.size(), -1);  // the element each output must equal
    for (index_t n = 0; n < s.batch; ++n)
      for (index_t oh = 0; oh < s.out_h; ++oh)
        for (index_t ow = 0; ow < s.out_w; ++ow)
          for (index_t c = 0; c < s.channels; ++c) {
            index_t best = -1, first_nan = -1;
            for (index_t kh = 0; kh < s.window_h; ++kh)
              for (index_t kw = 0; kw < s.window_w; ++kw) {
                const index_t ih = oh * s.stride_h - s.pad_top + kh, iw = ow * s.stride_w - s.pad_left + kw;
                if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
                const index_t at = ((n * s.in_h + ih) * s.in_w + iw) * s.channels + c;
                const T v = x[static_cast<std::size_t>(at)];
                if (std::isnan(v) && first_nan < 0) first_nan = at;
                if (!std::isnan(v) && (best < 0 || v > x[static_cast<std::size_t>(best)])) best = at;
              }
            if (first_nan >= 0) best = first_nan;
            const std::size_t o = static_cast<std::size_t>(((n * s.out_h + oh) * s.out_w + ow) * s.channels + c);
            if (best >= 0) want_dx[static_cast<std::size_t>(best)] += dy[o];
            source[o] = best;
          }
    std::vector<T> y(dy.size(), T(7));
    cpu::max_pool2d_forward<T>(s, x.data(), y.data());
    int wrong_y = 0;
    for (std::size_t o = 0; o < y.size(); ++o) {
      const T want = x[static_cast<std::size_t>(source[o])];
      if (!(y[o] == want || (std::isnan(y[o]) && std::isnan(want)))) ++wrong_y;
    }
    CHECK(wrong_y == 0);
    cpu::max_pool2d_backward<T>(s, x.data(), dy.data(), dx.data());
    CHECK(dx == want_dx);
  }
}

TEST_CASE_TEMPLATE("max pool backward routes ties to the first maximum in every layout", T, float, double) {
  // Values from {0, 1, 2}: most windows tie. Shapes cover the 2x2 stride-2 tiling path (vector
  // lanes and a scalar remainder of channels) and the generic disjoint and overlapping paths.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> dist(0, 2);
  for (const auto& s : {cpu::pool2d_tf_shape(2, 4, 6, 19, 2, 2, 2, 2, cpu::padding_mode::same),
                        cpu::pool2d_tf_shape(1, 6, 4, 40, 2, 2, 2, 2, cpu::padding_mode::valid),
                        cpu::pool2d_tf_shape(2, 5, 7, 19, 2, 2, 2, 2, cpu::padding_mode::same),
                        cpu::pool2d_tf_shape(1, 7, 7, 9, 3, 3, 2, 2, cpu::padding_mode::same)}) {
    INFO(describe(s));
    std::vector<T> x(static_cast<std::size_t>(s.input_size())), dy(static_cast<std::size_t>(s.output_size()));
    for (auto& v : x) v = static_cast<T>(dist(rng));
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = static_cast<T>(i + 1);
    std::vector<T> want(x.size(), T(0)), dx(x.size(), T(7));
    for (index_t n = 0; n < s.batch; ++n)
      for (index_t oh = 0; oh < s.out_h; ++oh)
        for (index_t ow = 0; ow < s.out_w; ++ow)
          for (index_t c = 0; c < s.channels; ++c) {
            index_t best = -1;
            for (index_t kh = 0; kh < s.window_h; ++kh)
              for (index_t kw = 0; kw < s.window_w; ++kw) {
                const index_t ih = oh * s.stride_h - s.pad_top + kh, iw = ow * s.stride_w - s.pad_left + kw;
                if (ih < 0 || ih >= s.in_h || iw < 0 || iw >= s.in_w) continue;
                const index_t at = ((n * s.in_h + ih) * s.in_w + iw) * s.channels + c;
                if (best < 0 || x[static_cast<std::size_t>(at)] > x[static_cast<std::size_t>(best)]) best = at;
              }
            if (best >= 0)
              want[static_cast<std::size_t>(best)] +=
                  dy[static_cast<std::size_t>(((n * s.out_h + oh) * s.out_w + ow) * s.channels + c)];
          }
    cpu::max_pool2d_backward<T>(s, x.data(), dy.data(), dx.data());
    CHECK(dx == want);
  }
}

}  // namespace pool_test
