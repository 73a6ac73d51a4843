// conv2d kernels against a direct 7-loop reference over strides, dilations, `same`/`valid` and
// explicit padding, odd sizes, single channels and empty batches; the two backward kernels also
// against central finite differences of the forward kernel in double; and bitwise equality across
// thread counts.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <fluxion/backend/cpu/conv.hpp>

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

// Calls f(n, oh, ow, kh, kw, x_index or -1 when in padding) for every tap of every output pixel.
template <class F>
void for_each_tap(const cpu::conv2d_shape& s, F&& f) {
  for (index_t n = 0; n < s.batch; ++n)
    for (index_t oh = 0; oh < s.out_h; ++oh)
      for (index_t ow = 0; ow < s.out_w; ++ow)
        for (index_t kh = 0; kh < s.filter_h; ++kh)
          for (index_t kw = 0; kw < s.filter_w; ++kw) {
            const index_t ih = oh * s.stride_h - s.pad_top + kh * s.dilation_h;
            const index_t iw = ow * s.stride_w - s.pad_left + kw * s.dilation_w;
            const bool inside = ih >= 0 && ih < s.in_h && iw >= 0 && iw < s.in_w;
            f(n, oh, ow, kh, kw, inside ? ((n * s.in_h + ih) * s.in_w + iw) * s.in_c : index_t(-1));
          }
}

// Reference results in long double: forward, input gradient, filter gradient.
template <class T>
struct reference {
  std::vector<long double> y, dx, dw;
};

template <class T>
reference<T> naive(const cpu::conv2d_shape& s, const std::vector<T>& x, const std::vector<T>& w,
                   const std::vector<T>& dy) {
  reference<T> r;
  r.y.assign(static_cast<std::size_t>(s.output_size()), 0);
  r.dx.assign(static_cast<std::size_t>(s.input_size()), 0);
  r.dw.assign(static_cast<std::size_t>(s.filter_size()), 0);
  for_each_tap(s, [&](index_t n, index_t oh, index_t ow, index_t kh, index_t kw, index_t xi) {
    if (xi < 0) return;
    const index_t yi = ((n * s.out_h + oh) * s.out_w + ow) * s.out_c;
    for (index_t ci = 0; ci < s.in_c; ++ci)
      for (index_t co = 0; co < s.out_c; ++co) {
        const index_t wi = ((kh * s.filter_w + kw) * s.in_c + ci) * s.out_c + co;
        const auto xs = static_cast<std::size_t>(xi + ci), ws = static_cast<std::size_t>(wi),
                   ys = static_cast<std::size_t>(yi + co);
        r.y[ys] += static_cast<long double>(x[xs]) * w[ws];
        r.dx[xs] += static_cast<long double>(dy[ys]) * w[ws];
        r.dw[ws] += static_cast<long double>(dy[ys]) * x[xs];
      }
  });
  return r;
}

// Largest |got - want| relative to a bound of terms * eps * (1 + |want|).
template <class T>
double worst_error(const std::vector<T>& got, const std::vector<long double>& want, double terms) {
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound =
        (terms + 4) * std::numeric_limits<T>::epsilon() * (1 + std::fabs(static_cast<double>(want[i])));
    worst = std::max(worst, std::fabs(static_cast<double>(got[i] - want[i])) / bound);
  }
  return worst;
}

std::string describe(const cpu::conv2d_shape& s) {
  auto v = [](index_t x) { return std::to_string(x); };
  return "batch=" + v(s.batch) + " in=" + v(s.in_h) + "x" + v(s.in_w) + "x" + v(s.in_c) + " filter=" + v(s.filter_h) +
         "x" + v(s.filter_w) + " out_c=" + v(s.out_c) + " stride=" + v(s.stride_h) + "," + v(s.stride_w) +
         " dilation=" + v(s.dilation_h) + "," + v(s.dilation_w) + " pad=" + v(s.pad_top) + "," + v(s.pad_left) +
         " out=" + v(s.out_h) + "x" + v(s.out_w);
}

std::vector<cpu::conv2d_shape> test_shapes() {
  using cpu::padding_mode;
  std::vector<cpu::conv2d_shape> shapes = {
      cpu::conv2d_tf_shape(2, 7, 6, 3, 3, 3, 5, padding_mode::same),
      cpu::conv2d_tf_shape(2, 7, 6, 3, 3, 3, 5, padding_mode::valid),
      cpu::conv2d_tf_shape(1, 9, 8, 2, 3, 2, 17, padding_mode::same, 2, 3),
      cpu::conv2d_tf_shape(3, 8, 9, 4, 2, 3, 20, padding_mode::valid, 3, 2),
      cpu::conv2d_tf_shape(1, 10, 11, 3, 3, 3, 4, padding_mode::same, 1, 1, 2, 3),
      cpu::conv2d_tf_shape(2, 11, 10, 2, 2, 3, 18, padding_mode::valid, 2, 1, 3, 2),
      cpu::conv2d_tf_shape(2, 8, 8, 1, 5, 5, 32, padding_mode::same),               // the tutorial's first layer
      cpu::conv2d_tf_shape(1, 9, 11, 1, 3, 2, 16, padding_mode::same, 1, 1, 2, 3),  // single channel, dilated
      cpu::conv2d_tf_shape(1, 5, 21, 1, 5, 5, 32, padding_mode::same),  // single channel, rows of 1.3 vectors
      cpu::conv2d_tf_shape(2, 9, 10, 1, 3, 3, 8, padding_mode::valid, 2, 3),        // single channel, strided
      cpu::conv2d_tf_shape(1, 6, 6, 32, 5, 5, 13, padding_mode::same),              // k = 800: several KC slices
      cpu::conv2d_tf_shape(2, 5, 4, 6, 1, 1, 7, padding_mode::valid),               // pointwise
      cpu::conv2d_tf_shape(1, 5, 5, 3, 1, 1, 20, padding_mode::same, 2, 2),
      cpu::conv2d_tf_shape(2, 4, 4, 3, 3, 3, 1, padding_mode::same),   // one output channel
      cpu::conv2d_tf_shape(1, 3, 3, 2, 5, 5, 3, padding_mode::same),   // window larger than input
      cpu::conv2d_tf_shape(1, 3, 3, 2, 4, 4, 3, padding_mode::valid),  // empty output
      cpu::conv2d_tf_shape(0, 5, 5, 2, 3, 3, 3, padding_mode::same),   // empty batch
      // Direct kernels (conv_direct.hpp): channels in multiples of 32 floats, rows of about 14 pixels.
      cpu::conv2d_tf_shape(2, 6, 14, 32, 5, 5, 64, padding_mode::same),            // the tutorial's second layer
      cpu::conv2d_tf_shape(1, 7, 13, 16, 3, 3, 32, padding_mode::same, 1, 1, 2, 1),  // dilated rows, a short tile
      cpu::conv2d_tf_shape(2, 9, 27, 8, 3, 3, 32, padding_mode::same, 2, 2),         // strided
      cpu::conv2d_tf_shape(1, 5, 30, 32, 2, 4, 48, padding_mode::valid),            // 27 wide: a tile past the end
      // Winograd F(2x2, 5x5) (conv_winograd.hpp): odd output sizes (a tile past the end), channels
      // that are not whole vectors, several blocks of tiles and a partial last one, the input
      // gradient alone (forward out_c not a multiple of NR), valid padding.
      cpu::conv2d_tf_shape(1, 7, 9, 16, 5, 5, 32, padding_mode::valid),
      cpu::conv2d_tf_shape(2, 5, 6, 17, 5, 5, 32, padding_mode::same),
      cpu::conv2d_tf_shape(3, 9, 11, 16, 5, 5, 32, padding_mode::same),
      cpu::conv2d_tf_shape(1, 8, 7, 32, 5, 5, 20, padding_mode::same),
      // Filter gradient runs of 1 to 6 (kw, c_in) values: one tile of exactly that many rows.
      cpu::conv2d_tf_shape(1, 4, 6, 1, 2, 1, 32, padding_mode::same),
      cpu::conv2d_tf_shape(1, 5, 5, 2, 2, 1, 32, padding_mode::same, 2, 1),
      cpu::conv2d_tf_shape(1, 6, 7, 1, 3, 3, 32, padding_mode::same),
      cpu::conv2d_tf_shape(2, 5, 6, 2, 3, 2, 32, padding_mode::valid),
      cpu::conv2d_tf_shape(2, 5, 6, 2, 3, 3, 32, padding_mode::valid),
  };
  cpu::conv2d_shape explicit_padding = cpu::conv2d_tf_shape(1, 6, 7, 2, 3, 3, 19, padding_mode::valid);
  explicit_padding.pad_top = 2;  // more than `same` would use, and asymmetric
  explicit_padding.pad_left = 0;
  explicit_padding.out_h = 7;
  explicit_padding.out_w = 6;
  shapes.push_back(explicit_padding);
  return shapes;
}

}  // namespace

TEST_CASE("conv2d_tf_shape follows TensorFlow's padding rules") {
  using cpu::padding_mode;
  auto s = cpu::conv2d_tf_shape(1, 28, 28, 1, 5, 5, 32, padding_mode::same);
  CHECK(s.out_h == 28);
  CHECK(s.pad_top == 2);
  s = cpu::conv2d_tf_shape(1, 7, 8, 1, 4, 4, 1, padding_mode::same, 2, 3);  // pad totals 3 and 2
  CHECK(s.out_h == 4);
  CHECK(s.out_w == 3);
  CHECK(s.pad_top == 1);  // the odd row goes below
  CHECK(s.pad_left == 1);
  s = cpu::conv2d_tf_shape(1, 10, 10, 1, 3, 3, 1, padding_mode::valid, 2, 2, 2, 2);  // effective window 5
  CHECK(s.out_h == 3);
  CHECK(s.pad_top == 0);
  CHECK_THROWS_WITH_AS(cpu::conv2d_tf_shape(1, 5, 5, 1, 3, 3, 1, padding_mode::same, 0),
                       "conv2d: stride = 0 must be at least 1", fluxion::invalid_argument);
  cpu::conv2d_shape bad = s;
  bad.pad_left = -1;
  std::vector<float> buf(1000);
  CHECK_THROWS_WITH_AS(cpu::conv2d_forward<float>(bad, buf.data(), buf.data(), buf.data()),
                       "conv2d_forward: pad_left = -1 is negative", fluxion::invalid_argument);
}

TEST_CASE_TEMPLATE("conv2d kernels match a direct loop", T, float, double) {
  std::mt19937 rng(11);
  for (const auto& s : test_shapes()) {
    INFO(describe(s));
    auto x = random_vector<T>(s.input_size(), rng);
    auto w = random_vector<T>(s.filter_size(), rng);
    auto dy = random_vector<T>(s.output_size(), rng);
    auto bias = random_vector<T>(s.out_c, rng);
    const auto want = naive(s, x, w, dy);
    const double terms = static_cast<double>(s.filter_h * s.filter_w * std::max(s.in_c, s.out_c));

    // Every method, whichever the shape would choose: direct single-channel kernels (where they
    // apply) or im2col, and for the input gradient, gather or scatter.
    for (int direct : {1, 0}) {
      cpu::conv_detail::single_channel_mode = direct;
      cpu::conv_detail::direct_mode = direct;
      cpu::conv_detail::winograd_mode = direct ? 2 : 0;  // 2: even where too few tiles make it pay
      std::vector<T> y(static_cast<std::size_t>(s.output_size()), T(7));
      cpu::conv2d_forward<T>(s, x.data(), w.data(), y.data());
      CHECK(worst_error(y, want.y, terms) <= 1.0);

      // Fused bias and relu.
      cpu::conv2d_forward<T>(s, x.data(), w.data(), y.data(), {bias.data(), cpu::activation::relu});
      auto want_fused = want.y;
      for (std::size_t i = 0; i < want_fused.size(); ++i)
        want_fused[i] = std::max<long double>(want_fused[i] + bias[i % static_cast<std::size_t>(s.out_c)], 0);
      CHECK(worst_error(y, want_fused, terms) <= 1.0);

      // relu keeps NaN, as ops::relu and TensorFlow do: a NaN bias makes its whole channel NaN.
      if (s.out_c > 1 && s.output_size() > 0) {
        auto nan_bias = bias;
        nan_bias[1] = std::numeric_limits<T>::quiet_NaN();
        cpu::conv2d_forward<T>(s, x.data(), w.data(), y.data(), {nan_bias.data(), cpu::activation::relu});
        bool channel_nan = true, others_finite = true;
        for (std::size_t i = 0; i < y.size(); ++i) {
          if (i % static_cast<std::size_t>(s.out_c) == 1) channel_nan = channel_nan && std::isnan(y[i]);
          else others_finite = others_finite && std::isfinite(y[i]);
        }
        CHECK(channel_nan);
        CHECK(others_finite);
      }

      for (int method : {1, 2}) {
        cpu::conv_detail::input_grad_method = method;
        std::vector<T> dx(static_cast<std::size_t>(s.input_size()), T(7));
        cpu::conv2d_backward_input<T>(s, dy.data(), w.data(), dx.data());
        CHECK(worst_error(dx, want.dx, terms) <= 1.0);
      }
      cpu::conv_detail::input_grad_method = 0;

      std::vector<T> dw(static_cast<std::size_t>(s.filter_size()), T(7));
      cpu::conv2d_backward_filter<T>(s, x.data(), dy.data(), dw.data());
      const double pixels = static_cast<double>(s.batch * s.out_h * s.out_w);
      CHECK(worst_error(dw, want.dw, pixels) <= 1.0);
    }
    cpu::conv_detail::single_channel_mode = 1;
    cpu::conv_detail::direct_mode = 1;
    cpu::conv_detail::winograd_mode = 1;
  }
}

TEST_CASE_TEMPLATE("Winograd runs the 5x5 stride-1 layers it is meant for", T, float, double) {
  using cpu::padding_mode;
  if (!cpu::has_xsimd_arch) return;  // scalar builds use the direct loops
  const auto layer2 = cpu::conv2d_tf_shape(64, 14, 14, 32, 5, 5, 64, padding_mode::same);
  CHECK(cpu::conv_detail::winograd_applies<T>(layer2));
  CHECK(cpu::conv_detail::winograd_backward_input_applies<T>(layer2));
  // At batch 1 the same layer has 49 tiles: the filter transform would cost more than it saves.
  const auto layer2_batch1 = cpu::conv2d_tf_shape(1, 14, 14, 32, 5, 5, 64, padding_mode::same);
  CHECK_FALSE(cpu::conv_detail::winograd_applies<T>(layer2_batch1));
  CHECK(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(3, 14, 14, 32, 5, 5, 64, padding_mode::same)));
  cpu::conv_detail::winograd_mode = 2;  // the small shapes below: where the method applies at all
  // the shapes "match a direct loop" runs for this path
  CHECK(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(2, 5, 6, 17, 5, 5, 32, padding_mode::same)));
  CHECK(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(1, 7, 9, 16, 5, 5, 32, padding_mode::valid)));
  CHECK(cpu::conv_detail::winograd_backward_input_applies<T>(
      cpu::conv2d_tf_shape(1, 8, 7, 32, 5, 5, 20, padding_mode::same)));
  CHECK_FALSE(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(1, 9, 9, 32, 5, 5, 64, padding_mode::same, 2, 2)));
  CHECK_FALSE(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(1, 9, 9, 32, 3, 3, 64, padding_mode::same)));
  CHECK_FALSE(cpu::conv_detail::winograd_applies<T>(cpu::conv2d_tf_shape(1, 9, 9, 4, 5, 5, 64, padding_mode::same)));
  cpu::conv_detail::winograd_mode = 1;
}

TEST_CASE_TEMPLATE("conv2d_forward_reused_filter: Winograd at any batch on a cached filter transform", T, float,
                   double) {
  using cpu::padding_mode;
  using cache = cpu::conv_detail::winograd_filter_cache<T>;
  std::mt19937 rng(23);
  cache::instance().clear();
  std::uint64_t key = 100;  // a new key for new values, as tensor ids are (a freed vector's address comes back)
  // Batch 1 (49 tiles, below winograd_min_tiles: conv2d_forward runs the direct kernel) and batch 3
  // (147 tiles: conv2d_forward runs Winograd itself); odd sizes and valid padding; and shapes where
  // Winograd never applies (stride 2, 3x3, 8 input channels), which fall back to conv2d_forward.
  for (const auto& s : {cpu::conv2d_tf_shape(1, 14, 14, 32, 5, 5, 64, padding_mode::same),
                        cpu::conv2d_tf_shape(3, 14, 14, 32, 5, 5, 64, padding_mode::same),
                        cpu::conv2d_tf_shape(2, 9, 7, 17, 5, 5, 32, padding_mode::valid),
                        cpu::conv2d_tf_shape(1, 9, 9, 32, 5, 5, 64, padding_mode::same, 2, 2),
                        cpu::conv2d_tf_shape(1, 9, 9, 32, 3, 3, 64, padding_mode::same),
                        cpu::conv2d_tf_shape(1, 9, 9, 8, 5, 5, 32, padding_mode::same)}) {
    INFO(describe(s));
    const bool winograd = cpu::has_xsimd_arch && s.filter_h == 5 && s.stride_h == 1 && s.in_c >= 16;
    auto x = random_vector<T>(s.input_size(), rng);
    auto w = random_vector<T>(s.filter_size(), rng);
    auto bias = random_vector<T>(s.out_c, rng);
    const auto want = naive(s, x, w, std::vector<T>(static_cast<std::size_t>(s.output_size()))).y;
    const double terms = static_cast<double>(s.filter_h * s.filter_w * s.in_c);
    const cpu::gemm_epilogue<T> ep{bias.data(), cpu::activation::relu};
    std::vector<T> plain(static_cast<std::size_t>(s.output_size())), reused(plain.size(), T(7)), again(plain.size());
    // What the reused filter must give, bitwise: the Winograd kernel itself, transforming the filter.
    cpu::conv_detail::winograd_mode = winograd ? 2 : 1;
    cpu::conv2d_forward<T>(s, x.data(), w.data(), plain.data(), ep);
    cpu::conv_detail::winograd_mode = 1;
    const std::size_t entries = cache::instance().size();
    key += 2;
    cpu::conv2d_forward_reused_filter<T>(s, x.data(), w.data(), key, reused.data(), ep);
    CHECK(std::memcmp(plain.data(), reused.data(), plain.size() * sizeof(T)) == 0);
    CHECK(cache::instance().size() == entries + (winograd ? 1 : 0));
    auto want_fused = want;
    for (std::size_t i = 0; i < want_fused.size(); ++i)
      want_fused[i] = std::max<long double>(want_fused[i] + bias[i % static_cast<std::size_t>(s.out_c)], 0);
    CHECK(worst_error(reused, want_fused, terms) <= 1.0);
    // Called again with the same key: the cached transform, the same numbers.
    cpu::conv2d_forward_reused_filter<T>(s, x.data(), w.data(), key, again.data(), ep);
    CHECK(again == reused);
    CHECK(cache::instance().size() == entries + (winograd ? 1 : 0));
    // New values under a new key (what an update gives a tensor): a new transform, never the old one.
    for (auto& v : w) v = -v;
    cpu::conv2d_forward_reused_filter<T>(s, x.data(), w.data(), key + 1, again.data(), ep);
    cpu::conv_detail::winograd_mode = winograd ? 2 : 1;
    cpu::conv2d_forward<T>(s, x.data(), w.data(), plain.data(), ep);
    cpu::conv_detail::winograd_mode = 1;
    CHECK(std::memcmp(plain.data(), again.data(), plain.size() * sizeof(T)) == 0);
    CHECK(again != reused);
    // winograd_mode 0 (never Winograd) holds for the reused path too.
    cpu::conv_detail::winograd_mode = 0;
    cpu::conv2d_forward_reused_filter<T>(s, x.data(), w.data(), key + 1, again.data(), ep);
    cpu::conv2d_forward<T>(s, x.data(), w.data(), plain.data(), ep);
    cpu::conv_detail::winograd_mode = 1;
    CHECK(again == plain);
  }
  // The same key with another filter address, or other channel counts, is another entry.
  const auto s = cpu::conv2d_tf_shape(1, 6, 6, 16, 5, 5, 32, padding_mode::same);
  auto x = random_vector<T>(s.input_size(), rng);
  auto w1 = random_vector<T>(s.filter_size(), rng), w2 = random_vector<T>(s.filter_size(), rng);
  std::vector<T> y1(static_cast<std::size_t>(s.output_size())), y2(y1.size()), want2(y1.size());
  cpu::conv2d_forward_reused_filter<T>(s, x.data(), w1.data(), 7, y1.data());
  cpu::conv2d_forward_reused_filter<T>(s, x.data(), w2.data(), 7, y2.data());
  cpu::conv_detail::winograd_mode = cpu::has_xsimd_arch ? 2 : 1;
  cpu::conv2d_forward<T>(s, x.data(), w2.data(), want2.data());
  cpu::conv_detail::winograd_mode = 1;
  CHECK(y2 == want2);
  CHECK(y1 != y2);
  // Bounded: transforms beyond max_bytes evict the least recently used; the cache then holds
  // whole entries only, and empties on clear().
  if (cpu::has_xsimd_arch) {
    const std::size_t one = cache::transform_bytes(64, 64);
    const std::size_t fit = cache::max_bytes / one;
    const auto big = cpu::conv2d_tf_shape(1, 4, 4, 64, 5, 5, 64, padding_mode::same);
    auto xb = random_vector<T>(big.input_size(), rng);
    auto wb = random_vector<T>(big.filter_size(), rng);
    std::vector<T> yb(static_cast<std::size_t>(big.output_size()));
    cache::instance().clear();
    for (std::uint64_t k = 0; k < fit + 3; ++k)
      cpu::conv2d_forward_reused_filter<T>(big, xb.data(), wb.data(), 1000 + k, yb.data());
    CHECK(cache::instance().size() == fit);
    cache::instance().clear();
    CHECK(cache::instance().size() == 0);
    // fx::memory::empty_cache() empties it too.
    cpu::conv2d_forward_reused_filter<T>(big, xb.data(), wb.data(), 5000, yb.data());
    CHECK(cache::instance().size() == 1);
    fluxion::memory::empty_cache();
    CHECK(cache::instance().size() == 0);
  }
}

TEST_CASE("conv2d backward kernels match central finite differences of the forward kernel") {
  // L(x, w) = sum(conv(x, w) * dy); dL/dx and dL/dw are what the backward kernels return.
  std::mt19937 rng(5);
  using cpu::padding_mode;
  const cpu::conv2d_shape shapes[] = {cpu::conv2d_tf_shape(2, 5, 6, 2, 3, 3, 3, padding_mode::same, 2, 1),
                                      cpu::conv2d_tf_shape(1, 7, 7, 3, 3, 2, 14, padding_mode::valid, 1, 2, 2, 1),
                                      cpu::conv2d_tf_shape(1, 6, 6, 1, 5, 5, 4, padding_mode::same)};
  for (const auto& s : shapes) {
    INFO(describe(s));
    auto x = random_vector<double>(s.input_size(), rng);
    auto w = random_vector<double>(s.filter_size(), rng);
    auto dy = random_vector<double>(s.output_size(), rng);
    std::vector<double> y(static_cast<std::size_t>(s.output_size()));
    auto loss = [&] {
      cpu::conv2d_forward<double>(s, x.data(), w.data(), y.data());
      double l = 0;
      for (std::size_t i = 0; i < y.size(); ++i) l += y[i] * dy[i];
      return l;
    };
    auto finite_difference = [&](std::vector<double>& v, std::size_t i) {
      const double h = 1e-4, saved = v[i];
      v[i] = saved + h;
      const double up = loss();
      v[i] = saved - h;
      const double down = loss();
      v[i] = saved;
      return (up - down) / (2 * h);
    };
    std::vector<double> dx(x.size()), dw(w.size());
    cpu::conv2d_backward_input<double>(s, dy.data(), w.data(), dx.data());
    cpu::conv2d_backward_filter<double>(s, x.data(), dy.data(), dw.data());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(dx[i] == doctest::Approx(finite_difference(x, i)).epsilon(1e-7));
    for (std::size_t i = 0; i < w.size(); ++i) CHECK(dw[i] == doctest::Approx(finite_difference(w, i)).epsilon(1e-7));
  }
}

TEST_CASE_TEMPLATE("conv2d kernels are bitwise identical for 1, 2 and 3 threads", T, float, double) {
  std::mt19937 rng(9);
  const int saved = fluxion::get_num_threads();
  // Enough work to run in parallel, and more than one 1024-pixel chunk for the filter gradient;
  // the second shape takes the single-channel kernels, the third the direct ones, and the last two
  // the direct forward kernel with fewer images than threads (bands of output rows per image).
  for (const auto& s : {cpu::conv2d_tf_shape(5, 19, 17, 6, 3, 3, 24, cpu::padding_mode::same),
                        cpu::conv2d_tf_shape(6, 20, 20, 1, 5, 5, 16, cpu::padding_mode::same),
                        cpu::conv2d_tf_shape(4, 14, 14, 32, 5, 5, 64, cpu::padding_mode::same),
                        cpu::conv2d_tf_shape(1, 14, 14, 32, 5, 5, 64, cpu::padding_mode::same),
                        cpu::conv2d_tf_shape(2, 15, 28, 16, 3, 3, 32, cpu::padding_mode::valid)}) {
    auto x = random_vector<T>(s.input_size(), rng);
    auto w = random_vector<T>(s.filter_size(), rng);
    auto dy = random_vector<T>(s.output_size(), rng);
    std::vector<std::vector<T>> results;
    for (int threads : {1, 2, 3}) {
      fluxion::set_num_threads(threads);
      std::vector<T> y(static_cast<std::size_t>(s.output_size())), dx(static_cast<std::size_t>(s.input_size())),
          dw(static_cast<std::size_t>(s.filter_size()));
      cpu::conv2d_forward<T>(s, x.data(), w.data(), y.data());
      cpu::conv2d_backward_filter<T>(s, x.data(), dy.data(), dw.data());
      y.insert(y.end(), dw.begin(), dw.end());
      for (int method : {1, 2}) {
        cpu::conv_detail::input_grad_method = method;
        cpu::conv2d_backward_input<T>(s, dy.data(), w.data(), dx.data());
        y.insert(y.end(), dx.begin(), dx.end());
      }
      cpu::conv_detail::input_grad_method = 0;
      results.push_back(std::move(y));
    }
    CHECK(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(T)) == 0);
    CHECK(std::memcmp(results[0].data(), results[2].data(), results[0].size() * sizeof(T)) == 0);
  }
  fluxion::set_num_threads(saved);
}
