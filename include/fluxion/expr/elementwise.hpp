// Elementwise expression nodes and the functions and operators that build them.
//
//   auto e = a * b + c * d - fx::sin(e);   // a binary_expr<subtract, ...>; nothing runs yet
//   fx::tensor<float> r = e;               // one fused loop over memory
//
// Nodes are small aggregates holding their operands by value (tensors are handles), so an
// expression may outlive the variables it was built from. Shapes broadcast as in NumPy and are
// checked when the node is built, so a mismatch throws at once, naming the op.
#pragma once

#include <type_traits>
#include <utility>

#include "../core/shape.hpp"
#include "forward.hpp"
#include "layout.hpp"
#include "ops.hpp"
#include "view.hpp"

namespace fluxion {

/// A C++ scalar inside an expression.
template <class T, class Device>
struct scalar_expr : expression_base {
  using value_type = T;
  using device_type = Device;
  T value;

  explicit scalar_expr(T v) : value(v) {}
  fluxion::shape shape() const { return {}; }
  detail::scalar_view<T> make_view() const { return {value}; }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

template <class Op, class A>
struct unary_expr : expression_base {
  using value_type = decltype(Op::apply(value_type_t<A>{}));
  using device_type = device_t<A>;
  using op_type = Op;
  A a;

  explicit unary_expr(A a_) : a(std::move(a_)) {}
  decltype(auto) shape() const { return a.shape(); }
  auto make_view() const { return detail::unary_view<Op, decltype(a.make_view())>{a.make_view()}; }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

namespace detail {
template <class A, class B>
struct common_device {
  static_assert(std::is_same_v<device_t<A>, device_t<B>>,
                "fluxion: an expression mixes devices (fluxion::cpu and fluxion::cuda); move one operand "
                "with fluxion::to<Device>(x) first.");
  using type = device_t<A>;
};
}  // namespace detail

template <class Op, class A, class B>
struct binary_expr : expression_base {
  using value_type = decltype(Op::apply(value_type_t<A>{}, value_type_t<B>{}));
  using device_type = typename detail::common_device<A, B>::type;
  using op_type = Op;
  A a;
  B b;
  fluxion::shape m_shape;

  binary_expr(A a_, B b_)
      : a(std::move(a_)), b(std::move(b_)), m_shape(broadcast_shapes(a.shape(), b.shape(), Op::name)) {}
  const fluxion::shape& shape() const { return m_shape; }
  auto make_view() const {
    auto va = a.make_view();
    auto vb = b.make_view();
    detail::broadcast_view(va, a.shape(), m_shape);
    detail::broadcast_view(vb, b.shape(), m_shape);
    return detail::binary_view<Op, decltype(va), decltype(vb)>{va, vb};
  }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

template <class Op, class A, class B, class C>
struct ternary_expr : expression_base {
  using value_type = decltype(Op::apply(value_type_t<A>{}, value_type_t<B>{}, value_type_t<C>{}));
  using device_type = typename detail::common_device<B, C>::type;
  static_assert(std::is_same_v<device_t<A>, device_type>,  // not common_device<A, B>: one message, this one
                "fluxion::where: the condition and the values live on different devices.");
  using op_type = Op;
  A a;
  B b;
  C c;
  fluxion::shape m_shape;

  ternary_expr(A a_, B b_, C c_)
      : a(std::move(a_)),
        b(std::move(b_)),
        c(std::move(c_)),
        m_shape(broadcast_shapes(broadcast_shapes(a.shape(), b.shape(), Op::name), c.shape(), Op::name)) {}
  const fluxion::shape& shape() const { return m_shape; }
  auto make_view() const {
    auto va = a.make_view();
    auto vb = b.make_view();
    auto vc = c.make_view();
    detail::broadcast_view(va, a.shape(), m_shape);
    detail::broadcast_view(vb, b.shape(), m_shape);
    detail::broadcast_view(vc, c.shape(), m_shape);
    return detail::ternary_view<Op, decltype(va), decltype(vb), decltype(vc)>{va, vb, vc};
  }
  explicit operator bool() const { return detail::truth_value(*this); }
  /// The value of a one-element expression (it is computed first); throws for any other size.
  value_type item() const { return detail::item_of(*this); }
};

namespace detail {

/// The expression an operand stands for: variables are read, scalars become constants of
/// `Like`'s element type (see dtype.hpp for the rule) on `Like`'s device.
/// Throws if `x` is tensor::none(), the gradient a tape gives for a source the target does not
/// depend on: as an operand it would broadcast to an empty result and hide the mistake.
template <class X>
void check_not_none(const X& x, const char* op) {
  if constexpr (is_tensor_v<X>) {
    if (x.is_none()) [[unlikely]]
      throw invalid_argument(std::string(op ? op : "an operation") + ": an operand is none, the gradient that gradient_tape::gradient "
                             "returns for a source the target does not depend on (TensorFlow's None): check that "
                             "the target reads the source while the tape records (a tensor must be watched), test "
                             "g.is_none(), or ask for zeros with fluxion::unconnected_gradients::zero");
  }
}

template <class Like, class X>
decltype(auto) as_expr(X&& x) {
  using D = std::remove_cvref_t<X>;
  if constexpr (is_expression_v<D>) {
    check_not_none(x, nullptr);  // the ops that name themselves checked before this
    return D(std::forward<X>(x));
  } else if constexpr (is_variable_v<D>) {
    return x.read_value();
  } else {
    using L = std::remove_cvref_t<Like>;
    using LT = std::conditional_t<is_variable_v<L> || is_expression_v<L>, value_type_t<L>, D>;
    using LD = std::conditional_t<is_variable_v<L> || is_expression_v<L>, device_t<L>, cpu>;
    using S = scalar_promote_t<LT, D>;
    return scalar_expr<S, LD>(static_cast<S>(x));
  }
}

template <class X, class Like = X>
using expr_t = std::remove_cvref_t<decltype(as_expr<Like>(std::declval<X>()))>;

template <class A, class B>
concept binary_operands = operand<A> && operand<B> && !(is_scalar_v<A> && is_scalar_v<B>);

template <class Op, class A, class B>
auto make_binary(A&& a, B&& b) {
  // A scalar takes its type from the other side.
  using EA = expr_t<A, B>;
  using EB = expr_t<B, A>;
  check_not_none(a, Op::name);
  check_not_none(b, Op::name);
  return binary_expr<Op, EA, EB>(as_expr<B>(std::forward<A>(a)), as_expr<A>(std::forward<B>(b)));
}

template <class Op, class A>
auto make_unary(A&& a) {
  check_not_none(a, Op::name);
  return unary_expr<Op, expr_t<A>>(as_expr<A>(std::forward<A>(a)));
}

}  // namespace detail

// ---- operators ---------------------------------------------------------------------------

#define FLUXION_BINARY_OPERATOR(sym, Op)                                    \
  template <class A, class B>                                             \
    requires detail::binary_operands<A, B>                                \
  auto operator sym(A&& a, B&& b) {                                       \
    return detail::make_binary<ops::Op>(std::forward<A>(a), std::forward<B>(b)); \
  }
FLUXION_BINARY_OPERATOR(+, add)
FLUXION_BINARY_OPERATOR(-, subtract)
FLUXION_BINARY_OPERATOR(*, multiply)
FLUXION_BINARY_OPERATOR(/, divide)
FLUXION_BINARY_OPERATOR(==, equal)
FLUXION_BINARY_OPERATOR(!=, not_equal)
FLUXION_BINARY_OPERATOR(<, less)
FLUXION_BINARY_OPERATOR(<=, less_equal)
FLUXION_BINARY_OPERATOR(>, greater)
FLUXION_BINARY_OPERATOR(>=, greater_equal)
FLUXION_BINARY_OPERATOR(&&, logical_and)
FLUXION_BINARY_OPERATOR(||, logical_or)
#undef FLUXION_BINARY_OPERATOR

/// Integer remainder, with C++'s sign rule (the result takes the dividend's sign).
template <class A, class B>
  requires detail::binary_operands<A, B>
auto operator%(A&& a, B&& b) {
  using R = promote_t<value_type_t<detail::expr_t<A, B>>, value_type_t<detail::expr_t<B, A>>>;
  static_assert(std::is_integral_v<R>,
                "fluxion::operator%: the remainder is defined for integer tensors only; use "
                "x - y * fluxion::floor(x / y) for floating-point values.");
  return detail::make_binary<ops::mod>(std::forward<A>(a), std::forward<B>(b));
}

template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto operator-(A&& a) {
  return detail::make_unary<ops::negate>(std::forward<A>(a));
}
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto operator+(A&& a) {
  return detail::as_expr<A>(std::forward<A>(a));
}
template <class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto operator!(A&& a) {
  return detail::make_unary<ops::logical_not>(std::forward<A>(a));
}

// ---- functions ---------------------------------------------------------------------------

#define FLUXION_UNARY_FUNCTION(name)                                   \
  template <class A>                                                 \
    requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>) \
  auto name(A&& a) {                                                 \
    return detail::make_unary<ops::name>(std::forward<A>(a));        \
  }
FLUXION_UNARY_FUNCTION(exp)
FLUXION_UNARY_FUNCTION(log)
FLUXION_UNARY_FUNCTION(log1p)
FLUXION_UNARY_FUNCTION(expm1)
FLUXION_UNARY_FUNCTION(sqrt)
FLUXION_UNARY_FUNCTION(rsqrt)
FLUXION_UNARY_FUNCTION(square)
FLUXION_UNARY_FUNCTION(abs)
FLUXION_UNARY_FUNCTION(sign)
FLUXION_UNARY_FUNCTION(sin)
FLUXION_UNARY_FUNCTION(cos)
FLUXION_UNARY_FUNCTION(tan)
FLUXION_UNARY_FUNCTION(tanh)
FLUXION_UNARY_FUNCTION(sigmoid)
FLUXION_UNARY_FUNCTION(relu)
FLUXION_UNARY_FUNCTION(softplus)
FLUXION_UNARY_FUNCTION(erf)
FLUXION_UNARY_FUNCTION(floor)
FLUXION_UNARY_FUNCTION(ceil)
FLUXION_UNARY_FUNCTION(round)
FLUXION_UNARY_FUNCTION(logical_not)
FLUXION_UNARY_FUNCTION(is_nan)
FLUXION_UNARY_FUNCTION(is_finite)
#undef FLUXION_UNARY_FUNCTION

#define FLUXION_BINARY_FUNCTION(name)                                        \
  template <class A, class B>                                              \
    requires detail::binary_operands<A, B>                                 \
  auto name(A&& a, B&& b) {                                                \
    return detail::make_binary<ops::name>(std::forward<A>(a), std::forward<B>(b)); \
  }
FLUXION_BINARY_FUNCTION(pow)
FLUXION_BINARY_FUNCTION(maximum)
FLUXION_BINARY_FUNCTION(minimum)
FLUXION_BINARY_FUNCTION(logical_and)
FLUXION_BINARY_FUNCTION(logical_or)
FLUXION_BINARY_FUNCTION(equal)
FLUXION_BINARY_FUNCTION(not_equal)
FLUXION_BINARY_FUNCTION(less)
FLUXION_BINARY_FUNCTION(less_equal)
FLUXION_BINARY_FUNCTION(greater)
FLUXION_BINARY_FUNCTION(greater_equal)
#undef FLUXION_BINARY_FUNCTION

/// Elementwise conversion to To.
template <class To, class A>
  requires(is_expression_v<A> || is_variable_v<std::remove_cvref_t<A>>)
auto cast(A&& a) {
  static_assert(is_element_type_v<To>, "fluxion::cast<To>: To must be float, double, int32_t, int64_t or bool.");
  return detail::make_unary<ops::cast<To>>(std::forward<A>(a));
}

/// where(c, a, b): a where c is true, b elsewhere; all three broadcast together.
template <class C, class A, class B>
  requires(operand<C> && operand<A> && operand<B> && !is_scalar_v<C>)
auto where(C&& c, A&& a, B&& b) {
  using EC = detail::expr_t<C>;
  using Like = std::conditional_t<is_scalar_v<A>, std::conditional_t<is_scalar_v<B>, EC, B>, A>;
  using EA = detail::expr_t<A, Like>;
  using EB = detail::expr_t<B, Like>;
  detail::check_not_none(c, "where");
  detail::check_not_none(a, "where");
  detail::check_not_none(b, "where");
  if constexpr (is_scalar_v<A> && is_scalar_v<B>) {
    using S = promote_t<std::remove_cvref_t<A>, std::remove_cvref_t<B>>;
    using D = device_t<EC>;
    return ternary_expr<ops::where, EC, scalar_expr<S, D>, scalar_expr<S, D>>(
        detail::as_expr<C>(std::forward<C>(c)), scalar_expr<S, D>(static_cast<S>(a)), scalar_expr<S, D>(static_cast<S>(b)));
  } else {
    return ternary_expr<ops::where, EC, EA, EB>(detail::as_expr<C>(std::forward<C>(c)),
                                                detail::as_expr<Like>(std::forward<A>(a)),
                                                detail::as_expr<Like>(std::forward<B>(b)));
  }
}

/// clip(x, lo, hi) = minimum(maximum(x, lo), hi).
template <class X, class L, class H>
  requires(operand<X> && operand<L> && operand<H> && !is_scalar_v<X>)
auto clip(X&& x, L&& lo, H&& hi) {
  return minimum(maximum(std::forward<X>(x), std::forward<L>(lo)), std::forward<H>(hi));
}

}  // namespace fluxion
