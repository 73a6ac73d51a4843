// Materialization: where an expression becomes a tensor and its fused kernel runs.
//
// Principle 2: one kernel per output. An elementwise tree is evaluated in one pass by the
// device's evaluator; a boundary node (reduction, matmul, concat ...) computes its own tensor,
// once, and caches it so an expression reused in several statements does not recompute it.
#pragma once

#include <memory>
#include <optional>

#include "../tensor/tensor.hpp"
#include "forward.hpp"
#include "layout.hpp"

namespace fluxion {
namespace detail {

/// Autodiff's view of materializations. Tapes and forward accumulators (autodiff/) count
/// themselves in `observers`; while any is alive, each top-level materialization is offered to
/// them through on_materialize (defined in autodiff/record.hpp). Materializations nested inside
/// another (a matmul materializing its operands) are not offered: the outer statement's
/// backward function already covers them.
struct autodiff_state {
  static inline thread_local int observers = 0;
  static inline thread_local int depth = 0;
  /// The forward accumulators alive on this thread (autodiff/forward.hpp), and how many scopes
  /// pause them all (autodiff_paused). Here, in every translation unit, rather than in forward
  /// mode's own code, so that the code that asks (the fused sequences, reversible blocks,
  /// segment reductions) is the same whether or not its unit compiles forward mode in.
  static inline thread_local int accumulators = 0;
  static inline thread_local int accumulators_paused = 0;
  /// Statements that ran while accumulators were alive (and not paused by a scope) but that no
  /// unit with forward mode compiles: forward_accumulator::jvp says so instead of giving none.
  static inline thread_local std::uint64_t unoffered = 0;
};

/// Records a top-level materialization on the tapes of this thread (on_materialize), or offers it
/// to its forward accumulators (on_materialize_forward; autodiff/record.hpp). Config: the recording
/// unit's autodiff settings (core/config.hpp), FLUXION_MAX_DERIVATIVE_ORDER * 2 + forward mode.
template <int Config, class E, class T, class Device>
void on_materialize(const E& e, const tensor<T, Device>& out);
template <int Config, class E, class T, class Device>
void on_materialize_forward(const E& e, const tensor<T, Device>& out);

// Translation units of one program may be compiled with different autodiff settings
// (core/config.hpp), and they share the code of every statement type they both materialize: the
// linker keeps one copy of materialize<E>, from either of them. So that copy must not decide
// whether E is recorded. Each statement type has one recording function for the whole program,
// statement_recorder<E>::record, set before main by every translation unit that compiles
// autodiff in (statement_enrollment: its initializer runs with the unit's other static
// initializers, whichever materialize<E> the linker kept), the highest order winning, and one
// for forward accumulators, from the units with forward mode on (the highest order among them). A
// statement that runs while a tape records but that no unit could record (a program whose every
// unit that materializes it leaves autodiff out) is counted on the tape, whose gradient() then
// says so instead of returning no gradient (autodiff/tape.hpp).
template <class E>
struct statement_recorder {
  using function = void (*)(const E&, const tensor<value_type_t<E>, device_t<E>>&);
  // Written before main (or by the first statement a static initializer runs), read after.
  static inline function record = nullptr;   // tapes
  static inline int order = 0;
  static inline function forward = nullptr;  // forward accumulators
  static inline int forward_order = 0;
};

template <int Config, class E>
struct statement_enrollment {
  static bool enroll() noexcept {
    using R = statement_recorder<E>;
    constexpr int order = Config / 2;
    if (R::order < order) {
      R::record = &on_materialize<Config, E, value_type_t<E>, device_t<E>>;
      R::order = order;
    }
    if constexpr (Config % 2 == 1)
      if (R::forward_order < order) {
        R::forward = &on_materialize_forward<Config, E, value_type_t<E>, device_t<E>>;
        R::forward_order = order;
      }
    return true;
  }
  static inline const bool enrolled = enroll();
};

/// Counts a statement on the recording tapes of this thread that none of them could record (autodiff/tape.hpp).
void note_unrecorded_statement();

/// Offers a top-level materialization to the tapes and forward accumulators of this thread.
template <class E, class T, class Device>
void offer_to_autodiff(const E& e, const tensor<T, Device>& out) {
#if FLUXION_MAX_DERIVATIVE_ORDER > 0
  // Naming `enrolled` instantiates it, so this unit enrolls E before main; it is still false in a
  // statement that another static initializer runs before that.
  if (!statement_enrollment<autodiff_config, E>::enrolled) statement_enrollment<autodiff_config, E>::enroll();
#endif
  using R = statement_recorder<E>;
  if (R::record) R::record(e, out);
  else note_unrecorded_statement();
  if (R::forward) R::forward(e, out);
  else if (autodiff_state::accumulators > 0 && autodiff_state::accumulators_paused == 0) ++autodiff_state::unoffered;
}

struct materialize_depth {
  materialize_depth() { ++autodiff_state::depth; }
  ~materialize_depth() { --autodiff_state::depth; }
  materialize_depth(const materialize_depth&) = delete;
  materialize_depth& operator=(const materialize_depth&) = delete;
};

/// Evaluates `e` into a new tensor without offering it to tapes or forward accumulators: for
/// writes that are not differentiable operations (a variable's assign, assign_add and assign_sub,
/// as in TensorFlow), so that they instantiate the statement's kernel but none of its backward or
/// tangent functions.
template <class E>
auto materialize_unrecorded(const E& e) -> tensor<value_type_t<E>, device_t<E>> {
  using T = value_type_t<E>;
  using Device = device_t<E>;
  if constexpr (is_tensor_v<E>) {
    return e;
  } else {
    materialize_depth nested;  // what a kernel boundary materializes inside is not offered either
    if constexpr (is_boundary_v<E>) {
      return e.eval();
    } else {
      if constexpr (requires { e.direct(); })  // a node with a faster way to be assigned as it is (gather)
        if (auto d = e.direct()) return std::move(*d);
      tensor<T, Device> o(e.shape());
      evaluator<Device>::assign(o.mutable_data(), destination_layout(e.shape()), e.make_view(), e.shape());
      return o;
    }
  }
}

template <class E>
auto materialize(const E& e) -> tensor<value_type_t<E>, device_t<E>> {
  if constexpr (is_tensor_v<E>) {
    return e;
  } else {
    auto out = materialize_unrecorded(e);
    if constexpr (std::is_floating_point_v<value_type_t<E>>)
      if (autodiff_state::observers > 0 && autodiff_state::depth == 0) offer_to_autodiff(e, out);
    return out;
  }
}

/// e materialized as a tensor<T, Device>, for an operand whose element type and device the caller
/// has static_asserted to be T and Device: where they are not, an empty tensor, so that the
/// caller's message is the only error (not a second one from tensor's constructor).
template <class T, class Device, class E>
tensor<T, Device> materialize_asserted(const E& e) {
  if constexpr (std::is_same_v<value_type_t<E>, T> && std::is_same_v<device_t<E>, Device>) return materialize(e);
  else return tensor<T, Device>();
}

/// Writes expression `e` into the sub-block of `out` at `offset` whose strides are `strides`.
template <class T, class Device, class E>
void assign_into(tensor<T, Device>& out, index_t offset, const index_t* strides, const E& e) {
  evaluator<Device>::assign(out.mutable_data(), destination_layout(e.shape(), offset, strides),
                            e.make_view(), e.shape());
}

/// The truth value of a one-element expression, as in `while (!fx::all(a == 1))`.
template <class E>
bool truth_value(const E& e) {
  const auto t = materialize(e);
  if (t.size() != 1)
    throw invalid_argument("bool: the truth value of a tensor of shape " + to_string(t.shape()) + " with " +
                           std::to_string(t.size()) + " elements is ambiguous; reduce it with fluxion::all or fluxion::any");
  return static_cast<bool>(t.item());
}

template <class E>
typename E::value_type item_of(const E& e) {
  return materialize(e).item();
}

/// Base of nodes that materialize: Derived::compute() returns the tensor, computed once and
/// shared by every copy of the node.
template <class Derived, class T, class Device>
struct boundary_expr : expression_base, boundary_base {
  using value_type = T;
  using device_type = Device;

  const tensor<T, Device>& eval() const {
    if (!m_cache->has_value()) {
      materialize_depth nested;
      m_cache->emplace(static_cast<const Derived&>(*this).compute());
    }
    if constexpr (std::is_floating_point_v<T>)
      if (autodiff_state::observers > 0 && autodiff_state::depth == 0)
        offer_to_autodiff(static_cast<const Derived&>(*this), **m_cache);
    return **m_cache;
  }
  leaf_view<T> make_view() const { return eval().make_view(); }
  explicit operator bool() const { return truth_value(static_cast<const Derived&>(*this)); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  T item() const { return item_of(static_cast<const Derived&>(*this)); }

 private:
  std::shared_ptr<std::optional<tensor<T, Device>>> m_cache =
      std::make_shared<std::optional<tensor<T, Device>>>();
};

}  // namespace detail

/// Materializes any expression into a tensor.
template <expression E>
auto eval(const E& e) {
  return detail::materialize(e);
}

}  // namespace fluxion

// Autodiff hooks into every materialization: see autodiff/record.hpp. Defining
// FLUXION_MAX_DERIVATIVE_ORDER to 0 compiles an inference-only program without any of it.
//
// Include order. record.hpp needs every expression node (indexing, matmul, reduce, remap, scan)
// and the tape, and the headers that define them include this one. So each of them includes this
// header first, before its own include guard, and has its #pragma once after the guard. Whichever
// of them a program includes first, this header is read first and brings them all in, in an order
// that compiles; when it returns, the first one's guard is defined and the rest of its text is
// skipped. (Until stop 70 a program whose first include was, say, <fluxion/nn/lstm.hpp> failed with
// "pad_expr was not declared". CI compiles every header alone: compile_time.self_contained_*.)
#include "../autodiff/record.hpp"
