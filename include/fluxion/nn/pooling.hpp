// fx::nn::max_pool2d<Pool, Stride, Padding> and avg_pool2d: Keras's MaxPool2D and AveragePooling2D
// over NHWC input. The stride defaults to the pool size, and the padding to valid, as in Keras.
// global_avg_pool2d and global_max_pool2d (Keras's GlobalAveragePooling2D, GlobalMaxPooling2D)
// reduce every position to one value per channel; global_avg_pool1d and global_max_pool1d do the
// same over the steps of a sequence (batch, steps, features).
//
//   fx::nn::max_pool2d<2> pool;
//   fx::tensor<float> y = pool(x);                 // (batch, 28, 28, 32) -> (batch, 14, 14, 32)
//   fx::nn::global_avg_pool2d{}(x)                 // (batch, 28, 28, 32) -> (batch, 32)
//   fx::nn::global_avg_pool2d<fx::keepdims>{}(x)   // (batch, 28, 28, 32) -> (batch, 1, 1, 32)
//
// A global pooling is a reduce_mean (reduce_max) over the spatial axes: lazy, so the reduction
// runs inside the next statement's loop, and differentiated by the reductions' rules (a global
// max's gradient is shared among tied maxima, as TensorFlow's reduce_max; NaN propagates).
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <string>

#include "../expr/conv.hpp"
#include "conv2d.hpp"

namespace fluxion::nn {

namespace detail {
/// The statement of every pooling layer of element type T (one instance per program; see
/// dense_forward in nn/dense.hpp).
template <bool Max, class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> pool_forward(const tensor<T, Device>& x, spatial2d pool, spatial2d strides, padding pad) {
  if constexpr (Max) return tensor<T, Device>(fluxion::max_pool2d(x, pool, strides, pad));
  else return tensor<T, Device>(fluxion::avg_pool2d(x, pool, strides, pad));
}

template <class Derived, bool Max, index_t Pool, index_t Stride, padding Padding>
struct pool_layer : stateless_layer<Derived> {
  static_assert(Pool > 0 && Stride > 0, "fluxion::nn::max_pool2d, avg_pool2d: the pool size and stride must be positive.");
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = Max ? "max_pool2d" : "avg_pool2d";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(check_extents<sizeof...(D) == 3, Max ? fixed_string("max_pool2d") : fixed_string("avg_pool2d"),
                                "input rank", sizeof...(D), "rank", 3>::value,
                  "fluxion::nn::max_pool2d, avg_pool2d: the input must be (height, width, channels) per example "
                  "(rank 3).");
    if constexpr (sizeof...(D) == 3) {
      constexpr std::array<index_t, 3> in{D...};
      static_assert(check_extents<Padding == padding::same || in[0] >= Pool,
                                  Max ? fixed_string("max_pool2d") : fixed_string("avg_pool2d"), "input height", in[0],
                                  "pool height", Pool>::value &&
                        check_extents<Padding == padding::same || in[1] >= Pool,
                                      Max ? fixed_string("max_pool2d") : fixed_string("avg_pool2d"), "input width",
                                      in[1], "pool width", Pool>::value,
                    "fluxion::nn::max_pool2d, avg_pool2d: with valid padding the pool window must fit inside the "
                    "input; use a smaller pool, or fluxion::nn::same padding.");
      return static_shape<window_output(in[0], Pool, Stride, 1, Padding), window_output(in[1], Pool, Stride, 1, Padding),
                          in[2]>{};
    } else {
      return static_shape<1, 1, 1>{};
    }
  }

  explicit pool_layer(std::string n) : stateless_layer<Derived>(n.empty() ? base_name : std::move(n)) {}

  /// The layer's statement, unevaluated (nn::compiled_step differentiates it from its type).
  template <class U, class D>
  auto statement(const tensor<U, D>& in) const {
    if constexpr (Max) return fluxion::max_pool2d(in, Pool, Stride, Padding);
    else return fluxion::avg_pool2d(in, Pool, Stride, Padding);
  }

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    return pool_forward<Max>(fluxion::detail::materialize(fluxion::detail::as_expr<X>(std::forward<X>(x))), Pool,
                             Stride, Padding);
  }
};
}  // namespace detail

template <index_t Pool, index_t Stride = Pool, padding Padding = padding::valid>
struct max_pool2d : detail::pool_layer<max_pool2d<Pool, Stride, Padding>, true, Pool, Stride, Padding> {
  explicit max_pool2d(std::string n = {}) : detail::pool_layer<max_pool2d, true, Pool, Stride, Padding>(std::move(n)) {}
};

template <index_t Pool, index_t Stride = Pool, padding Padding = padding::valid>
struct avg_pool2d : detail::pool_layer<avg_pool2d<Pool, Stride, Padding>, false, Pool, Stride, Padding> {
  explicit avg_pool2d(std::string n = {}) : detail::pool_layer<avg_pool2d, false, Pool, Stride, Padding>(std::move(n)) {}
};

namespace detail {
template <bool Max, int Spatial>
inline constexpr fixed_string global_pool_name =
    Max ? (Spatial == 1 ? fixed_string("global_max_pool1d") : fixed_string("global_max_pool2d"))
        : (Spatial == 1 ? fixed_string("global_avg_pool1d") : fixed_string("global_avg_pool2d"));

template <class Derived, bool Max, int Spatial, bool Keepdims>
struct global_pool_layer : stateless_layer<Derived> {
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = global_pool_name<Max, Spatial>.text;

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(check_extents<sizeof...(D) == Spatial + 1, global_pool_name<Max, Spatial>, "input rank", sizeof...(D),
                                "rank", Spatial + 1>::value,
                  "fluxion::nn::global_avg_pool1d, global_max_pool1d take (steps, features) per example (rank 2); "
                  "global_avg_pool2d, global_max_pool2d take (height, width, channels) (rank 3).");
    if constexpr (sizeof...(D) == Spatial + 1) {
      constexpr std::array<index_t, sizeof...(D)> in{D...};
      if constexpr (!Keepdims) return static_shape<in[Spatial]>{};
      else if constexpr (Spatial == 1) return static_shape<1, in[1]>{};
      else return static_shape<1, 1, in[2]>{};
    } else {
      return static_shape<1>{};
    }
  }

  explicit global_pool_layer(std::string n) : stateless_layer<Derived>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    check(e.shape());
    const axes spatial = Spatial == 1 ? axes{1} : axes{1, 2};
    if constexpr (Max) return reduce_max(std::move(e), spatial, Keepdims);
    else return reduce_mean(std::move(e), spatial, Keepdims);
  }

  /// The input's rank and extents, or a shape_error naming the layer.
  void check(const fluxion::shape& s) const {
    if (s.rank() != Spatial + 2)
      throw shape_error(std::string(base_name) + " '" + this->m_name + "': expects input of rank " +
                        std::to_string(Spatial + 2) +
                        (Spatial == 1 ? " (batch, steps, features)" : " (batch, height, width, channels)") + ", got " +
                        to_string(s));
    for (int d = 1; d <= Spatial; ++d)
      if (s[d] == 0)
        throw shape_error(std::string(base_name) + " '" + this->m_name + "': input of shape " + to_string(s) +
                          " has no positions to pool");
  }
};
}  // namespace detail

/// Keras's GlobalAveragePooling2D: (batch, height, width, channels) -> (batch, channels), or
/// (batch, 1, 1, channels) with Keepdims (fx::keepdims).
template <bool Keepdims = false>
struct global_avg_pool2d : detail::global_pool_layer<global_avg_pool2d<Keepdims>, false, 2, Keepdims> {
  explicit global_avg_pool2d(std::string n = {})
      : detail::global_pool_layer<global_avg_pool2d, false, 2, Keepdims>(std::move(n)) {}
};

/// Keras's GlobalMaxPooling2D.
template <bool Keepdims = false>
struct global_max_pool2d : detail::global_pool_layer<global_max_pool2d<Keepdims>, true, 2, Keepdims> {
  explicit global_max_pool2d(std::string n = {})
      : detail::global_pool_layer<global_max_pool2d, true, 2, Keepdims>(std::move(n)) {}
};

/// global_avg_pool1d's call options (Keras's call arguments): `pool.call(x, {.mask = &m})`.
template <class Device = cpu>
struct pool_call_options {
  /// Keras's mask, (batch, steps): the mean is over the steps where it is true.
  const tensor<bool, Device>* mask = nullptr;
};

/// Keras's GlobalAveragePooling1D: (batch, steps, features) -> (batch, features), or (batch, 1,
/// features) with Keepdims. With Keras's mask (call(x, {.mask = &m}), or the mask of an
/// embedding<...>::mask_zero or masking before it in nn::sequential) the mean of the steps the
/// mask keeps; a row that keeps none gives zeros (Keras's 0 / 0 gives NaN).
template <bool Keepdims = false>
struct global_avg_pool1d : detail::global_pool_layer<global_avg_pool1d<Keepdims>, false, 1, Keepdims> {
  explicit global_avg_pool1d(std::string n = {})
      : detail::global_pool_layer<global_avg_pool1d, false, 1, Keepdims>(std::move(n)) {}

  /// Keras's `layer(x, mask=m)`: the mean of the steps m (batch, steps) keeps.
  template <class X>
  auto operator()(X&& x, const tensor<bool, device_t<fluxion::detail::expr_t<X>>>& mask, bool training = false) const {
    return call(std::forward<X>(x), {.mask = &mask}, training);
  }
  using detail::global_pool_layer<global_avg_pool1d, false, 1, Keepdims>::operator();

  template <class X>
  auto call(X&& x, const pool_call_options<device_t<fluxion::detail::expr_t<X>>>& options, bool training = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    using Device = device_t<decltype(e)>;
    if (!options.mask) return tensor<T, Device>((*this)(std::move(e), training));
    const tensor<T, Device> in(std::move(e));
    const fluxion::shape& s = in.shape();
    this->check(s);
    detail::check_sequence_mask(std::string(this->base_name) + " '" + this->m_name + "'", options.mask->shape(), s,
                                "steps");
    const tensor<T, Device> keep(reshape(cast<T>(*options.mask), {s[0], s[1], 1}));
    // The steps each row keeps, at least 1: a row of padding only gives zeros.
    const tensor<T, Device> count(maximum(reduce_sum(keep, axes{1}, Keepdims), T(1)));
    return tensor<T, Device>(reduce_sum(in * keep, axes{1}, Keepdims) / count);
  }
};

/// Keras's GlobalMaxPooling1D.
template <bool Keepdims = false>
struct global_max_pool1d : detail::global_pool_layer<global_max_pool1d<Keepdims>, true, 1, Keepdims> {
  explicit global_max_pool1d(std::string n = {})
      : detail::global_pool_layer<global_max_pool1d, true, 1, Keepdims>(std::move(n)) {}
};

}  // namespace fluxion::nn
