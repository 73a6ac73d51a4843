// fx::nn::detail::channel_norm<T>: the cpu kernel under batch_norm's training pass and group_norm
// (and instance_norm), for channels-last input seen as (batch, positions, channels) with the
// channels split into groups of neighbours: each (example, group)'s mean and biased variance over
// its positions and channels, y = (x - mean) rstd gamma + beta, and the hand-written backward pass
// (dx, gamma's and beta's gradients). batch_norm is one "example" (every position of the batch)
// with a group per channel; group_norm is the batch with its groups; instance_norm a group per
// channel of each example.
//
//   const nn::detail::channel_norm<float> k{batch, positions, channels, groups};
//   k.statistics(x, mean, variance);                      // (batch, groups) each
//   k.normalize(x, gamma, beta, mean, rstd, y);          // normalize<true>: relu(y), fused
//   k.backward(x, dy, gamma, beta, mean, rstd, dx, dgamma, dbeta);
//   fx::tensor<float> y = nn::detail::channel_normalize(k, x, gamma, beta, eps);  // the layers' call
//
// Where the statements stream x once per statement (the mean, the variance, y: three passes
// forward; the two sums and dx: five operand passes backward), this reads x once for the
// statistics (Welford's update down each chunk's positions, the chunks combined with Chan et al.'s
// formula), once for y, and x and dy once for the sums and once for dx.
//
// Work is split into chunks of whole positions of one example, about 16384 values each; chunks
// depend on the shape only, and their partial results are combined in chunk order, so the results
// are the same bits for any thread count.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/custom_gradient.hpp"
#include "../backend/cpu/detail/simd_ops.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/shape.hpp"
#include "../tensor/variable.hpp"

namespace fluxion::nn::detail {

template <class T>
struct channel_norm {
  index_t batch, positions, channels, groups;

  index_t per_group() const { return channels / groups; }
  /// Positions a chunk: about 16384 values, at least one position, at most the example's.
  index_t chunk_rows() const {
    return std::clamp<index_t>(16384 / std::max<index_t>(1, channels), 1, std::max<index_t>(1, positions));
  }
  index_t chunks_per_example() const { return (positions + chunk_rows() - 1) / chunk_rows(); }
  index_t chunks() const { return batch * chunks_per_example(); }

  /// step(std::integral_constant<int, v>{}) for v in [0, N), written out: arrays of vectors indexed
  /// by constants stay in registers, where a loop over them leaves them in memory.
  template <int N, class Step>
  static FLUXION_ALWAYS_INLINE void unrolled(Step&& step) {
    [&]<int... v>(std::integer_sequence<int, v...>) {
      (step(std::integral_constant<int, v>{}), ...);
    }(std::make_integer_sequence<int, N>{});
  }

  /// body(chunk, example, first position, positions): each chunk once, on the pool's threads.
  template <class Body>
  void for_chunks(Body&& body) const {
    const index_t per = chunk_rows(), k = chunks_per_example();
    fluxion::detail::parallel_for(chunks(), [&](index_t chunk) {
      const index_t b = chunk / k, p0 = chunk % k * per;
      body(chunk, b, p0, std::min(positions - p0, per));
    });
  }

  /// outs[j][c] = the sum over `rows` positions r of the terms add(ops, r, c, acc) adds to acc[j]
  /// (vectors of channels, or one channel at the tail), channel by channel down the positions, two
  /// positions a step into two sets of accumulators.
  template <int N, class Add>
  void column_sums(index_t rows, const std::array<T*, N>& outs, const Add& add) const {
    fluxion::detail::kernels::for_each_channel_chunk<T>(channels, [&, f = add](auto o, index_t c) {
      using batch_t = typename decltype(o)::batch;
      std::array<batch_t, N> a, b;
      unrolled<N>([&](auto j) { a[j] = b[j] = o.splat(T(0)); });
      index_t r = 0;
      for (; r + 2 <= rows; r += 2) {
        f(o, r, c, a);
        f(o, r + 1, c, b);
      }
      if (r < rows) f(o, r, c, a);
      unrolled<N>([&](auto j) { o.storeu(outs[j] + c, a[j] + b[j]); });
    });
  }

  /// mean[c] and m2[c] (the sum of squared deviations) of `rows` positions of channels from xs, by
  /// Welford's update down the positions: one read of the values, each in one step. The even and
  /// odd positions go into two sets of accumulators (two chains of dependent steps at once), merged
  /// at the end by Chan et al.'s formula. inv[i] = 1 / (i + 1).
  void column_moments(const T* xs, index_t rows, const T* inv, T* mean, T* m2) const {
    using ops = fluxion::detail::kernels::simd_ops<T>;
    constexpr index_t w = ops::width;
    index_t ch = 0;
    // Two vectors of channels at once where there are: four chains of dependent steps, not two.
    for (; ch + 2 * w <= channels; ch += 2 * w) moments_of<2>(ops{}, xs + ch, rows, inv, mean + ch, m2 + ch);
    for (; ch + w <= channels; ch += w) moments_of<1>(ops{}, xs + ch, rows, inv, mean + ch, m2 + ch);
    for (; ch < channels; ++ch)
      moments_of<1>(fluxion::detail::kernels::simd_ops<T, false>{}, xs + ch, rows, inv, mean + ch, m2 + ch);
  }

  /// column_moments for V neighbouring vectors of channels (o's width each) from p, their steps
  /// interleaved (2 V chains of dependent steps).
  template <int V, class O>
  FLUXION_ALWAYS_INLINE void moments_of(O o, const T* p, index_t rows, const T* inv, T* mean, T* m2) const {
    const index_t c = channels, odd = rows / 2, even = rows - odd, w = O::width;
    using batch_t = typename O::batch;
    std::array<batch_t, V> ma, sa, mb, sb;
    unrolled<V>([&](auto v) { ma[v] = sa[v] = mb[v] = sb[v] = o.splat(T(0)); });
    index_t i = 0;
    for (; i < odd; ++i, p += 2 * c) {
      const auto f = o.splat(inv[i]);
      unrolled<V>([&](auto v) {
        const auto xa = o.loadu(p + v * w), xb = o.loadu(p + c + v * w);
        const auto da = xa - ma[v], db = xb - mb[v];
        ma[v] = ma[v] + da * f;
        mb[v] = mb[v] + db * f;
        sa[v] = sa[v] + da * (xa - ma[v]);
        sb[v] = sb[v] + db * (xb - mb[v]);
      });
    }
    if (even > odd) {
      const auto f = o.splat(inv[i]);
      unrolled<V>([&](auto v) {
        const auto xa = o.loadu(p + v * w), da = xa - ma[v];
        ma[v] = ma[v] + da * f;
        sa[v] = sa[v] + da * (xa - ma[v]);
      });
    }
    const T ne = static_cast<T>(even), no = static_cast<T>(odd);
    unrolled<V>([&](auto v) {
      const auto delta = mb[v] - ma[v];  // the odd positions' mean less the even ones'
      o.storeu(mean + v * w, ma[v] + delta * o.splat(no / (ne + no)));
      o.storeu(m2 + v * w, sa[v] + sb[v] + delta * delta * o.splat(ne * no / (ne + no)));
    });
  }

  /// Each (example, group)'s mean and biased variance, (batch, groups) each.
  void statistics(const T* x, T* mean, T* variance) const {
    const index_t c = channels, k = chunks_per_example();
    std::vector<T> inv(static_cast<std::size_t>(chunk_rows() / 2 + 1));
    for (std::size_t i = 0; i < inv.size(); ++i) inv[i] = T(1) / static_cast<T>(i + 1);
    std::vector<T> part(static_cast<std::size_t>(2 * chunks() * c));  // per chunk: means, then M2s
    for_chunks([&](index_t chunk, index_t b, index_t p0, index_t rows) {
      T* m = part.data() + 2 * chunk * c;
      column_moments(x + (b * positions + p0) * c, rows, inv.data(), m, m + c);
    });
    // Each channel over the example's chunks, then each group over its channels, by the two-pass
    // form of Chan et al.'s merge: the mean of the means (weighted by the counts), then the sum of
    // the M2s and of count (mean - total mean)^2. (A merge a chunk at a time divides twice a chunk
    // and a channel: a tenth of the layer's forward pass at (16, 1024, 128) in 32 groups.)
    const index_t per = chunk_rows(), pg = per_group();
    const T inv_p = T(1) / static_cast<T>(positions), inv_pg = T(1) / static_cast<T>(pg);
    std::vector<T> mc(static_cast<std::size_t>(c)), s2(static_cast<std::size_t>(c));
    for (index_t b = 0; b < batch; ++b) {
      std::fill(mc.begin(), mc.end(), T(0));
      std::fill(s2.begin(), s2.end(), T(0));
      for (index_t j = 0; j < k; ++j) {
        const T n = static_cast<T>(std::min(positions - j * per, per)), *m = part.data() + 2 * (b * k + j) * c;
        for (index_t ch = 0; ch < c; ++ch) mc[static_cast<std::size_t>(ch)] += n * m[ch];
      }
      for (T& v : mc) v *= inv_p;
      for (index_t j = 0; j < k; ++j) {
        const T n = static_cast<T>(std::min(positions - j * per, per)), *m = part.data() + 2 * (b * k + j) * c;
        for (index_t ch = 0; ch < c; ++ch) {
          const T d = m[ch] - mc[static_cast<std::size_t>(ch)];
          s2[static_cast<std::size_t>(ch)] += m[c + ch] + n * d * d;
        }
      }
      for (index_t g = 0; g < groups; ++g) {
        T mu = 0, m2 = 0;
        for (index_t ch = g * pg; ch < (g + 1) * pg; ++ch) mu += mc[static_cast<std::size_t>(ch)];
        mu *= inv_pg;
        for (index_t ch = g * pg; ch < (g + 1) * pg; ++ch) {
          const T d = mc[static_cast<std::size_t>(ch)] - mu;
          m2 += s2[static_cast<std::size_t>(ch)] + static_cast<T>(positions) * d * d;
        }
        mean[b * groups + g] = positions == 0 ? T(NAN) : mu;
        variance[b * groups + g] = positions == 0 ? T(NAN) : m2 * inv_p * inv_pg;
      }
    }
  }

  /// (batch, channels) per-channel values from per-group ones and gamma: f(b, g, ch) each.
  template <class F>
  std::vector<T> per_channel(F&& f) const {
    std::vector<T> out(static_cast<std::size_t>(batch * channels));
    const index_t pg = per_group();
    for (index_t b = 0; b < batch; ++b)
      for (index_t ch = 0; ch < channels; ++ch) out[static_cast<std::size_t>(b * channels + ch)] = f(b, ch / pg, ch);
    return out;
  }

  /// The layer's output before a fused relu, x scale + shift, rounded once: the backward pass
  /// recomputes it for relu's mask and gets the same bits as the forward pass.
  template <class O>
  static auto pre_activation(O o, const T* x, const T* scale, const T* shift) {
    return o.fma(o.loadu(x), o.loadu(scale), o.loadu(shift));
  }

  /// out[i] = value(ops, i, pc) at every element i, pc its (example, channel) index in (batch,
  /// channels): vectors of channels, or one channel at the tail. value captures its pointers by
  /// value: each chunk works on its own copy of it, whose pointers stay in registers (a store
  /// through xsimd may alias anything, so pointers read through a reference would be read again
  /// after every store: about 1.5x the time of the loop at (16, 1024, 128)).
  template <class Value>
  void elementwise(T* out, const Value& value) const {
    const index_t c = channels;
    for_chunks([this, out, c, &value](index_t, index_t e, index_t p0, index_t rows) {
      const Value f = value;
      T* const to = out;
      const index_t first = (e * positions + p0) * c, pc0 = e * c;
      for (index_t r = 0; r < rows; ++r) {
        const index_t at = first + r * c;
        fluxion::detail::kernels::for_each_channel_chunk<T>(c, [&](auto o, index_t ch) {
          o.storeu(to + at + ch, f(o, at + ch, pc0 + ch));
        });
      }
    });
  }

  /// Each (example, channel)'s scale gamma rstd and shift beta - mean scale, (batch, channels).
  std::pair<std::vector<T>, std::vector<T>> scale_shift(const T* gamma, const T* beta, const T* mean,
                                                        const T* rstd) const {
    std::vector<T> scale = per_channel([&](index_t b, index_t g, index_t ch) { return gamma[ch] * rstd[b * groups + g]; });
    std::vector<T> shift = per_channel([&](index_t b, index_t g, index_t ch) {
      return beta[ch] - mean[b * groups + g] * scale[static_cast<std::size_t>(b * channels + ch)];
    });
    return {std::move(scale), std::move(shift)};
  }

  /// y = (x - mean) rstd gamma + beta (then relu with Relu), mean and rstd (batch, groups), gamma
  /// and beta (channels).
  template <bool Relu = false>
  void normalize(const T* x, const T* gamma, const T* beta, const T* mean, const T* rstd, T* y) const {
    const auto [scale, shift] = scale_shift(gamma, beta, mean, rstd);
    const T *a = scale.data(), *b = shift.data();
    elementwise(y, [x, a, b](auto o, index_t at, index_t pc) {
      const auto z = pre_activation(o, x + at, a + pc, b + pc);
      if constexpr (Relu)
        return o.relu(z);
      else
        return z;
    });
  }

  /// dx, and gamma's and beta's gradients (channels each), from dy and the forward statistics:
  ///   dx = rstd (gamma dy - sum(gamma dy) / M - xhat sum(gamma dy xhat) / M),
  ///   dgamma = sum(dy xhat), dbeta = sum(dy),
  /// with xhat = (x - mean) rstd and M = positions * channels a group, the sums over each
  /// (example, group) for dx and over everything but the channel for gamma's and beta's.
  /// With Relu, the output was relu's of the normalization (normalize<true>): dy is first masked
  /// where the normalization's output was not positive (recomputed from x, beta and the rest).
  template <bool Relu = false>
  void backward(const T* x, const T* dy, const T* gamma, const T* beta, const T* mean, const T* rstd, T* dx,
                T* dgamma, T* dbeta) const {
    const index_t c = channels, k = chunks_per_example(), pg = per_group();
    const auto [scale, shift] = scale_shift(gamma, beta, mean, rstd);  // the forward pass's
    // dy at element `at` of (example, channel) pc, masked with Relu (vectors or one value).
    auto grad = [x, dy, sc = scale.data(), sh = shift.data()](auto o, index_t at, index_t pc) {
      const auto d = o.loadu(dy + at);
      if constexpr (Relu)
        return fluxion::detail::kernels::where_positive(pre_activation(o, x + at, sc + pc, sh + pc), d);
      else
        return d;
    };
    // Each (example, channel)'s group mean, (batch, channels).
    const std::vector<T> mean_c = per_channel([&](index_t b, index_t g, index_t) { return mean[b * groups + g]; });
    std::vector<T> part(static_cast<std::size_t>(2 * chunks() * c));  // per chunk: sum dy, sum dy (x - mean)
    for_chunks([&](index_t chunk, index_t b, index_t p0, index_t rows) {
      T* sd = part.data() + 2 * chunk * c;
      const index_t first = (b * positions + p0) * c;
      const T* m = mean_c.data() + b * c;
      column_sums<2>(rows, {sd, sd + c}, [grad, x, m, first, b, c](auto o, index_t r, index_t ch, auto& acc) {
        const auto d = grad(o, first + r * c + ch, b * c + ch);
        acc[0] += d;
        acc[1] += d * (o.loadu(x + first + r * c + ch) - o.loadu(m + ch));
      });
    });
    std::vector<T> sum_dy(static_cast<std::size_t>(batch * c), T(0)), sum_dyx(sum_dy);  // (batch, channels)
    for (index_t b = 0; b < batch; ++b)
      for (index_t j = 0; j < k; ++j) {
        const T* sd = part.data() + 2 * (b * k + j) * c;
        for (index_t ch = 0; ch < c; ++ch) {
          sum_dy[static_cast<std::size_t>(b * c + ch)] += sd[ch];
          sum_dyx[static_cast<std::size_t>(b * c + ch)] += sd[c + ch];
        }
      }
    std::fill(dgamma, dgamma + c, T(0));
    std::fill(dbeta, dbeta + c, T(0));
    std::vector<T> group_a(static_cast<std::size_t>(batch * groups), T(0)), group_b(group_a);
    for (index_t b = 0; b < batch; ++b)
      for (index_t ch = 0; ch < c; ++ch) {
        const std::size_t i = static_cast<std::size_t>(b * c + ch), g = static_cast<std::size_t>(b * groups + ch / pg);
        group_a[g] += gamma[ch] * sum_dy[i];
        group_b[g] += gamma[ch] * sum_dyx[i];
        if (positions > 0) dgamma[ch] += sum_dyx[i] * rstd[g];  // no positions: 0, not 0 times a NaN rstd
        dbeta[ch] += sum_dy[i];
      }
    // dx = dy scale + x x_coef + offset, per (example, channel) (scale = gamma rstd).
    const T inv_m = T(1) / static_cast<T>(positions * pg);
    const std::vector<T> x_coef = per_channel([&](index_t b, index_t g, index_t) {
      const T r = rstd[b * groups + g];
      return -(r * r * r) * group_b[static_cast<std::size_t>(b * groups + g)] * inv_m;
    });
    const std::vector<T> offset = per_channel([&](index_t b, index_t g, index_t ch) {
      const index_t i = b * groups + g;
      return -rstd[i] * group_a[static_cast<std::size_t>(i)] * inv_m - mean[i] * x_coef[static_cast<std::size_t>(b * c + ch)];
    });
    const T *a = x_coef.data(), *o0 = offset.data(), *sc = scale.data();
    elementwise(dx, [x, a, o0, sc, grad](auto o, index_t at, index_t pc) {
      return o.loadu(x + at) * o.loadu(a + pc) + o.loadu(o0 + pc) + grad(o, at, pc) * o.loadu(sc + pc);
    });
  }
};

/// y = (x - mean) rstd gamma + beta by the kernel k (then relu with Relu: the activation that
/// follows, without a pass of its own either way), x (batch, positions, channels) in any shape,
/// differentiable in x, gamma and beta through k's backward pass (fx::custom_gradient, which
/// records the whole as one entry). The forward pass's (batch, groups) means and biased variances
/// go to *mean and *variance when given (batch_norm's moving statistics).
template <bool Relu = false, class T>
tensor<T> channel_normalize(const channel_norm<T>& k, const tensor<T>& x, variable<T>& gamma, variable<T>& beta,
                            T eps, tensor<T>* mean_out = nullptr, tensor<T>* variance_out = nullptr) {
  auto f = custom_gradient([&](const tensor<T>& xin, const tensor<T>& g, const tensor<T>& b) {
    const fluxion::shape stats{k.batch, k.groups};
    tensor<T> mean{stats}, variance{stats}, rstd{stats}, y{xin.shape()};
    k.statistics(xin.data(), mean.mutable_data(), variance.mutable_data());
    for (index_t i = 0; i < rstd.size(); ++i) rstd.mutable_data()[i] = T(1) / std::sqrt(variance.data()[i] + eps);
    k.template normalize<Relu>(xin.data(), g.data(), b.data(), mean.data(), rstd.data(), y.mutable_data());
    if (mean_out) *mean_out = mean;
    if (variance_out) *variance_out = variance;
    auto backward = [k, xin, g, b, mean, rstd](const tensor<T>& dy) {
      const fluxion::shape c{k.channels};
      tensor<T> dx{xin.shape()}, dgamma{c}, dbeta{c};
      k.template backward<Relu>(xin.data(), dy.data(), g.data(), b.data(), mean.data(), rstd.data(), dx.mutable_data(),
                                dgamma.mutable_data(), dbeta.mutable_data());
      return std::tuple{std::move(dx), std::move(dgamma), std::move(dbeta)};
    };
    return std::pair{std::move(y), backward};
  });
  return f(x, gamma, beta);
}

}  // namespace fluxion::nn::detail
