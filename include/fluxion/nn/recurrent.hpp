// What Keras's recurrent layers share (fx::nn::lstm in nn/lstm.hpp, fx::nn::gru in nn/gru.hpp):
// a kernel (features, gates * units), a recurrent kernel (units, gates * units), a bias, their
// initializers and names, the input's checks, and the rule that picks the fused sequence (one tape
// entry over a fused cell per step) or the statements (differentiable to any order).
#pragma once

#include <optional>
#include <string>

#include "../tensor/creation.hpp"
#include "initializers.hpp"
#include "module.hpp"

namespace fluxion::nn {

namespace detail {

/// The one tape that may record a fused sequence whose backward pass feeds `inputs`, in `tape`
/// (nullptr when none records them): false where the statements must run instead, that is under a
/// forward accumulator or where more than one tape records them (nested tapes, for second
/// derivatives; a fused backward pass is not itself differentiable).
template <class... Tensors>
bool fused_recurrent_applies(gradient_tape*& tape, const Tensors&... inputs) {
#if FLUXION_FORWARD_MODE
  if (!fluxion::detail::accumulator_stack::accumulators.empty()) return false;
#endif
  tape = nullptr;
  for (gradient_tape* t : fluxion::detail::tape_stack::tapes) {
    if (!t->recording() || !(t->tracks(inputs.id()) || ...)) continue;
    if (tape) return false;
    tape = t;
  }
  return true;
}

/// The variables, building, checks and accessors of a recurrent layer with Gates gate blocks.
/// Derived gives base_name, initial_bias() and run(x, kernel, recurrent_kernel, bias), which maps
/// the checked (batch, time >= 1, features) input to the output.
template <class Derived, index_t Gates, index_t Units, class T, class Device>
class recurrent_layer : public layer_base<Derived, T, Device> {
  using base = layer_base<Derived, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr index_t units = Units;

  bool built() const noexcept { return m_kernel.has_value(); }
  /// Creates the variables for inputs of per-example shape (time, features).
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() != 2)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects (batch, time, features) input, got (batch, " + to_string(per_example).substr(1));
    m_in = per_example[1];
    m_kernel.emplace(initial_kernel(gen), this->m_name + "/kernel");
    m_recurrent_kernel.emplace(initial_recurrent_kernel(gen), this->m_name + "/recurrent_kernel");
    m_bias.emplace(Derived::initial_bias(), this->m_name + "/bias");
  }
  void initialize(random::generator& gen) {
    if (!built()) return;
    m_kernel->assign(initial_kernel(gen));
    m_recurrent_kernel->assign(initial_recurrent_kernel(gen));
    m_bias->assign(Derived::initial_bias());
  }

  variable<T, Device>& kernel() { return this->require_built(m_kernel, Derived::base_name, "kernel"); }
  variable<T, Device>& recurrent_kernel() {
    return this->require_built(m_recurrent_kernel, Derived::base_name, "recurrent_kernel");
  }
  variable<T, Device>& bias() { return this->require_built(m_bias, Derived::base_name, "bias"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_kernel, "kernel");
    this->visit(prefix, f, m_recurrent_kernel, "recurrent_kernel");
    this->visit(prefix, f, m_bias, "bias");
  }

 protected:
  explicit recurrent_layer(std::string name) : base(name.empty() ? Derived::base_name : std::move(name)) {}

  /// Checks the (batch, time, features) input e, builds the layer on its first call, and runs it.
  template <class E>
  tensor<T, Device> checked_run(const E& e) {
    const fluxion::shape s = e.shape();
    if (s.rank() != 3)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects input of shape (batch, time, features), got " + to_string(s));
    if (!built()) build(fluxion::shape{s[1], s[2]});
    if (s[2] != m_in || s[1] < 1)
      throw shape_error(std::string(Derived::base_name) + " '" + this->m_name +
                        "': expects input of shape (batch, time >= 1, " + std::to_string(m_in) + "), got " +
                        to_string(s));
    return Derived::run(fluxion::detail::materialize(e), *m_kernel, *m_recurrent_kernel, *m_bias);
  }

 private:
  // Drawn on the host (the same values on every device), then copied to Device.
  tensor<T, Device> initial_kernel(random::generator& gen) const {
    return fluxion::detail::device_copy<Device>(
        detail::glorot_uniform<T>({m_in, Gates * Units}, m_in, Gates * Units, gen));
  }
  static tensor<T, Device> initial_recurrent_kernel(random::generator& gen) {
    return fluxion::detail::device_copy<Device>(initializers::orthogonal<T>({Units, Gates * Units}, gen));
  }
  index_t m_in = 0;
  std::optional<variable<T, Device>> m_kernel, m_recurrent_kernel, m_bias;
};

}  // namespace detail

}  // namespace fluxion::nn

/// The interface of a recurrent layer class NAME<Units, ReturnSequences, T, Device> deriving from
/// detail::recurrent_layer: its checks, Keras's name, the static output shape, the constructor and
/// the call, with compile-time messages that name the layer. The class adds run() and
/// initial_bias().
#define FLUXION_RECURRENT_LAYER(NAME)                                                                              \
  static_assert(Units > 0, "fluxion::nn::" #NAME "<Units>: Units must be positive.");                             \
  static_assert(std::is_floating_point_v<T>,                                                                      \
                "fluxion::nn::" #NAME "<Units, ReturnSequences, T>: T must be a floating-point type.");          \
                                                                                                                  \
 public:                                                                                                          \
  static constexpr const char* base_name = #NAME;                                                                 \
  static constexpr bool return_sequences = ReturnSequences;                                                       \
  template <class U, class D = cpu>                                                                               \
  using rebind = NAME<Units, ReturnSequences, U, D>;                                                              \
  /** (time, features) per example becomes (Units), or (time, Units) with ReturnSequences. */                     \
  template <index_t... D>                                                                                         \
  static auto output_shape(static_shape<D...>) {                                                                  \
    static_assert(detail::check_extents<sizeof...(D) == 2, #NAME, "input rank", sizeof...(D), "rank", 2>::value,  \
                  "fluxion::nn::" #NAME ": the input must be (time, features) per example (rank 2); reshape it "  \
                  "first, e.g. with fluxion::nn::reshape<Time, Features>.");                                      \
    if constexpr (sizeof...(D) == 2 && ReturnSequences) {                                                         \
      return static_shape<std::array<index_t, 2>{D...}[0], Units>{};                                              \
    } else {                                                                                                      \
      return static_shape<Units>{};                                                                               \
    }                                                                                                             \
  }                                                                                                               \
                                                                                                                  \
  explicit NAME(std::string name = {}) : NAME::recurrent_layer(std::move(name)) {}                                \
                                                                                                                  \
  /** The last hidden state (batch, Units), or every one (batch, time, Units) with ReturnSequences. */            \
  template <class X>                                                                                              \
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false) {                                                \
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));                                                     \
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,                                                   \
                  "fluxion::nn::" #NAME ": the input's element type differs from the layer's; convert it with "   \
                  "fluxion::cast<T>, or declare the layer as " #NAME "<Units, ReturnSequences, T>.");             \
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,                                                  \
                  "fluxion::nn::" #NAME ": the input is on another device than the layer's variables; move it "   \
                  "with fluxion::to<Device>, or declare the layer with that device.");                            \
    return this->checked_run(e);                                                                                  \
  }
