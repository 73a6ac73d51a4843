// Creating tensors: from_vector, zeros, ones, full, arange, linspace, eye and the *_like family,
// with TensorFlow's and NumPy's names and semantics.
//
//   auto t = fx::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
//   auto z = fx::zeros<float>({2, 3});           // ones, full({2, 3}, 7.f), eye<float>(3)
//   auto r = fx::arange(0.f, 1.f, 0.25f);        // [0, 0.25, 0.5, 0.75]
//   auto l = fx::linspace(0.0, 1.0, 5);          // [0, 0.25, 0.5, 0.75, 1]: the endpoint is included
//   auto o = fx::ones_like(a * b);               // a's dtype, shape and device; a * b is not computed
//
// Every function takes the device as a template argument after the element type
// (fx::zeros<float, fx::cuda>({2, 3})). Constant fills run as one fused assignment on the device;
// sequences are computed on the host in fixed-size chunks and copied to the device when it is not
// the host.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../backend/cpu/evaluator.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/config.hpp"
#include "../core/device.hpp"
#include "../core/dtype.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/layout.hpp"
#include "../expr/view.hpp"
#include "tensor.hpp"

namespace fluxion {
namespace detail {

/// Elements per task of host-side generators (sequences here, random draws in random.hpp). A
/// multiple of every per-block count of the random distributions; fixed, so that what a task
/// computes never depends on the thread count.
inline constexpr index_t generate_chunk = 16384;

/// A new tensor of shape `s` whose elements are written on the host by fill(out, begin, end), for
/// fixed chunks [begin, end) of the row-major flat range, in parallel. On a device other than
/// the host the values are staged in host memory and copied once.
template <class T, class Device, class Fill>
tensor<T, Device> generate_on_host(const shape& s, Fill&& fill) {
  tensor<T, Device> out(s);
  const index_t n = s.size();
  if (n == 0) return out;
  std::unique_ptr<T[]> staging;
  T* host;
  if constexpr (std::is_same_v<Device, cpu>) {
    host = out.mutable_data();
  } else {
    staging.reset(new T[static_cast<std::size_t>(n)]);
    host = staging.get();
  }
  const index_t tasks = (n + generate_chunk - 1) / generate_chunk;
  auto run = [&](index_t t) { fill(host, t * generate_chunk, std::min(n, (t + 1) * generate_chunk)); };
  if (tasks == 1) run(0);
  else parallel_for(tasks, run);
  if constexpr (!std::is_same_v<Device, cpu>) device_memory<Device>::to_device(out.mutable_data(), host, n);
  return out;
}

/// A tensor of shape `s` with every element `value`: one fused assignment of a constant.
template <class T, class Device>
tensor<T, Device> fill_constant(const shape& s, T value) {
  tensor<T, Device> out(s);
  evaluator<Device>::assign(out.mutable_data(), destination_layout(s), scalar_view<T>{value}, s);
  return out;
}

/// The shortest text that reads back as `v`, for error messages.
template <class T>
std::string describe_scalar(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
  } else {
    return std::to_string(v);
  }
}

template <class T>
inline constexpr bool is_numeric_element_v = is_element_type_v<T> && !std::is_same_v<T, bool>;

/// The element type arange and linspace give when none is named: the arguments' promoted type.
template <class T, class... Args>
struct sequence_type {
  using type = T;
};
template <class A, class B, class C>
struct sequence_type<void, A, B, C> {
  using type = promote_t<promote_t<A, B>, C>;
};

}  // namespace detail

// ---- from host values ------------------------------------------------------------------------

/// A tensor of shape `s` holding `values` in row-major order.
template <class T, class Device = cpu>
tensor<T, Device> from_vector(const std::vector<T>& values, const shape& s) {
  static_assert(is_element_type_v<T>,
                "fluxion::from_vector: the vector's element type must be float, double, std::int32_t, "
                "std::int64_t or bool; convert the values first.");
  if (static_cast<index_t>(values.size()) != s.size())
    throw shape_error("from_vector: " + std::to_string(values.size()) + " values cannot fill shape " + to_string(s));
  tensor<T, Device> out(s);
  if constexpr (std::is_same_v<T, bool>) {  // std::vector<bool> is packed: unpack it first
    auto tmp = std::make_unique<bool[]>(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) tmp[i] = values[i];
    detail::device_memory<Device>::to_device(out.mutable_data(), tmp.get(), s.size());
  } else {
    detail::device_memory<Device>::to_device(out.mutable_data(), values.data(), s.size());
  }
  return out;
}

/// A rank-1 tensor holding `values`.
template <class T, class Device = cpu>
tensor<T, Device> from_vector(const std::vector<T>& values) {
  return from_vector<T, Device>(values, shape{static_cast<index_t>(values.size())});
}

// ---- constants -------------------------------------------------------------------------------

template <class T, class Device = cpu>
tensor<T, Device> zeros(const shape& s) {
  return detail::fill_constant<T, Device>(s, T(0));
}

template <class T, class Device = cpu>
tensor<T, Device> ones(const shape& s) {
  return detail::fill_constant<T, Device>(s, T(1));
}

/// A tensor of shape `s` filled with `value`; the element type is value's unless named.
template <class T, class Device = cpu>
tensor<T, Device> full(const shape& s, T value) {
  static_assert(is_element_type_v<T>,
                "fluxion::full: the value's type must be float, double, std::int32_t, std::int64_t or bool; "
                "name the element type: fluxion::full<float>(shape, value).");
  return detail::fill_constant<T, Device>(s, value);
}

/// The identity matrix with `rows` rows and `cols` columns (ones on the main diagonal).
template <class T, class Device = cpu>
tensor<T, Device> eye(index_t rows, index_t cols) {
  if (rows < 0 || cols < 0)
    throw invalid_argument("eye: num_rows = " + std::to_string(rows) + " and num_columns = " + std::to_string(cols) +
                           " must be non-negative");
  return detail::generate_on_host<T, Device>(shape{rows, cols}, [cols](T* out, index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) out[i] = T(i / cols == i % cols);
  });
}

template <class T, class Device = cpu>
tensor<T, Device> eye(index_t n) {
  return eye<T, Device>(n, n);
}

// ---- the *_like family -----------------------------------------------------------------------
// Only the operand's shape is read: an expression passed here is never computed.

template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto full_like(const X& x, value_type_t<detail::expr_t<const X&>> value) {
  using E = detail::expr_t<const X&>;
  return detail::fill_constant<value_type_t<E>, device_t<E>>(detail::as_expr<const X&>(x).shape(), value);
}

template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto zeros_like(const X& x) {
  return full_like(x, value_type_t<detail::expr_t<const X&>>(0));
}

template <class X>
  requires(is_expression_v<X> || is_variable_v<std::remove_cvref_t<X>>)
auto ones_like(const X& x) {
  return full_like(x, value_type_t<detail::expr_t<const X&>>(1));
}

// ---- sequences -------------------------------------------------------------------------------

/// [start, start + step, ...) up to but excluding stop, as NumPy's arange: ceil((stop - start) /
/// step) elements, none when the range is empty. The element type is the arguments' promoted type
/// unless named (arange(5) is int32, arange(0.f, 1.f, 0.1f) float32); with a named integer type
/// the arguments are first converted to it, as tf.range does. Floating values are NumPy's, bit
/// for bit: element i is start + i * delta in the element type, delta being the rounded second
/// element minus the first.
template <class T = void, class Device = cpu, class Start, class Stop, class Step = int>
  requires(is_scalar_v<Start> && is_scalar_v<Stop> && is_scalar_v<Step>)
auto arange(Start start, Stop stop, Step step = 1) {
  using R = typename detail::sequence_type<T, Start, Stop, Step>::type;
  static_assert(detail::is_numeric_element_v<R>,
                "fluxion::arange: the element type must be float, double, std::int32_t or std::int64_t; name it "
                "explicitly: fluxion::arange<std::int64_t>(start, stop, step).");
  auto describe = [&] {
    return "start = " + detail::describe_scalar(start) + ", stop = " + detail::describe_scalar(stop) +
           ", step = " + detail::describe_scalar(step);
  };
  if constexpr (std::is_integral_v<R>) {
    // Converting a floating argument that R cannot hold would be undefined: refuse it.
    auto fits = [](auto v) {
      if constexpr (std::is_floating_point_v<decltype(v)>)
        return v >= static_cast<double>(std::numeric_limits<R>::min()) && v < -static_cast<double>(std::numeric_limits<R>::min());
      else return true;
    };
    if (!fits(start) || !fits(stop) || !fits(step))
      throw invalid_argument("arange: start, stop and step must be finite values of the element type (" + describe() + ")");
    const std::int64_t a = static_cast<R>(start), z = static_cast<R>(stop), d = static_cast<R>(step);
    if (d == 0) throw invalid_argument("arange: step must not be 0 (" + describe() + ")");
    index_t n = 0;
    if (d > 0 && z > a) n = static_cast<index_t>((static_cast<std::uint64_t>(z) - static_cast<std::uint64_t>(a) - 1) /
                                                  static_cast<std::uint64_t>(d) + 1);
    if (d < 0 && z < a) n = static_cast<index_t>((static_cast<std::uint64_t>(a) - static_cast<std::uint64_t>(z) - 1) /
                                                  (std::uint64_t{0} - static_cast<std::uint64_t>(d)) + 1);
    return detail::generate_on_host<R, Device>(shape{n}, [a, d](R* out, index_t b, index_t e) {
      for (index_t i = b; i < e; ++i) out[i] = static_cast<R>(a + i * d);
    });
  } else {
    const double a = static_cast<double>(start), z = static_cast<double>(stop), d = static_cast<double>(step);
    if (!std::isfinite(a) || !std::isfinite(z) || !std::isfinite(d))
      throw invalid_argument("arange: start, stop and step must be finite (" + describe() + ")");
    if (d == 0) throw invalid_argument("arange: step must not be 0 (" + describe() + ")");
    const double len = std::ceil((z - a) / d);
    if (len > static_cast<double>(std::int64_t{1} << 53))
      throw invalid_argument("arange: the range holds too many elements (" + describe() + ")");
    const index_t n = len > 0 ? static_cast<index_t>(len) : 0;
    // NumPy's fill rule, so values match np.arange bit for bit: the first two elements are
    // rounded from double, the rest are first + i * (second - first) in R.
    const R first = static_cast<R>(a), second = static_cast<R>(a + d), delta = second - first;
    return detail::generate_on_host<R, Device>(shape{n}, [=](R* out, index_t b, index_t e) {
      for (index_t i = b; i < e; ++i) out[i] = i == 0 ? first : i == 1 ? second : first + static_cast<R>(i) * delta;
    });
  }
}

/// [0, 1, ..., stop): arange(0, stop, 1).
template <class T = void, class Device = cpu, class Stop>
  requires is_scalar_v<Stop>
auto arange(Stop stop) {
  return arange<T, Device>(Stop(0), stop, 1);
}

/// `num` evenly spaced values from start to stop, both included (NumPy's linspace, TF's
/// linspace): element i is start + i * (stop - start) / (num - 1), computed in double, and the
/// last is exactly stop. num = 1 gives [start]; num = 0 an empty tensor. The element type is the
/// arguments' floating type, float32 when both are integers; a named integer type floors the
/// values, as NumPy does.
template <class T = void, class Device = cpu, class Start, class Stop>
  requires(is_scalar_v<Start> && is_scalar_v<Stop>)
auto linspace(Start start, Stop stop, index_t num) {
  using P = promote_t<Start, Stop>;
  using R = std::conditional_t<std::is_void_v<T>, std::conditional_t<std::is_floating_point_v<P>, P, float>, T>;
  static_assert(detail::is_numeric_element_v<R>,
                "fluxion::linspace: the element type must be float, double, std::int32_t or std::int64_t.");
  const double a = static_cast<double>(start), z = static_cast<double>(stop);
  if (num < 0)
    throw invalid_argument("linspace: num = " + std::to_string(num) + " must be non-negative (start = " +
                           detail::describe_scalar(start) + ", stop = " + detail::describe_scalar(stop) + ")");
  if (!std::isfinite(a) || !std::isfinite(z))
    throw invalid_argument("linspace: start = " + detail::describe_scalar(start) + " and stop = " +
                           detail::describe_scalar(stop) + " must be finite");
  const double div = num > 1 ? static_cast<double>(num - 1) : 1.0;
  const double delta = z - a, step = delta / div;
  return detail::generate_on_host<R, Device>(shape{num}, [=](R* out, index_t b, index_t e) {
    for (index_t i = b; i < e; ++i) {
      // NumPy's formula, including its fallback when the step underflows to 0.
      double v = step != 0 ? static_cast<double>(i) * step + a : static_cast<double>(i) / div * delta + a;
      if (num > 1 && i == num - 1) v = z;
      if constexpr (std::is_integral_v<R>) v = std::floor(v);
      out[i] = static_cast<R>(v);
    }
  });
}

}  // namespace fluxion
