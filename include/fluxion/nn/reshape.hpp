// fx::nn::flatten and fx::nn::reshape<Dims...>: Keras's Flatten and Reshape. They change the
// per-example shape and keep the batch axis; no data is copied.
//
//   fx::nn::flatten{}                      // (batch, 7, 7, 64) -> (batch, 3136)
//   fx::nn::reshape<28, 28, 1>{}           // (batch, 784) -> (batch, 28, 28, 1)
#pragma once

#include <string>

#include "../expr/remap.hpp"
#include "module.hpp"

namespace fluxion::nn {

struct flatten : stateless_layer<flatten> {
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "flatten";
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

}  // namespace fluxion::nn
