// The gradient tape on fx::cuda: the backward statements run on the device and give the cpu's
// gradients, through fused elementwise ops, broadcasting, reductions, matmul, gather and fx::linalg.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::check_values;
using fluxion_test::filled;
using fluxion_test::with_values;

/// Gradients of a small regression loss with respect to w and b, computed on Device.
template <class Device>
std::vector<std::vector<double>> regression_gradients(const fx::tensor<double>& x, const fx::tensor<double>& t,
                                                      const fx::tensor<double>& w0, const fx::tensor<double>& b0) {
  fx::tensor<double, Device> xd = fx::to<Device>(x), td = fx::to<Device>(t);
  fx::variable<double, Device> w(fx::to<Device>(w0), "w"), b(fx::to<Device>(b0), "b");
  fx::gradient_tape tape(fx::persistent);
  fx::tensor<double, Device> loss = fx::reduce_mean(fx::square(fx::tanh(fx::matmul(xd, w) + b) - td));
  return {tape.gradient(loss, w).to_vector(), tape.gradient(loss, b).to_vector(), loss.to_vector()};
}

/// Gradient of sum(gather(p, indices) * weights) with respect to p: rows gathered twice add up.
template <class Device>
std::vector<float> gather_gradient(const fx::tensor<float>& p, const fx::tensor<std::int64_t>& indices,
                                   const fx::tensor<float>& weights) {
  fx::tensor<float, Device> pd = fx::to<Device>(p), wd = fx::to<Device>(weights);
  fx::gradient_tape tape;
  tape.watch(pd);
  fx::tensor<float, Device> y = fx::reduce_sum(fx::gather(pd, fx::to<Device>(indices), 0) * wd);
  return tape.gradient(y, pd).to_vector();
}


/// Gradient of a loss through cumsum, sort, top_k, tile and norm with respect to x, computed on Device.
template <class Device>
std::vector<double> ordering_gradient(const fx::tensor<double>& x) {
  fx::tensor<double, Device> xd = fx::to<Device>(x);
  fx::gradient_tape tape;
  tape.watch(xd);
  fx::tensor<double, Device> c = fx::cumsum(fx::sin(xd), 1, {.reverse = true});
  fx::tensor<double, Device> s = fx::sort(c * xd, 0, fx::descending);
  fx::tensor<double, Device> t = fx::top_k(fx::tile(s, {1, 2}), 3).values;
  fx::tensor<double, Device> y = fx::reduce_sum(t * t) + fx::reduce_sum(fx::norm(xd, 2, 1));
  return tape.gradient(y, xd).to_vector();
}

/// Gradients of a loss through cumprod (with a zero in x) and linear_recurrence with respect to
/// x and the coefficients a, computed on Device.
template <class Device>
std::vector<double> recurrence_gradient(const fx::tensor<double>& x, const fx::tensor<double>& a) {
  fx::tensor<double, Device> xd = fx::to<Device>(x), ad = fx::to<Device>(a);
  fx::gradient_tape tape(fx::persistent);
  tape.watch(xd);
  tape.watch(ad);
  fx::tensor<double, Device> p = fx::cumprod(xd, 1, {.exclusive = true});
  fx::tensor<double, Device> h = fx::linear_recurrence(ad, p * xd, 0, {.reverse = true});
  fx::tensor<double, Device> y = fx::reduce_sum(h * h);
  std::vector<double> g = tape.gradient(y, xd).to_vector(), ga = tape.gradient(y, ad).to_vector();
  g.insert(g.end(), ga.begin(), ga.end());
  return g;
}

/// fx::linalg's ops on Device: the values of band_part, diag_part, trace, diag, set_diag and
/// l2_normalize of x, then
/// the gradient with respect to x and d of a loss that reads them all.
template <class Device>
std::vector<double> linalg_values_and_gradient(const fx::tensor<double>& x, const fx::tensor<double>& d) {
  fx::tensor<double, Device> xd = fx::to<Device>(x), dd = fx::to<Device>(d);
  fx::gradient_tape tape(fx::persistent);
  tape.watch(xd);
  tape.watch(dd);
  const fx::tensor<double, Device> band = fx::linalg::band_part(xd, 1, 0), diagonal = fx::linalg::diag_part(xd);
  const fx::tensor<double, Device> trace = fx::linalg::trace(xd * xd), square = fx::linalg::diag(dd);
  const fx::tensor<double, Device> replaced = fx::linalg::set_diag(xd, fx::sin(dd));
  const fx::tensor<double, Device> unit = fx::linalg::l2_normalize(xd);
  fx::tensor<double, Device> y = fx::reduce_sum(band * replaced) + fx::reduce_sum(trace) +
                                 fx::reduce_sum(diagonal * dd) + fx::reduce_sum(fx::square(square)) +
                                 fx::reduce_sum(unit * xd);
  std::vector<double> out;
  for (const auto& t : {band, diagonal, trace, square, replaced, unit, tape.gradient(y, xd), tape.gradient(y, dd)}) {
    const auto v = t.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

/// The gradient of a loss through gather_nd, scatter_nd and a gather whose output is squared, with
/// respect to x, computed on Device. (Second order: autodiff.rules_second_order, on the cpu; these
/// suites are built at derivative order 1.)
template <class Device>
std::vector<double> nd_gradient(const fx::tensor<double>& x) {
  fx::tensor<double, Device> xd = fx::to<Device>(x);
  const auto pairs = fx::to<Device>(fx::tensor<std::int32_t>{{2, 1}, {0, 3}, {2, 1}});
  fx::gradient_tape tape;
  tape.watch(xd);
  fx::tensor<double, Device> picked = fx::gather_nd(xd, pairs);
  fx::tensor<double, Device> grid = fx::scatter_nd(pairs, fx::square(picked), fx::shape{3, 4});
  fx::tensor<double, Device> y = fx::reduce_sum(fx::square(fx::gather(grid, fx::to<Device>(fx::tensor<std::int64_t>{2, 2, 0}), 0)));
  return tape.gradient(y, xd).to_vector();
}
}  // namespace

TEST_CASE("cuda autodiff: through gather_nd, scatter_nd, gather and segment max, the cpu's gradient") {
  const auto x = filled<double>({3, 4}, 9);
  check_values(nd_gradient<fx::cuda>(x), nd_gradient<fx::cpu>(x), 1e-12);
  // unsorted_segment_max with a tie: the gradient split between the two maxima.
  auto segment_gradient = [](auto device) {
    using D = decltype(device);
    fx::tensor<double, D> v = fx::to<D>(fx::tensor<double>{3.0, 1.0, 3.0, 2.0, 7.0});
    fx::gradient_tape tape;
    tape.watch(v);
    fx::tensor<double, D> m = fx::unsorted_segment_max(v, fx::to<D>(fx::tensor<std::int32_t>{0, 0, 0, 1, 2}), 3);
    return tape.gradient(fx::reduce_sum(m * fx::to<D>(fx::tensor<double>{1.0, 2.0, 3.0})), v).to_vector();
  };
  CHECK(segment_gradient(fx::cuda{}) == std::vector<double>{0.5, 0.0, 0.5, 2.0, 3.0});
  CHECK(segment_gradient(fx::cpu{}) == std::vector<double>{0.5, 0.0, 0.5, 2.0, 3.0});
}

TEST_CASE("cuda autodiff: the gradient of sum(sin(x) * x) is cos(x) x + sin(x)") {
  auto x = filled<double>({5, 7}, 1);
  fx::tensor<double, fx::cuda> g = fx::to<fx::cuda>(x);
  fx::gradient_tape tape;
  tape.watch(g);
  fx::tensor<double, fx::cuda> y = fx::reduce_sum(fx::sin(g) * g);
  const auto dx = tape.gradient(y, g);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(dx)>, fx::tensor<double, fx::cuda>>);
  std::vector<double> want;
  for (double v : x.to_vector()) want.push_back(std::cos(v) * v + std::sin(v));
  check_values(dx.to_vector(), want, 1e-12);
}

TEST_CASE("cuda autodiff: a regression loss through matmul, broadcasting and a mean") {
  auto x = filled<double>({16, 5}, 1), t = filled<double>({16, 3}, 2, -1, 1);
  auto w = filled<double>({5, 3}, 3, -0.5, 0.5), b = filled<double>({3}, 4, -0.5, 0.5);
  const auto want = regression_gradients<fx::cpu>(x, t, w, b);
  const auto got = regression_gradients<fx::cuda>(x, t, w, b);
  REQUIRE(got.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) check_values(got[i], want[i], 1e-12);
}

TEST_CASE("cuda autodiff: gather's gradient scatters back, adding repeated rows") {
  auto p = filled<float>({5, 3}, 1);
  auto indices = with_values<std::int64_t>({4}, {3, 0, 3, 1});
  auto weights = filled<float>({4, 3}, 2);
  const auto got = gather_gradient<fx::cuda>(p, indices, weights);
  check_values(got, gather_gradient<fx::cpu>(p, indices, weights), 1e-6);
  const auto w = weights.to_vector();
  for (int j = 0; j < 3; ++j) {
    CHECK(got[static_cast<std::size_t>(3 * 3 + j)] == doctest::Approx(w[static_cast<std::size_t>(j)] + w[static_cast<std::size_t>(6 + j)]));
    CHECK(got[static_cast<std::size_t>(2 * 3 + j)] == 0.f);  // row 2 was never read
  }
}

TEST_CASE("cuda autodiff: through cumsum, sort, top_k, tile and norm, the cpu's gradient") {
  const auto x = filled<double>({5, 4}, 7);
  check_values(ordering_gradient<fx::cuda>(x), ordering_gradient<fx::cpu>(x), 1e-12);
}

TEST_CASE("cuda autodiff: through cumprod and linear_recurrence, the cpu's gradient") {
  auto x = filled<double>({4, 5}, 8);
  x.mutable_data()[6] = 0.0;
  const auto a = filled<double>({4, 5}, 9, -1, 1);
  check_values(recurrence_gradient<fx::cuda>(x, a), recurrence_gradient<fx::cpu>(x, a), 1e-12);
}

TEST_CASE("cuda autodiff: fx::linalg's band_part, diag_part, trace, diag and set_diag and their gradients, the cpu's") {
  const auto x = filled<double>({2, 3, 4}, 10), d = filled<double>({2, 3}, 11);
  check_values(linalg_values_and_gradient<fx::cuda>(x, d), linalg_values_and_gradient<fx::cpu>(x, d), 1e-12);
}

TEST_CASE("cuda autodiff: gather's adjoint runs on the device, bitwise the cpu's, along any axis") {
  static_assert(fx::detail::has_scatter_kernel<fx::cuda>);
  // Along axis 1 of a rank-3 operand, 2-D indices with repeats and rows never read, and no indices.
  auto p = filled<double>({3, 6, 4}, 3);
  for (const auto& idx : {with_values<std::int32_t>({2, 3}, {5, 0, 5, 2, 5, 0}), with_values<std::int32_t>({0}, {})}) {
    auto gradient = [&](auto device) {
      using D = decltype(device);
      fx::tensor<double, D> pd = fx::to<D>(p);
      fx::gradient_tape tape;
      tape.watch(pd);
      fx::tensor<double, D> y = fx::reduce_sum(fx::square(fx::gather(pd, fx::to<D>(idx), 1)));
      return tape.gradient(y, pd).to_vector();
    };
    const auto on_cpu = gradient(fx::cpu{});
    CHECK(gradient(fx::cuda{}) == on_cpu);  // the same additions in the same order
  }
}
