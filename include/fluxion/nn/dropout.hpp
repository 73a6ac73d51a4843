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

class dropout : public stateless_layer<dropout> {
 public:
  static constexpr bool elementwise = false;
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

  template <class X>
  auto operator()(X&& x, bool training = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    if (!training || m_rate == 0.0) return tensor<T>(e);
    const tensor<T> u = random::uniform<T>(e.shape(), *m_generator);
    return tensor<T>(where(u >= static_cast<T>(m_rate), e * static_cast<T>(1.0 / (1.0 - m_rate)), T(0)));
  }

 private:
  double m_rate;
  std::shared_ptr<random::generator> m_generator;  // shared: a copied model draws from one stream
};

}  // namespace fluxion::nn
