// fx::nn::activity_regularization: Keras's ActivityRegularization layer, a penalty on the values
// that pass through it (the activity), added to the training loss.
//
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<64>{}, fx::nn::relu{},
//                                 fx::nn::activity_regularization{fx::nn::regularizers::l1(1e-5)},
//                                 fx::nn::dense<784>{}, fx::nn::sigmoid{});   // a sparse autoencoder
//   fx::fit(net, opt, loss_fn, data);        // the loss is loss_fn's + 1e-5 sum(|h|) of each batch
//
// Keras's Dense(64, activation="relu", activity_regularizer=L1(1e-5)) is the dense layer, its
// activation and this layer after them: in fluxion an activation is a layer of its own. The output
// is the input, unchanged; the penalty l1 sum(|x|) + l2 sum(x^2) over the whole batch (Keras 3's:
// tf.keras 2 divided it by the batch size) goes to the running model's losses (nn::add_loss, in
// nn/regularizers.hpp): fx::fit, fx::evaluate and nn::compile_step add it to the loss, and a loop
// of your own adds it with net.regularization_loss(). Keras's defaults, l1 = l2 = 0, add nothing.
// Called outside every model's call, fit and loss_scope, it throws: its penalty would count nowhere.
#pragma once

#include "module.hpp"  // first: the core (fluxion/tensor.hpp) in its order
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"

namespace fluxion::nn {

namespace detail {
/// l1 sum(|x|) + l2 sum(x^2), as a tape sees it: the statement of every activity_regularization of
/// element type T, a function of the tensor alone, so that FLUXION_PREBUILT_KERNELS compiles the
/// float one once (nn/prebuilt.hpp). Config: as the layers' statements.
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> activity_penalty(const tensor<T, Device>& x, double l1, double l2) {
  return tensor<T, Device>(reduce_sum(static_cast<T>(l1) * abs(x) + static_cast<T>(l2) * square(x)));
}
}  // namespace detail

class activity_regularization : public stateless_layer<activity_regularization> {
 public:
  static constexpr bool elementwise = false;  // not fused into the layer before it: it adds a loss
  static constexpr bool device_generic = true;
  /// Keras's supports_masking: a sequential model passes a mask through this layer.
  static constexpr bool supports_masking = true;
  static constexpr const char* base_name = "activity_regularization";
  template <index_t... D>
  static auto output_shape(static_shape<D...> s) {
    return s;
  }

  /// Keras's ActivityRegularization(l1=0.0, l2=0.0).
  explicit activity_regularization(double l1 = 0, double l2 = 0, std::string name = {})
      : activity_regularization(regularizer{l1, l2}, std::move(name)) {}
  /// The penalty as a weight regularizer's: activity_regularization{fx::nn::regularizers::l1(1e-5)}.
  explicit activity_regularization(regularizer penalty, std::string name = {})
      : stateless_layer(name.empty() ? base_name : std::move(name)), m_penalty(penalty) {
    detail::check_regularizer("activity_regularization '" + m_name + "'", "activity_regularizer", m_penalty);
  }

  const regularizer& penalty() const noexcept { return m_penalty; }

  /// The input, unchanged; its penalty goes to the running model's losses.
  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    using T = value_type_t<decltype(e)>;
    using Device = device_t<decltype(e)>;
    static_assert(std::is_floating_point_v<T>,
                  "fluxion::nn::activity_regularization: the input must hold floating-point values (the activity of "
                  "a layer).");
    tensor<T, Device> in(std::move(e));
    if constexpr (std::is_floating_point_v<T>) {  // else: the message above, and no other
      if (!m_penalty) return in;
      std::vector<tensor<T, Device>>* into = loss_scope<T, Device>::innermost();
      if (!into) {
        if (recompute_scope::active()) return in;  // a recomputation: its first run counted the penalty
        throw error("activity_regularization '" + m_name +
                    "': called outside every model's call, so its penalty would count nowhere; use it inside an "
                    "nn::sequential or nn::model, or open an fx::nn::loss_scope<T, Device> around the call and add "
                    "its total() to the loss");
      }
      into->push_back(detail::activity_penalty(in, m_penalty.l1, m_penalty.l2));
    }
    return in;
  }

 private:
  regularizer m_penalty;
};

}  // namespace fluxion::nn
