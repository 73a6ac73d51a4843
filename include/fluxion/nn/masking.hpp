// fx::nn::masking: Keras's Masking layer, for sequences of values (batch, time, features) padded
// with a value: a step whose features all equal mask_value is padding.
//
//   auto net = fx::nn::sequential(fx::nn::input<20, 8>{}, fx::nn::masking{},   // padding steps are all 0
//                                 fx::nn::lstm<32>{}, fx::nn::dense<2>{});    // the LSTM skips them
//   fx::tensor<bool> m = fx::nn::masking{-1.0}.compute_mask(x);               // (batch, time)
//
// As Keras's: the output is the input with the padding steps set to zeros (x times the mask), and
// in an nn::sequential model the mask goes on to the layers after it as an embedding<...>::mask_zero's
// does (nn/sequential.hpp): through dense, dropout, layer_norm and activations to the recurrent
// layer, which skips those steps, or to global_avg_pool1d, whose mean leaves them out. In an nn::model, pass compute_mask(x) to the recurrent layer's
// call(x, {.mask = &m}).
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <string>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"

namespace fluxion::nn {

class masking : public stateless_layer<masking> {
 public:
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  /// A sequential model takes compute_mask(x) on from this layer (nn/sequential.hpp).
  static constexpr bool produces_mask = true;
  static constexpr const char* base_name = "masking";
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(sizeof...(D) >= 2,
                  "fluxion::nn::masking: the input must be (time, features...) per example; a step is padding when "
                  "all its features equal the mask value.");
    return static_shape<D...>{};
  }

  explicit masking(double mask_value = 0.0, std::string name = {})
      : stateless_layer(name.empty() ? base_name : std::move(name)), m_value(mask_value) {}

  double mask_value() const noexcept { return m_value; }

  /// Keras's compute_mask: (batch, time), true where some feature of the step differs from the
  /// mask value.
  template <class X>
  auto compute_mask(X&& x) const {
    const auto in = checked(std::forward<X>(x));
    if constexpr (std::is_floating_point_v<value_type_t<decltype(in)>>) return mask_of(in);
  }

  /// The input with its padding steps set to zeros.
  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    const auto in = checked(std::forward<X>(x));
    using T = value_type_t<decltype(in)>;
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<index_t> kept(static_cast<std::size_t>(in.rank()), 1);  // (batch, time, 1, ...)
      kept[0] = in.shape()[0];
      kept[1] = in.shape()[1];
      const tensor<T, device_t<decltype(in)>> keep(cast<T>(mask_of(in)));
      return tensor<T, device_t<decltype(in)>>(in * reshape(keep, kept));
    }
  }

 private:
  /// The input as a tensor, checked: floating-point values (a compile-time error otherwise, the
  /// callers then compiling nothing more), rank 3 or more.
  template <class X>
  auto checked(X&& x) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_floating_point_v<value_type_t<decltype(e)>>,
                  "fluxion::nn::masking: the input must hold floating-point values; for integer ids use "
                  "fluxion::nn::embedding<...>::mask_zero.");
    tensor<value_type_t<decltype(e)>, device_t<decltype(e)>> in(std::move(e));
    if (in.rank() < 3)
      throw shape_error("masking '" + m_name + "': expects input of shape (batch, time, features...), got " +
                        to_string(in.shape()));
    return in;
  }
  template <class T, class Device>
  tensor<bool, Device> mask_of(const tensor<T, Device>& in) const {
    std::vector<int> features;
    for (int a = 2; a < static_cast<int>(in.rank()); ++a) features.push_back(a);
    return tensor<bool, Device>(fluxion::any(in != static_cast<T>(m_value), axes(features)));
  }

  double m_value;
};

}  // namespace fluxion::nn
