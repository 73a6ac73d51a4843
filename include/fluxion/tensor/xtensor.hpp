// xtensor interoperability: zero-copy views of tensors as xtensor expressions, and tensors made
// from any xtensor expression. Kept out of the umbrella header because xtensor is expensive to
// compile: include <fluxion/xtensor.hpp> where you need it.
//
//   fx::tensor<float> t = {{1.f, 2.f}, {3.f, 4.f}};
//   auto xa = fx::to_xtensor(t);                 // read-only xarray adaptor over t's buffer
//   double s = xt::sum(xa)();                    // any xtensor algorithm
//   xt::xarray<double, xt::layout_type::column_major> c = {{1, 2}, {3, 4}};
//   auto back = fx::from_xtensor(c);             // tensor<double>, row-major: 1 2 3 4
//   auto lazy = fx::from_xtensor(xa * 2.f + 1.f); // xtensor expressions are evaluated on copy
//
// The adaptor holds a copy of the tensor handle, so it keeps the storage alive on its own, and
// it cannot write: tensors are immutable.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include <xtensor/xadapt.hpp>
#include <xtensor/xexpression.hpp>
#include <xtensor/xlayout.hpp>

#include "../core/device.hpp"
#include "../core/dtype.hpp"
#include "../core/shape.hpp"
#include "../expr/evaluate.hpp"
#include "../expr/forward.hpp"
#include "tensor.hpp"

namespace fluxion {

namespace detail {

/// What an adaptor owns: a copy of the tensor handle. xtensor stores the owner of an adapted
/// smart pointer only when the owner type has a call operator (it takes it for a deleter; any
/// other type is taken for an allocator and dropped), hence the empty one.
template <class T>
struct xtensor_storage_owner {
  tensor<T, cpu> handle;
  void operator()() const noexcept {}
};

}  // namespace detail

/// A zero-copy, read-only xt::xarray_adaptor over the tensor's row-major buffer. It owns a copy
/// of the tensor handle: it stays valid after `t` is gone.
template <class T>
auto to_xtensor(const tensor<T, cpu>& t) {
  std::vector<std::size_t> extents(t.shape().begin(), t.shape().end());
  return xt::adapt_smart_ptr<xt::layout_type::row_major>(t.data(), extents, detail::xtensor_storage_owner<T>{t});
}

/// Materializes the expression, then adapts the result (still no copy of the result).
template <expression E>
  requires(!is_tensor_v<std::remove_cvref_t<E>>)
auto to_xtensor(const E& e) {
  static_assert(std::is_same_v<device_t<E>, cpu>,
                "fluxion::to_xtensor: the expression lives on the GPU; copy it to the host with "
                "fluxion::to<fluxion::cpu>(x) first.");
  return to_xtensor(tensor<value_type_t<E>, cpu>(eval(e)));
}

template <class T>
auto to_xtensor(const tensor<T, cuda>&) {
  static_assert(sizeof(T) == 0,
                "fluxion::to_xtensor: the tensor lives on the GPU; copy it to the host with "
                "fluxion::to<fluxion::cpu>(x) first.");
}

namespace detail {

/// Whether `e` is laid out in memory exactly as a row-major tensor of its shape would be.
template <class E>
bool is_row_major_contiguous(const E& e) {
  if constexpr (xt::has_data_interface<E>::value) {
    const auto& sh = e.shape();
    const auto& st = e.strides();
    std::ptrdiff_t expected = 1;
    for (std::size_t d = sh.size(); d-- > 0;) {
      if (sh[d] != 1 && static_cast<std::ptrdiff_t>(st[d]) != expected) return false;
      expected *= static_cast<std::ptrdiff_t>(sh[d]);
    }
    return true;
  } else {
    return false;
  }
}

}  // namespace detail

/// A new tensor holding the values of any xtensor expression (containers, views, lazy
/// expressions), in row-major order whatever the source's layout. The element type is the
/// expression's value type; Device = cuda copies the values to the GPU.
template <class Device = cpu, class E>
auto from_xtensor(const xt::xexpression<E>& expr) {
  const E& e = expr.derived_cast();
  using T = std::remove_cv_t<typename E::value_type>;
  static_assert(is_element_type_v<T>,
                "fluxion::from_xtensor: the expression's value type must be float, double, std::int32_t, "
                "std::int64_t or bool; convert it with xt::cast<T>(e) first.");
  shape s;
  for (auto d : e.shape()) s.push_back(static_cast<index_t>(d));
  const index_t n = s.size();
  tensor<T, Device> out(s);
  if (n == 0) return out;
  const bool device_is_host = std::is_same_v<Device, cpu>;
  std::unique_ptr<T[]> staging(device_is_host ? nullptr : new T[static_cast<std::size_t>(n)]);
  T* host = device_is_host ? out.mutable_data() : staging.get();
  if (detail::is_row_major_contiguous(e)) {
    if constexpr (xt::has_data_interface<E>::value)
      std::memcpy(static_cast<void*>(host), e.data() + e.data_offset(), static_cast<std::size_t>(n) * sizeof(T));
  } else {
    std::copy(e.template cbegin<xt::layout_type::row_major>(), e.template cend<xt::layout_type::row_major>(), host);
  }
  if constexpr (!std::is_same_v<Device, cpu>) detail::device_memory<Device>::to_device(out.mutable_data(), host, n);
  return out;
}

}  // namespace fluxion
