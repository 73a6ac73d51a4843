// fx::nn::flatten and fx::nn::reshape<Dims...>: Keras's Flatten and Reshape. They change the
// per-example shape and keep the batch axis; no data is copied.
//
//   fx::nn::flatten{}                      // (batch, 7, 7, 64) -> (batch, 3136)
//   fx::nn::reshape<28, 28, 1>{}           // (batch, 784) -> (batch, 28, 28, 1)
//   fx::nn::permute<2, 1>{}                // (batch, 49, 64) -> (batch, 64, 49), Keras's Permute
//
// flatten and reshape copy no data; permute is a strided view that the next statement reads.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <string>
#include <vector>

#include "../expr/remap.hpp"

namespace fluxion::nn {

struct flatten : stateless_layer<flatten> {
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "flatten";
  static constexpr bool device_generic = true;
  template <index_t... D>
  static static_shape<(index_t(1) * ... * D)> output_shape(static_shape<D...>);

  explicit flatten(std::string n = {}) : stateless_layer(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    if (e.shape().rank() < 1)
      throw shape_error("flatten '" + m_name + "': expects input with a batch axis, got a scalar");
    const index_t batch = e.shape()[0];
    return fluxion::reshape(std::move(e), {batch, batch == 0 ? 0 : -1});
  }
};

template <index_t... Dims>
struct reshape : stateless_layer<reshape<Dims...>> {
  static_assert(sizeof...(Dims) > 0 && ((Dims > 0) && ...),
                "fluxion::nn::reshape<Dims...>: give the positive per-example target shape, e.g. reshape<28, 28, 1>.");
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "reshape";
  static constexpr bool device_generic = true;
  static constexpr index_t size = (index_t(1) * ... * Dims);

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::check_extents<(index_t(1) * ... * D) == size, "reshape", "elements per example",
                                        (index_t(1) * ... * D), "elements of the target shape", size>::value,
                  "fluxion::nn::reshape: the target shape must hold as many elements as each input example.");
    return static_shape<Dims...>{};
  }

  explicit reshape(std::string n = {}) : stateless_layer<reshape>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    const fluxion::shape& s = e.shape();
    if (s.rank() < 1 || s.size() != s[0] * size)
      throw shape_error("reshape '" + this->m_name + "': cannot reshape input of shape " + to_string(s) +
                        " into " + static_shape<Dims...>::text());
    return fluxion::reshape(std::move(e), {s[0], Dims...});
  }
};

namespace detail {
/// The statement of every permute layer of element type T (one instance per program; see
/// dense_forward in nn/dense.hpp): the permuted copy, contiguous for the next layer.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> permute_forward(const tensor<T, Device>& x, std::vector<int> perm) {
  return tensor<T, Device>(fluxion::transpose(x, std::move(perm)));
}
}  // namespace detail

/// Keras's Permute: Axes is a permutation of 1..rank over the per-example axes (the batch axis
/// stays first).
template <int... Axes>
struct permute : stateless_layer<permute<Axes...>> {
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "permute";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::check_extents<sizeof...(D) == sizeof...(Axes), "permute", "input rank", sizeof...(D),
                                        "axes given", sizeof...(Axes)>::value,
                  "fluxion::nn::permute<Axes...>: give one axis for each per-example axis of the input.");
    constexpr bool is_permutation = [] {
      constexpr int n = sizeof...(Axes);
      bool seen[n + 1]{};
      for (int a : {Axes...}) {
        if (a < 1 || a > n || seen[a]) return false;
        seen[a] = true;
      }
      return true;
    }();
    static_assert(is_permutation, "fluxion::nn::permute<Axes...>: Axes must be a permutation of 1, ..., rank (the "
                                  "per-example axes, counted from 1 as in Keras).");
    if constexpr (sizeof...(D) == sizeof...(Axes) && is_permutation) {
      constexpr std::array<index_t, sizeof...(D)> in{D...};
      return static_shape<in[Axes - 1]...>{};
    } else {
      return static_shape<D...>{};
    }
  }

  explicit permute(std::string n = {}) : stateless_layer<permute>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    if (e.shape().rank() != static_cast<int>(sizeof...(Axes)) + 1)
      throw shape_error("permute '" + this->m_name + "': expects input of rank " + std::to_string(sizeof...(Axes) + 1) +
                        " (batch first), got " + to_string(e.shape()));
    return detail::permute_forward(fluxion::detail::materialize(e), {0, Axes...});
  }
};

}  // namespace fluxion::nn
