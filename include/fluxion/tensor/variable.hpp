// fx::variable<T, Device>: the only mutable state in fluxion.
//
//   fx::variable<float> w{fx::zeros<float>({784, 10}), "w"};
//   w.assign_sub(0.1f * grad);      // one fused pass: w - 0.1 * grad
//   auto y = fx::matmul(x, w);      // a variable reads as its current value
//
// Each assignment evaluates the new value into a fresh buffer (recycled from the allocator's
// cache) and swaps it in, so tensors read from the variable earlier, such as those a gradient
// tape saved, never change under their holder. The version counter increments on every
// assignment.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_TENSOR_VARIABLE_HPP
#define FLUXION_TENSOR_VARIABLE_HPP
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/remap.hpp"
#include "tensor.hpp"

namespace fluxion {

namespace detail {
inline std::uint64_t next_variable_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

/// Hook for the gradient tape: notified when a variable is read (autodiff/tape.hpp).
struct variable_read_observer {
  static inline thread_local void (*on_read)(std::uint64_t variable_id, bool trainable, std::uint64_t tensor_id,
                                            const void* variable, const std::type_info& type) = nullptr;
};
}  // namespace detail

/// A penalty on a variable's value, Keras's kernel_regularizer: l1 * sum(|w|) + l2 * sum(w^2),
/// added to the loss by fx::fit, fx::evaluate and nn::compile_step (and by a custom loop through
/// nn::regularization_loss). nn::regularizers::l1, l2 and l1_l2 make one; a layer's
/// kernel_regularizer and bias_regularizer options attach one to its variables.
struct regularizer {
  double l1 = 0;
  double l2 = 0;
  /// Whether the penalty is not zero.
  explicit operator bool() const noexcept { return l1 != 0 || l2 != 0; }
  friend bool operator==(const regularizer&, const regularizer&) = default;
};

/// A projection of a variable's value after each optimizer update, Keras's kernel_constraint:
/// apply_gradients replaces w by it once the variable is updated. nn::constraints::max_norm,
/// min_max_norm, unit_norm and non_neg make one; a layer's kernel_constraint and bias_constraint
/// options attach one to its variables. The norms are over `axes` (Keras's axis: 0, each output
/// unit's incoming weights of a dense kernel; {0, 1, 2} for a convolution's), with Keras's
/// epsilon 1e-7: w * (rate * clip(n, min_value, max_value) + (1 - rate) * n) / (1e-7 + n).
struct constraint {
  enum class kind : unsigned char { none, max_norm, min_max_norm, unit_norm, non_neg };
  kind which = kind::none;
  double min_value = 0;
  double max_value = 0;
  double rate = 1;
  std::vector<int> axes = {0};
  /// Whether there is one.
  explicit operator bool() const noexcept { return which != kind::none; }
  friend bool operator==(const constraint&, const constraint&) = default;
};

template <class T, class Device>
class variable {
 public:
  using value_type = T;
  using device_type = Device;

  explicit variable(tensor<T, Device> initial, std::string name = {}, bool trainable = true)
      : m_value(std::move(initial)), m_name(std::move(name)), m_trainable(trainable) {}
  template <expression E>
    requires(!is_tensor_v<std::remove_cvref_t<E>>)
  explicit variable(const E& initial, std::string name = {}, bool trainable = true)
      : variable(tensor<T, Device>(initial), std::move(name), trainable) {}

  variable(const variable&) = delete;  // a variable is an identity; share it by reference
  variable& operator=(const variable&) = delete;
  variable(variable&& o) noexcept
      : m_value(std::move(o.m_value)), m_name(std::move(o.m_name)), m_trainable(o.m_trainable),
        m_version(o.m_version), m_id(o.m_id), m_regularizer(o.m_regularizer), m_constraint(std::move(o.m_constraint)) {}

  /// The current value. Under a gradient tape, reading a trainable variable watches it, so what
  /// is computed from the value is differentiated with respect to the variable.
  const tensor<T, Device>& read_value() const {
    if (auto* f = detail::variable_read_observer::on_read) f(m_id, m_trainable, m_value.id(), this, typeid(variable));
    return m_value;
  }
  /// The same as read_value(): a read under a tape is recorded (as in TensorFlow, where
  /// `v.value()` and `v.read_value()` are both seen by the tape).
  const tensor<T, Device>& value() const { return read_value(); }
  /// The current value without notifying any tape: for optimizers, checkpoints and printing,
  /// which must not make a tape watch the variable.
  const tensor<T, Device>& peek() const noexcept { return m_value; }
  /// Renames the variable (models give their variables hierarchical names, `conv1/kernel`).
  void set_name(std::string name) { m_name = std::move(name); }

  const fluxion::shape& shape() const noexcept { return m_value.shape(); }
  int rank() const noexcept { return m_value.rank(); }
  index_t size() const noexcept { return m_value.size(); }
  const std::string& name() const noexcept { return m_name; }
  bool trainable() const noexcept { return m_trainable; }
  void set_trainable(bool t) noexcept { m_trainable = t; }
  /// The penalty fx::fit adds to the loss for this variable while it is trainable (none by default).
  const fluxion::regularizer& regularizer() const noexcept { return m_regularizer; }
  void set_regularizer(const fluxion::regularizer& r) {
    for (const auto& [what, v] : {std::pair{"l1", r.l1}, std::pair{"l2", r.l2}})
      if (!(v >= 0) || !std::isfinite(v))
        throw invalid_argument(std::string("set_regularizer: variable '") + m_name + "': " + what + " = " +
                               detail::value_text(v) + " must be finite and not negative");
    m_regularizer = r;
  }
  /// The projection optimizers apply after each update of this variable (none by default).
  const fluxion::constraint& constraint() const noexcept { return m_constraint; }
  void set_constraint(fluxion::constraint c) {
    const std::string what = std::string("set_constraint: variable '") + m_name + "' of shape " + to_string(shape());
    if (c.which == fluxion::constraint::kind::max_norm || c.which == fluxion::constraint::kind::min_max_norm) {
      if (!(c.min_value >= 0) || !(c.min_value <= c.max_value) || !std::isfinite(c.max_value))
        throw invalid_argument(what + ": the norms' bounds must be finite with 0 <= min_value <= max_value, got [" +
                               detail::value_text(c.min_value) + ", " + detail::value_text(c.max_value) + "]");
      if (!(c.rate >= 0 && c.rate <= 1))
        throw invalid_argument(what + ": rate = " + detail::value_text(c.rate) + " must be in [0, 1]");
    }
    if (c.which != fluxion::constraint::kind::none && c.which != fluxion::constraint::kind::non_neg) {
      if (c.axes.empty()) throw invalid_argument(what + ": the constraint's axes are empty");
      for (std::size_t i = 0; i < c.axes.size(); ++i) {
        const int a = c.axes[i];
        if (a < -rank() || a >= rank())
          throw invalid_argument(what + ": the constraint's axis " + std::to_string(a) + " is not in [" +
                                 std::to_string(-rank()) + ", " + std::to_string(rank()) + ")");
        for (std::size_t j = 0; j < i; ++j)
          if ((c.axes[j] + rank()) % std::max(rank(), 1) == (a + rank()) % std::max(rank(), 1))
            throw invalid_argument(what + ": the constraint's axis " + std::to_string(a) + " is repeated");
      }
    }
    m_constraint = std::move(c);
  }
  std::uint64_t version() const noexcept { return m_version; }
  std::uint64_t id() const noexcept { return m_id; }

  /// Replaces the value with a tensor of the variable's shape: the tensor is shared, not copied
  /// (tensors are immutable). Not a template, so optimizers and layers that swap in new values do
  /// not instantiate the expression path below; other shapes go through it (broadcasting).
  variable& assign(const tensor<T, Device>& t) {
    if (t.shape() != shape()) {
      check_not_none(t, "assign");
      return assign_expression(t);
    }
    m_value = t;
    ++m_version;
    return *this;
  }
  /// Replaces the value; `e` must have the variable's shape or broadcast to it.
  template <class E>
    requires(operand<E>)
  variable& assign(const E& e) {
    check_not_none(e, "assign");
    return assign_expression(e);
  }
  template <class E>
    requires(operand<E>)
  variable& assign_add(const E& e) {
    static_assert(same_element<E>,
                  "fluxion::variable::assign_add: the update's element type differs from the variable's; "
                  "convert it with fluxion::cast<T>(expr) first.");
    static_assert(same_device<E>,
                  "fluxion::variable::assign_add: the update lives on another device; move it with "
                  "fluxion::to<Device>(expr) first.");
    if constexpr (same_element<E> && same_device<E>) {  // else: the message above, and no other
      check_not_none(e, "assign_add");
      check_update_shape(detail::as_expr<variable>(e).shape(), "assign_add");
      assign(m_value + e);
    }
    return *this;
  }
  template <class E>
    requires(operand<E>)
  variable& assign_sub(const E& e) {
    static_assert(same_element<E>,
                  "fluxion::variable::assign_sub: the update's element type differs from the variable's; "
                  "convert it with fluxion::cast<T>(expr) first.");
    static_assert(same_device<E>,
                  "fluxion::variable::assign_sub: the update lives on another device; move it with "
                  "fluxion::to<Device>(expr) first.");
    if constexpr (same_element<E> && same_device<E>) {
      check_not_none(e, "assign_sub");
      check_update_shape(detail::as_expr<variable>(e).shape(), "assign_sub");
      assign(m_value - e);
    }
    return *this;
  }

 private:
  template <class E>
  using update_expr = decltype(detail::as_expr<variable>(std::declval<const E&>()));
  template <class E>
  static constexpr bool same_element = std::is_same_v<value_type_t<update_expr<E>>, T>;
  template <class E>
  static constexpr bool same_device = std::is_same_v<device_t<update_expr<E>>, Device>;
  template <class E>
  variable& assign_expression(const E& e) {
    auto x = detail::as_expr<variable>(e);
    static_assert(same_element<E>,
                  "fluxion::variable::assign: the expression's element type differs from the variable's; "
                  "convert it with fluxion::cast<T>(expr) first.");
    static_assert(same_device<E>,
                  "fluxion::variable::assign: the expression lives on another device; move it with "
                  "fluxion::to<Device>(expr) first.");
    if constexpr (same_element<E> && same_device<E>) {  // else: no other error
      if (x.shape() == shape()) {
        m_value = detail::materialize_unrecorded(x);
      } else {
        const std::optional<fluxion::shape> b = try_broadcast_shapes(x.shape(), shape());
        if (!b || *b != shape())  // the variable's name in either case, as a layer's gamma().assign(...) needs
          throw shape_error("assign: cannot assign a value of shape " + to_string(x.shape()) + " to variable '" +
                            m_name + "' of shape " + to_string(shape()) +
                            (x.shape() == fluxion::shape{0} ? " (shape (0,) is the shape of a default-constructed or "
                                                              "moved-from tensor: was it assigned?)"
                                                            : ""));
        m_value = detail::materialize_unrecorded(broadcast_to(x, shape()));
      }
      ++m_version;
    }
    return *this;
  }
  template <class E>
  void check_not_none(const E& e, const char* op) const {
    if constexpr (is_tensor_v<E>) {
      if (e.is_none())
        throw invalid_argument(std::string(op) + ": the update for variable '" + m_name + "' of shape " +
                               to_string(shape()) + " is none (TensorFlow's None), what gradient_tape::gradient "
                               "returns for a source the target does not depend on: check that the loss reads the "
                               "variable while the tape records");
    }
  }
  void check_update_shape(const fluxion::shape& s, const char* op) const {
    if (s == fluxion::shape{0} && size() != 0)
      throw shape_error(std::string(op) + ": the update for variable '" + m_name + "' of shape " + to_string(shape()) +
                        " is an empty tensor of shape (0,). gradient_tape::gradient returns one for a source the "
                        "target does not depend on: check that the loss reads the variable while the tape records");
    const std::optional<fluxion::shape> b = try_broadcast_shapes(s, shape());
    if (!b || *b != shape())
      throw shape_error(std::string(op) + ": cannot apply an update of shape " + to_string(s) + " to variable '" +
                        m_name + "' of shape " + to_string(shape()));
  }

  tensor<T, Device> m_value;
  std::string m_name;
  bool m_trainable = true;
  std::uint64_t m_version = 0;
  std::uint64_t m_id = detail::next_variable_id();
  fluxion::regularizer m_regularizer;
  fluxion::constraint m_constraint;
};

}  // namespace fluxion

#endif  // FLUXION_TENSOR_VARIABLE_HPP
