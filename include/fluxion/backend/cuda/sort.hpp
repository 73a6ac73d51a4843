// The lane kernels of expr/scan.hpp and expr/sort.hpp on fx::cuda: cumsum, one thread per lane,
// and the sorts (argsort, sort, top_k) as two stable Thrust sorts over every lane at once.
//
// gather's adjoint (autodiff's scatter_add: the gradient of gather, embedding, take_along_axis,
// sort and top_k) runs here too, since stop 59: before, it went through the host.
//
// A lane is one position of every axis but the sorted one. The positions of all lanes are sorted
// by value (a stable sort, so equal values keep their order), then stably by lane, which gathers
// each lane's positions back together in value order: two device-wide radix or merge sorts
// instead of one small sort per lane. The functors are FLUXION_HOST_DEVICE, so the same code runs
// on Thrust's OpenMP system, where the tests compare it with the cpu's kernels.
#pragma once

#include <algorithm>
#include <cstdint>

#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/binary_search.h>
#include <thrust/sort.h>

#include "../../core/config.hpp"
#include "../../expr/scan.hpp"
#include "../../expr/sort.hpp"
#include "memory.hpp"

namespace fluxion::detail {

template <>
struct lane_kernel<cuda> {
  template <class F>
  static void run(index_t n, const F& f) {
    if (n > 0) thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), n, f);
  }
};

namespace cuda_sort {

/// Lane-major copies: keys[l * n + j] = element j of lane l, position[l * n + j] = l * n + j.
template <class T>
struct gather_lanes {
  const T* x;
  T* keys;
  index_t* position;
  index_t n, inner;
  FLUXION_HOST_DEVICE void operator()(index_t p) const {
    const index_t lane = p / n, j = p - lane * n, o = lane / inner, i = lane - o * inner;
    keys[p] = x[(o * n + j) * inner + i];
    position[p] = p;
  }
};

/// The lane of each sorted position: the key of the second sort.
struct lane_of {
  const index_t* position;
  index_t* lane;
  index_t n;
  FLUXION_HOST_DEVICE void operator()(index_t p) const { lane[p] = position[p] / n; }
};

/// The first k sorted positions of each lane, as indices along the axis, in the operand's layout.
struct scatter_first {
  const index_t* position;
  std::int32_t* out;
  index_t n, k, inner;
  FLUXION_HOST_DEVICE void operator()(index_t q) const {  // q over (lane, j < k)
    const index_t lane = q / k, j = q - lane * k, o = lane / inner, i = lane - o * inner;
    out[(o * k + j) * inner + i] = static_cast<std::int32_t>(position[lane * n + j] - lane * n);
  }
};

/// The scatter's keys: each index position's row, widened, and the positions themselves.
template <class I>
struct index_keys {
  const I* indices;
  index_t* keys;
  index_t* position;
  FLUXION_HOST_DEVICE void operator()(index_t k) const {
    keys[k] = static_cast<index_t>(indices[k]);
    position[k] = k;
  }
};

/// One output element (o, j, i) of gather's adjoint: the rows k of g whose index is j, in order of
/// k (the positions with key j, start[j] to start[j + 1] after a stable sort), as the cpu adds them.
template <class T>
struct scatter_rows {
  const T* g;
  const index_t* position;
  const index_t* start;
  T* out;
  index_t n_indices, extent, inner;
  FLUXION_HOST_DEVICE void operator()(index_t e) const {
    const index_t row = e / inner, i = e - row * inner, o = row / extent, j = row - o * extent;
    T sum = T(0);
    for (index_t p = start[j]; p < start[j + 1]; ++p) sum += g[(o * n_indices + position[p]) * inner + i];
    out[e] = sum;
  }
};

/// One output element (s, i) of unsorted_segment_max/min: the extreme of the rows k of data whose
/// id is s (the positions with key s, start[s] to start[s + 1]); a NaN stays.
template <class T>
struct extreme_rows {
  const T* data;
  const index_t* position;
  const index_t* start;
  T* out;
  index_t inner;
  bool is_max;
  T init;
  FLUXION_HOST_DEVICE void operator()(index_t e) const {
    const index_t s = e / inner, i = e - s * inner;
    T m = init;
    for (index_t p = start[s]; p < start[s + 1]; ++p) {
      const T v = data[position[p] * inner + i];
      if ((is_max ? v > m : v < m) || v != v) m = v;
    }
    out[e] = m;
  }
};

}  // namespace cuda_sort

/// The positions of `indices` sorted by index (stable), and where each of the rows 0 .. extent
/// begins among them (a vectorized lower_bound): the segments of gather's adjoint and of the
/// segment reductions. Positions whose index is outside [0, extent) fall outside every row.
template <class I>
void sort_by_row(const I* indices, index_t n_indices, index_t extent, index_t* keys, index_t* position, index_t* start) {
  if (n_indices > 0)
    thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), n_indices,
                       cuda_sort::index_keys<I>{indices, keys, position});
  if (n_indices > 1) thrust::stable_sort_by_key(kernel_policy(), keys, keys + n_indices, position);
  thrust::lower_bound(kernel_policy(), keys, keys + n_indices, thrust::counting_iterator<index_t>(0),
                      thrust::counting_iterator<index_t>(extent + 1), start);
}

template <>
inline constexpr bool has_segment_extreme_kernel<cuda> = true;

template <>
struct segment_extreme_kernel<cuda> {
  template <class T, class I>
  static void run(const T* data, const I* ids, T* out, index_t n_ids, index_t segments, index_t inner, bool is_max, T init) {
    const index_t total = segments * inner;
    if (total == 0) return;
    device_scratch<index_t> keys(std::max<index_t>(n_ids, 1)), position(std::max<index_t>(n_ids, 1)), start(segments + 1);
    sort_by_row(ids, n_ids, segments, keys.data(), position.data(), start.data());
    thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), total,
                       cuda_sort::extreme_rows<T>{data, position.data(), start.data(), out, inner, is_max, init});
  }
};

template <>
inline constexpr bool has_scatter_kernel<cuda> = true;

/// gather's adjoint without atomics: the index positions sorted by row (stable), each row's range
/// found by a vectorized lower_bound, then one thread per output element adds its rows in order,
/// so the result is the cpu's, bitwise, on every run.
template <>
struct scatter_kernel<cuda> {
  template <class T, class I>
  static void run(const T* g, const I* indices, T* out, index_t outer, index_t n_indices, index_t extent, index_t inner) {
    const index_t total = outer * extent * inner;
    if (total == 0) return;
    auto each = [](index_t count, const auto& f) {
      if (count > 0) thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), count, f);
    };
    device_scratch<index_t> keys(std::max<index_t>(n_indices, 1)), position(std::max<index_t>(n_indices, 1)),
        start(extent + 1);
    sort_by_row(indices, n_indices, extent, keys.data(), position.data(), start.data());
    each(total, cuda_sort::scatter_rows<T>{g, position.data(), start.data(), out, n_indices, extent, inner});
  }
};

template <>
struct sort_kernel<cuda> {
  template <class T>
  static void run(const T* x, std::int32_t* out, index_t outer, index_t n, index_t inner, index_t k, bool descending) {
    const index_t lanes = outer * inner, total = lanes * n;
    if (total == 0 || k == 0) return;
    device_scratch<T> keys(total);
    device_scratch<index_t> position(total), lane(total);
    auto each = [](index_t count, const auto& f) {
      thrust::for_each_n(kernel_policy(), thrust::counting_iterator<index_t>(0), count, f);
    };
    each(total, cuda_sort::gather_lanes<T>{x, keys.data(), position.data(), n, inner});
    thrust::stable_sort_by_key(kernel_policy(), keys.data(), keys.data() + total, position.data(),
                               sort_order<T>{descending});
    each(total, cuda_sort::lane_of{position.data(), lane.data(), n});
    thrust::stable_sort_by_key(kernel_policy(), lane.data(), lane.data() + total, position.data());
    each(lanes * k, cuda_sort::scatter_first{position.data(), out, n, k, inner});
  }
};

}  // namespace fluxion::detail
