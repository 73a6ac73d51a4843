// fx::nn::dropout: Keras's Dropout. In training mode each element is zeroed with probability
// `rate` and the others are scaled by 1 / (1 - rate); in inference it is the identity.
//
//   fx::nn::dropout drop{0.5};
//   auto y = drop(x, /*training=*/true);
//
// The mask is drawn from a counter-based generator (fx::random), so a given seed gives the same
// masks whatever the thread count.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <cmath>
#include <memory>
#include <string>

#include "../expr/elementwise.hpp"
#include "../tensor/random.hpp"

namespace fluxion::nn {

namespace detail {
/// The statement of every dropout layer of element type T in training mode (one instance per
/// program, prebuilt with FLUXION_PREBUILT_KERNELS; see dense_forward in nn/dense.hpp).
/// On a device the mask's uniforms are drawn on the host, as on the cpu, and copied: the same
/// generator gives the same mask on every device.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> dropout_forward(const tensor<T, Device>& x, double rate, random::generator& gen) {
  const tensor<T, Device> u = random::uniform<T, Device>(x.shape(), gen);
  return tensor<T, Device>(where(u >= static_cast<T>(rate), x * static_cast<T>(1.0 / (1.0 - rate)), T(0)));
}
}  // namespace detail

class dropout : public stateless_layer<dropout> {
 public:
  static constexpr bool elementwise = false;
  /// Keras's supports_masking: a sequential model passes a mask through this layer (it keeps the time axis).
  static constexpr bool supports_masking = true;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "dropout";
  template <index_t... D>
  static static_shape<D...> output_shape(static_shape<D...>);

  explicit dropout(double rate, std::uint64_t seed = 0, std::string name = {})
      : stateless_layer(name.empty() ? base_name : std::move(name)), m_rate(rate),
        m_generator(std::make_shared<random::generator>(seed)) {
    if (!(rate >= 0.0 && rate < 1.0))
      throw invalid_argument("dropout: rate = " + std::to_string(rate) + " is not in [0, 1)");
  }

  double rate() const noexcept { return m_rate; }
  random::generator& generator() noexcept { return *m_generator; }

  /// In training mode, a new mask from the generator; inside an nn::recompute_scope (a recomputed
  /// segment, a reversible block's backward pass) the mask of this layer's last call again, without
  /// advancing the generator, so that the recomputation sees what the forward pass saw.
  template <class X>
  auto operator()(X&& x, bool training = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    if (!training || m_rate == 0.0) return tensor<T, device_t<decltype(e)>>(e);
    if (recompute_scope::active()) {
      random::generator replay(m_generator->seed());
      replay.skip(*m_last_offset);
      return detail::dropout_forward<T>(fluxion::detail::materialize(e), m_rate, replay);
    }
    *m_last_offset = m_generator->offset();
    return detail::dropout_forward<T>(fluxion::detail::materialize(e), m_rate, *m_generator);
  }

 private:
  double m_rate;
  std::shared_ptr<random::generator> m_generator;  // shared: a copied model draws from one stream
  std::shared_ptr<std::uint64_t> m_last_offset = std::make_shared<std::uint64_t>(0);  // the last mask's
};

}  // namespace fluxion::nn
