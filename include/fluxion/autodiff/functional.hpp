// Functional transforms with the names of TensorFlow's eager API, and graph mode.
//
//   auto grad = fx::gradients_function([](const auto& x) { return x * x; });
//   grad(3.f)[0];                                   // 6
//   auto gradgrad = fx::gradients_function([&](const auto& x) { return grad(x)[0]; });
//   gradgrad(3.f)[0];                               // 2
//   auto step = fx::implicit_gradients(loss);       // gradients w.r.t. the variables loss reads
//   auto dfdx = fx::grad([](const auto& x) { return fx::reduce_sum(x * x); });  // graph mode
//
// gradients_function and friends run f under a fresh tape. fx::grad needs no tape to
// differentiate: when f's result is a single expression of x (reductions included), its
// derivative is generated from the expression's type and evaluated directly. Through elementwise
// ops, reduce_sum and reduce_mean it allocates only the gradient it returns (and a sum for each
// read of x that is broadcast). reduce_max and reduce_min allocate temporaries (the extremes and
// how many elements tie for each), reduce_prod the product, and the nodes that materialize the
// gradient they receive (matmul, gather, concat, pad, reshape) theirs. Where f computes part of
// its result from x into a tensor (fx::softmax, reduce_logsumexp, a layer), the result's type no
// longer says how it depends on x: a tape that watches x while f runs has recorded those steps,
// and differentiates the result instead (until stop 89 graph mode missed them: a zero or partial
// gradient, silently).
#pragma once

#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "record.hpp"

namespace fluxion {

namespace detail {

template <class X>
auto to_tensor_arg(const X& x) {
  if constexpr (std::is_arithmetic_v<X>) return tensor<X>(x);
  else if constexpr (is_tensor_v<X>) return x;
  else return materialize(x);
}

}  // namespace detail

/// Returns g(args...) -> d sum(f(args...)) / d arg, one per argument: a std::vector that unpacks,
/// `auto [dx, dy] = fx::gradients_function(f)(x, y);` (gradient_list).
template <class F>
auto gradients_function(F f) {
  return [f](const auto&... args) {
    auto xs = std::make_tuple(detail::to_tensor_arg(args)...);
    gradient_tape tape;
    std::apply([&](const auto&... x) { (tape.watch(x), ...); }, xs);
    auto y = detail::materialize(std::apply(f, xs));
    return std::apply(
        [&](const auto&... x) {
          using T = value_type_t<std::tuple_element_t<0, decltype(xs)>>;
          using D = device_t<std::tuple_element_t<0, decltype(xs)>>;
          std::vector<tensor<T, D>> p{x...};
          std::vector<const tensor<T, D>*> ptrs;
          for (auto& t : p) ptrs.push_back(&t);
          return gradient_list<tensor<T, D>, sizeof...(x)>(tape.gradient(y, ptrs, unconnected_gradients::zero));
        },
        xs);
  };
}

/// Like gradients_function, returning {f(args...), gradients}: `auto [y, grads] = ...`.
template <class F>
auto value_and_gradients_function(F f) {
  return [f](const auto&... args) {
    auto xs = std::make_tuple(detail::to_tensor_arg(args)...);
    gradient_tape tape;
    std::apply([&](const auto&... x) { (tape.watch(x), ...); }, xs);
    auto y = detail::materialize(std::apply(f, xs));
    using T = value_type_t<std::tuple_element_t<0, decltype(xs)>>;
    using D = device_t<std::tuple_element_t<0, decltype(xs)>>;
    std::vector<const tensor<T, D>*> ptrs;
    std::apply([&](const auto&... x) { (ptrs.push_back(&x), ...); }, xs);
    auto grads = gradient_list<tensor<T, D>, sizeof...(args)>(tape.gradient(y, ptrs, unconnected_gradients::zero));
    return std::pair{y, std::move(grads)};
  };
}

/// A gradient paired with the variable it belongs to.
template <class T, class D>
struct variable_gradient {
  tensor<T, D> gradient;
  variable<T, D>* var;
};

/// Returns g(args...) -> std::vector of {gradient, variable*} for every trainable variable f
/// reads, in the order they were first read.
template <class F>
auto implicit_value_and_gradients(F f) {
  return [f](const auto&... args) {
    gradient_tape tape;
    auto y = detail::materialize(f(args...));
    using T = value_type_t<decltype(y)>;
    using D = device_t<decltype(y)>;
    auto vars = tape.variables_read<T, D>();
    std::vector<variable_gradient<T, D>> out;
    if (vars.empty()) return std::pair{y, out};
    auto grads = tape.gradient(y, vars, unconnected_gradients::zero);
    for (std::size_t i = 0; i < vars.size(); ++i)
      out.push_back({std::move(grads[i]), const_cast<variable<T, D>*>(vars[i])});
    return std::pair{y, out};
  };
}

template <class F>
auto implicit_gradients(F f) {
  return [g = implicit_value_and_gradients(std::move(f))](const auto&... args) { return g(args...).second; };
}

namespace autodiff {

/// Graph mode's sink: accumulates the gradient of one tensor in place.
template <class T, class D>
struct single_leaf_sink {
  static constexpr bool fuses_reductions = true;  // allocate as little as possible (backprop.hpp)
  std::uint64_t id;
  shape s;
  tensor<T, D> out;
  bool has = false;

  bool wants(std::uint64_t tensor_id) const { return tensor_id == id; }

  template <class U, class D2, class G>
  void leaf(const tensor<U, D2>& t, const G& g) {
    if constexpr (std::is_same_v<U, T> && std::is_same_v<D2, D>) {
      if (t.id() != id) return;
      if constexpr (!std::is_same_v<value_type_t<G>, T>) {
        leaf(t, cast<T>(g));
      } else if (g.shape() != s) {
        add(reduce_to(g, s));
      } else {
        add(g);
      }
    }
  }
  template <class G>
  void add(const G& g) {
    if (!has) {
      out = tensor<T, D>(g);
      has = true;
    } else {  // in place: the accumulator is private until returned
      detail::assign_into(out, 0, contiguous_strides(s).data(), out + g);
    }
  }
};

}  // namespace autodiff

/// Graph mode: grad(f)(x) = d sum(f(x)) / dx, derived from the type of f's result expression.
template <class F>
auto grad(F f) {
  return [f](const auto& arg) {
    auto x = detail::to_tensor_arg(arg);
    using T = value_type_t<decltype(x)>;
    using D = device_t<decltype(x)>;
    // Sees what f computes from x into tensors, if anything (see the top of this file); records
    // nothing otherwise.
    gradient_tape tape;
    tape.watch(x);
    const auto e = f(x);
    using E = std::remove_cvref_t<decltype(e)>;
    if constexpr (std::is_same_v<value_type_t<E>, T> && std::is_same_v<device_t<E>, D>) {
      if (tape.entries() > 0) return tensor<T, D>(tape.gradient(e, x, unconnected_gradients::zero));
    } else {
      if (tape.entries() > 0)
        throw std::invalid_argument("grad: f's result is of another element type or device than its argument, and "
                                    "f computes part of it into tensors: only a tape (fx::gradients_function) can "
                                    "differentiate it");
    }
    gradient_tape::stop_recording_scope quiet(tape);  // graph mode's own statements
    autodiff::single_leaf_sink<T, D> sink{x.id(), x.shape(), {}, false};
    const auto seed = broadcast_to(scalar_expr<value_type_t<E>, D>(value_type_t<E>(1)), e.shape());
    if constexpr (is_tensor_v<E>) {
      if (e.id() == x.id()) sink.add(seed);
    } else {
      autodiff::backward<E>::run(e, seed, sink);
    }
    if (!sink.has) return tensor<T, D>(broadcast_to(scalar_expr<T, D>(T(0)), x.shape()));
    return sink.out;
  };
}

/// Graph mode with the value: {f(x), grad(f)(x)}.
template <class F>
auto value_and_grad(F f) {
  return [f, g = grad(f)](const auto& arg) {
    auto x = detail::to_tensor_arg(arg);
    return std::pair{detail::materialize(f(x)), g(x)};
  };
}

}  // namespace fluxion
