// fx::custom_gradient: a function with a hand-written backward pass.
//
//   auto log1pexp = fx::custom_gradient([](const auto& x) {
//     auto e = fx::exp(x);
//     return std::pair{fx::log(1 + e), [e](const auto& dy) { return dy * (1 - 1 / (1 + e)); }};
//   });
//   fx::tensor<float> y = log1pexp(x);    // under a tape, d y / d x = 1 at x = 100, not NaN
//
// The wrapped function runs with every tape paused, so only its value is kept; each tape that
// tracks an argument records one entry whose backward calls the user's function. The user's
// backward is built from ordinary differentiable ops, so an outer tape records it too, and
// nested tapes give higher derivatives of custom functions. Arguments may be tensors or
// variables (read as their value; trainable variables are watched as usual). With several
// arguments, the backward function returns a std::tuple (or std::pair) of gradients.
//
// fx::stop_gradient(x) (below) is x as a constant to every tape and accumulator.
//
// Forward accumulators are not paused: forward mode (fx::jvp, fx::forward_accumulator)
// differentiates the wrapped function's own computation with the ordinary rules; the
// hand-written backward serves reverse mode only.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "record.hpp"

namespace fluxion {

namespace detail {

template <class X>
decltype(auto) as_tensor_arg(const X& x) {
  if constexpr (is_variable_v<X>) return x.read_value();
  else if constexpr (is_tensor_v<X>) return x;
  else return materialize(x);
}

template <class T>
struct is_tuple_like : std::false_type {};
template <class... A>
struct is_tuple_like<std::tuple<A...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};

}  // namespace detail

template <class F>
class custom_gradient_function {
 public:
  explicit custom_gradient_function(F f) : m_f(std::move(f)) {}

  template <class... Args>
  auto operator()(const Args&... args) const {
    return call(detail::as_tensor_arg(args)...);
  }

 private:
  template <class... Ts>
  auto call(const Ts&... xs) const {
    // Run the user's function with every tape paused (accumulators still see it: see above).
    auto [y, back] = [&] {
      detail::all_tapes_paused quiet;
      auto [value, b] = m_f(xs...);
      auto out = detail::materialize(value);
      // A function that returns an argument unchanged (an identity with a clipped gradient), or
      // another tensor a tape already tracks, would give the tapes a tensor they know: they would
      // skip this function's entry and differentiate around the hand-written backward, silently.
      // A copy gives the output an id of its own (forward accumulators see it as x * 1).
      bool known = ((out.id() == xs.id()) || ...);
      for (gradient_tape* tape : detail::tape_stack::tapes) known = known || tape->tracks(out.id());
      if (known) out = detail::materialize(out * value_type_t<decltype(out)>(1));
      return std::pair{std::move(out), std::move(b)};
    }();
    using Y = decltype(y);
    using T = value_type_t<Y>;
    using D = device_t<Y>;
    for (gradient_tape* tape : detail::tape_stack::tapes) {
      if (!tape->recording()) continue;
      if (!(tape->tracks(xs.id()) || ...)) continue;
      const std::uint64_t out_id = y.id();
      tape->record(out_id, [back = back, tape, out_id, xs...](autodiff::gradient_store& store) {
        const tensor<T, D>* g = store.find<T, D>(out_id);
        if (!g) return;
        const tensor<T, D> dy = *g;
        autodiff::tape_sink sink{*tape, store};
        auto grads = back(dy);
        if constexpr (sizeof...(Ts) == 1 && !detail::is_tuple_like<decltype(grads)>::value) {
          (push(sink, xs, grads), ...);
        } else {
          using G = decltype(grads);
          constexpr bool one_each = [] {
            if constexpr (requires { std::tuple_size<G>::value; }) return std::tuple_size_v<G> == sizeof...(Ts);
            else return false;
          }();
          static_assert(one_each,
                        "fluxion::custom_gradient: the backward function must return one gradient per argument.");
          if constexpr (one_each) push_all(sink, grads, std::index_sequence_for<Ts...>{}, xs...);  // else: no other error
        }
      });
    }
    return y;
  }

  template <class Sink, class X, class G>
  static void push(Sink& sink, const X& x, const G& g) {
    if constexpr (is_expression_v<G>) {
      // The gradient may have the argument's shape, or broadcast with it (summed or spread by sink.leaf).
      const auto joint = try_broadcast_shapes(g.shape(), x.shape());
      if (!joint || (*joint != g.shape() && *joint != x.shape()))
        throw shape_error("custom_gradient: the gradient's shape " + to_string(g.shape()) +
                          " does not match its argument's shape " + to_string(x.shape()));
      sink.leaf(x, g);
    }
  }
  template <class Sink, class Tuple, std::size_t... I, class... Ts>
  static void push_all(Sink& sink, const Tuple& grads, std::index_sequence<I...>, const Ts&... xs) {
    (push(sink, xs, std::get<I>(grads)), ...);
  }

  F m_f;
};

/// x's value as a constant to every tape and forward accumulator (TensorFlow's tf.stop_gradient,
/// PyTorch's detach): the result shares x's storage under a new id that nothing tracks, so no
/// gradient flows back through it, at any order, and its tangent is zero. An expression is
/// computed first, unrecorded. For a variable, its current value.
template <class X>
  requires(is_expression_v<X> || is_variable_v<X>)
tensor<value_type_t<X>, device_t<X>> stop_gradient(const X& x) {
  using T = value_type_t<X>;
  using D = device_t<X>;
  detail::check_not_none(x, "stop_gradient");
  tensor<T, D> value;
  if constexpr (is_variable_v<X>) value = x.peek();
  else value = detail::materialize_unrecorded(x);
  return tensor<T, D>(value, value.shape(), ::fluxion::detail::same_buffer);
}

/// Wraps f(x...) -> std::pair{value, backward} so that tapes use `backward(dy)` for its gradient.
template <class F>
custom_gradient_function<F> custom_gradient(F f) {
  return custom_gradient_function<F>(std::move(f));
}

}  // namespace fluxion
