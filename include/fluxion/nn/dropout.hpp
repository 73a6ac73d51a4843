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
#include <cstdio>
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
/// A dropout layer's random stream (nn::dropout, and the recurrent layers' dropout): call(f) gives
/// f the generator a training call draws its mask from, a new mask each call; inside an
/// nn::recompute_scope (a recomputed segment, a reversible block's backward pass) a generator that
/// replays the mask of the last call, without advancing the stream, so that the recomputation
/// sees what the forward pass saw. Copies share the stream, as a copied model draws from one.
class dropout_stream {
 public:
  explicit dropout_stream(std::uint64_t seed) : m_generator(std::make_shared<random::generator>(seed)) {}
  random::generator& generator() const noexcept { return *m_generator; }
  std::uint64_t seed() const noexcept { return m_generator->seed(); }

  template <class F>
  auto call(F&& f) const {
    if (recompute_scope::active()) {
      random::generator replay(m_generator->seed());
      replay.skip(*m_last_offset);
      return f(replay);
    }
    *m_last_offset = m_generator->offset();
    return f(*m_generator);
  }

 private:
  std::shared_ptr<random::generator> m_generator;
  std::shared_ptr<std::uint64_t> m_last_offset = std::make_shared<std::uint64_t>(0);  // the last mask's
};

/// Keras's check of a dropout rate, in [0, 1): the rate, or an invalid_argument naming the layer.
inline double check_dropout_rate(const std::string& layer, const char* what, double rate) {
  if (!(rate >= 0.0 && rate < 1.0)) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", rate);
    throw invalid_argument(layer + ": " + what + " = " + text + " is not in [0, 1)");
  }
  return rate;
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
      : stateless_layer(name.empty() ? base_name : std::move(name)), m_rate(rate), m_stream(seed) {
    detail::check_dropout_rate("dropout", "rate", rate);
  }

  double rate() const noexcept { return m_rate; }
  random::generator& generator() noexcept { return m_stream.generator(); }

  /// In training mode, a new mask from the generator; inside an nn::recompute_scope (a recomputed
  /// segment, a reversible block's backward pass) the mask of this layer's last call again, without
  /// advancing the generator, so that the recomputation sees what the forward pass saw.
  template <class X>
  auto operator()(X&& x, bool training = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    if (!training || m_rate == 0.0) return tensor<T, device_t<decltype(e)>>(e);
    return m_stream.call(
        [&](random::generator& gen) { return detail::dropout_forward<T>(fluxion::detail::materialize(e), m_rate, gen); });
  }

 private:
  double m_rate;
  detail::dropout_stream m_stream;
};

}  // namespace fluxion::nn
