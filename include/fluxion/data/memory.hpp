// Datasets from tensors in memory and from .npy files.
//
//   auto x = fx::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {3, 2});
//   auto y = fx::tensor<std::int32_t>{0, 1, 0};
//   auto rows = fx::data::tensors(x);              // 3 elements of shape (2,), as from_tensor_slices
//   auto pairs = fx::data::tensors(x, y);          // std::tuple{(2,) float, () int32}, 3 of them
//   auto once = fx::data::from_tensors(x);         // one element: x itself, as tf's from_tensors
//   auto big = fx::data::npy<float>("x.npy");      // slices of a .npy file along axis 0
//
// tensors(...) slices each tensor along its first axis; all of them must have the same first
// extent (shape_error otherwise, naming both). Each element is a copy of its slice, so the
// source tensors may be dropped. npy<T> loads the file through fx::io::load_npy when the dataset
// is made (its errors are fluxion::io_error naming the file) and then slices it as tensors() does.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>

#include "../core/error.hpp"
#include "../io/npy.hpp"
#include "../tensor/tensor.hpp"
#include "dataset.hpp"

namespace fluxion::data {
namespace detail {

template <class T, class D>
tensor<T, D> slice_row(const tensor<T, D>& t, index_t i) {
  static_assert(std::is_same_v<D, cpu>, "fluxion::data::tensors: slices host (fluxion::cpu) tensors");
  const shape& s = t.shape();
  tensor<T, D> out{shape(s.begin() + 1, s.end())};
  const auto n = static_cast<std::size_t>(out.size());
  if (n) std::memcpy(out.mutable_data(), t.data() + static_cast<std::size_t>(i) * n, n * sizeof(T));
  return out;
}

template <class T, class D>
index_t first_extent(const tensor<T, D>& t, int position) {
  if (t.rank() == 0)
    throw shape_error("tensors: tensor " + std::to_string(position) +
                      " is a scalar (shape ()); slicing needs at least one axis (use from_tensors for one element)");
  return t.shape()[0];
}

}  // namespace detail

/// One element per slice along the first axis of each tensor (a tuple when there are several).
template <class... T, class... D>
  requires(sizeof...(T) >= 1)
auto tensors(const tensor<T, D>&... ts) {
  using element = std::conditional_t<sizeof...(T) == 1, std::tuple_element_t<0, std::tuple<tensor<T, D>...>>,
                                     std::tuple<tensor<T, D>...>>;
  int position = 0;
  const index_t extents[] = {detail::first_extent(ts, position++)...};
  for (std::size_t i = 1; i < sizeof...(T); ++i)
    if (extents[i] != extents[0]) {
      const shape shapes[] = {ts.shape()...};
      throw shape_error("tensors: the tensors must have the same first extent; tensor 0 has shape " +
                        to_string(shapes[0]) + " and tensor " + std::to_string(i) + " has shape " + to_string(shapes[i]));
    }
  const index_t count = extents[0];
  auto source = std::make_shared<const std::tuple<tensor<T, D>...>>(ts...);
  return dataset<element>(
      [source, count]() -> typename dataset<element>::next_fn {
        return [source, count, i = index_t{0}]() mutable -> std::optional<element> {
          if (i >= count) return std::nullopt;
          const index_t row = i++;
          if constexpr (sizeof...(T) == 1) return detail::slice_row(std::get<0>(*source), row);
          else return std::apply([&](const auto&... t) { return element{detail::slice_row(t, row)...}; }, *source);
        };
      },
      count);
}

/// tensors(...) under tf.data's name.
template <class... T, class... D>
auto from_tensor_slices(const tensor<T, D>&... ts) {
  return tensors(ts...);
}

/// A dataset of one element: the tensor itself (a tuple of them when there are several).
template <class... T, class... D>
  requires(sizeof...(T) >= 1)
auto from_tensors(const tensor<T, D>&... ts) {
  using element = std::conditional_t<sizeof...(T) == 1, std::tuple_element_t<0, std::tuple<tensor<T, D>...>>,
                                     std::tuple<tensor<T, D>...>>;
  element value(ts...);
  return dataset<element>(
      [value]() -> typename dataset<element>::next_fn {
        return [value, done = false]() mutable -> std::optional<element> {
          if (std::exchange(done, true)) return std::nullopt;
          return value;
        };
      },
      1);
}

/// The slices along axis 0 of a .npy file of element type T.
template <element_type T>
dataset<tensor<T>> npy(const std::string& path) {
  tensor<T> all = io::load_npy<T>(path);
  if (all.rank() == 0)
    throw io_error("npy: '" + path + "': the array is a scalar (shape ()); a dataset slices along axis 0");
  return tensors(all);
}

}  // namespace fluxion::data
