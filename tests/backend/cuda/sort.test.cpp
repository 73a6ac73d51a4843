// cumsum, cumprod, linear_recurrence, the sorts (argsort, sort, top_k), take_along_axis and the shape ops built on gather and
// remaps (reverse, tile, repeat) and norm on fx::cuda give the cpu's results: its lane loop and
// sort kernels against the cpu's, with ties, NaN, every axis and empty extents.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;
using fluxion_test::with_values;

}  // namespace

TEST_CASE_TEMPLATE("cuda cumsum: every axis and flag", T, float, double, std::int32_t) {
  const auto x = filled<T>({3, 4, 5}, 1, -9, 9);
  for (int axis = 0; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        // One lane per thread, summed in the cpu's order: the same sums exactly.
        same_on_both_devices(0.0, [&](const auto& a) { return fx::cumsum(a, axis, {.exclusive = exclusive, .reverse = reverse}); }, x);
      }
  same_on_both_devices(0.0, [](const auto& a) { return fx::cumsum(a * T(2), -1); }, x);
  same_on_both_devices(0.0, [](const auto& a) { return fx::cumsum(a, 1); }, fx::tensor<T>(fx::shape{2, 0, 3}));
}

TEST_CASE_TEMPLATE("cuda cumprod and linear_recurrence: every axis and flag", T, float, double, std::int32_t) {
  // Small integers (zeros and negatives among them): exact products and sums in every type.
  const auto x = fx::tensor<T>(fx::cast<T>(fx::round(filled<double>({3, 4, 5}, 4, -2.4, 2.4))));
  const auto b = fx::tensor<T>(fx::cast<T>(fx::round(filled<double>({3, 4, 5}, 5, -9, 9))));
  for (int axis = 0; axis < 3; ++axis)
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        CAPTURE(axis);
        CAPTURE(exclusive);
        CAPTURE(reverse);
        same_on_both_devices(0.0, [&](const auto& a) { return fx::cumprod(a, axis, {.exclusive = exclusive, .reverse = reverse}); }, x);
        same_on_both_devices(0.0, [&](const auto& a, const auto& c) {
          return fx::linear_recurrence(a, c, axis, {.exclusive = exclusive, .reverse = reverse});
        }, x, b);
      }
  same_on_both_devices(0.0, [](const auto& c) { return fx::linear_recurrence(T(2), c, -1, {.reverse = true}); }, b);
  // From an initial state (stop 63): slices, a pad and a concat around the same kernel.
  const auto h0 = fx::tensor<T>(fx::cast<T>(fx::round(filled<double>({3, 5}, 6, -9, 9))));
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true})
      same_on_both_devices(0.0, [&](const auto& a, const auto& c, const auto& h) {
        return fx::linear_recurrence(a, c, h, 1, {.exclusive = exclusive, .reverse = reverse});
      }, x, b, h0);
  same_on_both_devices(0.0, [](const auto& a) { return fx::cumprod(a, 1); }, fx::tensor<T>(fx::shape{2, 0, 3}));
}

TEST_CASE("cuda sorts: argsort, sort and top_k, with ties and NaN") {
  std::vector<float> values = fx::tensor<float>(fx::floor(filled<float>({4, 5, 6}, 2, 0, 4))).to_vector();
  values[7] = std::nanf("");
  values[40] = std::nanf("");
  values[99] = -std::numeric_limits<float>::infinity();
  const auto x = with_values<float>({4, 5, 6}, values);
  for (int axis = 0; axis < 3; ++axis)
    for (auto direction : {fx::ascending, fx::descending}) {
      CAPTURE(axis);
      same_on_both_devices([&](const auto& a) { return fx::argsort(a, axis, direction); }, x);
      same_on_both_devices([&](const auto& a) { return fx::sort(a, axis, direction); }, x);
    }
  for (fx::index_t k : {0, 1, 3, 6}) {
    CAPTURE(k);
    same_on_both_devices([&](const auto& a) { return fx::top_k(a, k).indices; }, x);
    same_on_both_devices([&](const auto& a) { return fx::top_k(a, k).values; }, x);
  }
  const auto ints = filled<std::int32_t>({3, 50}, 3, 0, 5);
  same_on_both_devices([](const auto& a) { return fx::argsort(a, -1, fx::descending); }, ints);
  const auto d = filled<double>({2, 1000}, 4);
  same_on_both_devices([](const auto& a) { return fx::top_k(a, 10).values; }, d);
}

TEST_CASE("cuda take_along_axis, reverse, tile, repeat and norm") {
  const auto x = filled<double>({3, 4, 5}, 5);
  const auto picks = with_values<std::int32_t>({3, 2, 5}, {0, 3, 3, 1, 2, 0, 1, 2, 3, 3, 3, 3, 2, 1, 0, 0, 0, 1, 1, 2,
                                                           3, 2, 1, 0, 3, 1, 1, 1, 1, 1});
  same_on_both_devices([](const auto& a, const auto& i) { return fx::take_along_axis(a, i, 1); }, x, picks);
  same_on_both_devices([](const auto& a) { return fx::reverse(a, {0, 2}); }, x);
  same_on_both_devices([](const auto& a) { return fx::tile(a, {2, 1, 3}); }, x);
  same_on_both_devices([](const auto& a) { return fx::repeat(a, 2, 2); }, x);
  same_on_both_devices([](const auto& a) { return fx::repeat(a, {0, 2, 1, 3}, 1); }, x);
  for (double ord : {1.0, 2.0, 3.0, static_cast<double>(INFINITY)}) {
    CAPTURE(ord);
    same_on_both_devices(1e-12, [&](const auto& a) { return fx::norm(a, ord, 1); }, x);
  }
}

TEST_CASE("cuda unsorted_segment_sum and unsorted_segment_mean") {
  const auto x = filled<double>({5, 3, 2}, 6);
  const auto ids = with_values<std::int32_t>({5}, {3, 0, 3, 1, 3});
  same_on_both_devices(0.0, [](const auto& a, const auto& i) { return fx::unsorted_segment_sum(a, i, 5); }, x, ids);
  same_on_both_devices(1e-15, [](const auto& a, const auto& i) { return fx::unsorted_segment_mean(a, i, 5); }, x, ids);
}

TEST_CASE("cuda gather_nd (batch_dims too), scatter_nd, tensor_scatter_nd_add and tensor_scatter_nd_update") {
  const auto x = filled<double>({3, 4, 2}, 7);
  const auto pairs = with_values<std::int32_t>({4, 2}, {2, 1, 0, 3, 2, 1, 1, 0});
  same_on_both_devices([](const auto& a, const auto& i) { return fx::gather_nd(a, i); }, x, pairs);
  // batch_dims 1 (stop 63): each of x's 3 rows gathers at its own (column, channel) pairs; the batch index is an iota.
  const auto per_row = with_values<std::int64_t>({3, 2, 2}, {3, 1, 0, 0, 1, 1, 2, 0, 0, 1, 3, 1});
  same_on_both_devices([](const auto& a, const auto& i) { return fx::gather_nd(a, i, 1); }, x, per_row);
  const auto updates = filled<double>({4, 2}, 8);
  same_on_both_devices(0.0, [](const auto& i, const auto& u) { return fx::scatter_nd(i, u, fx::shape{3, 4, 2}); }, pairs, updates);
  same_on_both_devices(0.0, [](const auto& a, const auto& i, const auto& u) { return fx::tensor_scatter_nd_add(a, i, u); }, x,
                       pairs, updates);
  // Repeated pairs: the last update wins on both devices.
  same_on_both_devices(0.0, [](const auto& a, const auto& i, const auto& u) { return fx::tensor_scatter_nd_update(a, i, u); }, x,
                       pairs, updates);
}

TEST_CASE("cuda unsorted_segment_max and unsorted_segment_min, empty segments and NaN") {
  auto x = filled<double>({6, 2, 3}, 9);
  x.mutable_data()[7] = std::numeric_limits<double>::quiet_NaN();  // row 1, in segment 0
  const auto ids = with_values<std::int32_t>({6}, {3, 0, 3, 1, 0, 3});  // segment 2 is empty
  same_on_both_devices(0.0, [](const auto& a, const auto& i) { return fx::unsorted_segment_max(a, i, 4); }, x, ids);
  same_on_both_devices(0.0, [](const auto& a, const auto& i) { return fx::unsorted_segment_min(a, i, 4); }, x, ids);
  const auto ints = with_values<std::int64_t>({4, 2}, {5, -3, 7, 2, -1, 9, 0, 0});
  same_on_both_devices(0.0, [](const auto& a, const auto& i) { return fx::unsorted_segment_max(a, i, 3); }, ints,
                       with_values<std::int64_t>({4}, {2, 2, 0, 2}));
}
