// fx::testing::check_gradients: compares a function's gradients from the tape (and graph mode)
// with central finite differences, in double.
//
//   auto r = fx::testing::check_gradients([](const auto& x, const auto& y) { return x * fx::sin(y); },
//                                         x, y);
//   CHECK(r.ok);          // else r.report names the argument, the worst element and both values
//
// f takes tensors and returns an expression or tensor; the scalar checked is sum(f(...) * w) for
// a fixed random weight w, so every output element matters.
#pragma once

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../autodiff/functional.hpp"
#include "../autodiff/record.hpp"

namespace fluxion::testing {

struct gradient_report {
  bool ok = true;
  double worst_error = 0;  // relative to max(1, |reference|)
  std::string report;
};

struct check_options {
  double step = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-7;
  unsigned seed = 1;
};

namespace detail_check {

inline tensor<double> weights(const shape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(0.5, 1.5);
  tensor<double> w(s);
  for (index_t i = 0; i < s.size(); ++i) w.mutable_data()[i] = d(rng);
  return w;
}

template <class F, class Tuple>
double objective(const F& f, const Tuple& args, const tensor<double>& w) {
  tensor<double> y = std::apply(f, args);
  if (y.shape() != w.shape()) throw invalid_argument("check_gradients: f's output shape changed between calls");
  tensor<double> s = reduce_sum(y * w);
  return s.item();
}

}  // namespace detail_check

/// Checks d/dx_i of sum(f(x...) * w) from the tape against central differences.
template <class F, class... Args>
gradient_report check_gradients(F f, const check_options& opt, const tensor<Args>&... args) {
  static_assert((std::is_same_v<Args, double> && ...), "fluxion::testing::check_gradients works in double.");
  auto xs = std::make_tuple(args...);
  const tensor<double> probe = std::apply(f, xs);
  const tensor<double> w = detail_check::weights(probe.shape(), opt.seed);
  // Analytic gradients through the tape.
  std::vector<tensor<double>> analytic;
  {
    gradient_tape tape;
    std::apply([&](const auto&... x) { (tape.watch(x), ...); }, xs);
    tensor<double> y = std::apply(f, xs);
    tensor<double> s = reduce_sum(y * w);
    std::vector<const tensor<double>*> ptrs;
    std::apply([&](const auto&... x) { (ptrs.push_back(&x), ...); }, xs);
    analytic = tape.gradient(s, ptrs, unconnected_gradients::zero);
  }
  gradient_report r;
  std::ostringstream os;
  std::size_t arg = 0;
  auto check_one = [&](auto& x_ref, std::size_t which) {
    const tensor<double> x = x_ref;
    std::vector<double> base = x.to_vector();
    const std::vector<double> got = analytic[which].to_vector();
    if (got.size() != base.size()) {
      r.ok = false;
      os << "argument " << which << ": gradient has " << got.size() << " elements, argument " << base.size() << "\n";
      return;
    }
    double worst = 0;
    std::size_t worst_i = 0;
    double worst_ref = 0;
    for (std::size_t i = 0; i < base.size(); ++i) {
      const double h = opt.step * std::max(1.0, std::abs(base[i]));
      auto eval_at = [&](double v) {
        std::vector<double> b = base;
        b[i] = v;
        tensor<double> xi(x.shape());
        std::copy(b.begin(), b.end(), xi.mutable_data());
        auto shifted = xs;
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          ((I == which ? (void)(std::get<I>(shifted) = xi) : (void)0), ...);
        }(std::index_sequence_for<Args...>{});
        return detail_check::objective(f, shifted, w);
      };
      const double ref = (eval_at(base[i] + h) - eval_at(base[i] - h)) / (2 * h);
      const double err = std::abs(got[i] - ref) / std::max(1.0, std::abs(ref));
      const bool bad = !(std::abs(got[i] - ref) <= opt.atol + opt.rtol * std::abs(ref)) && !(err <= opt.rtol);
      if (bad || std::isnan(got[i])) r.ok = false;
      if (err > worst || std::isnan(err)) {
        worst = std::isnan(err) ? INFINITY : err;
        worst_i = i;
        worst_ref = ref;
      }
    }
    r.worst_error = std::max(r.worst_error, worst);
    if (!r.ok)
      os << "argument " << which << " of shape " << to_string(x.shape()) << ": worst element " << worst_i
         << ": tape " << (got.empty() ? 0.0 : got[worst_i]) << ", finite differences " << worst_ref
         << " (relative error " << worst << ")\n";
  };
  std::apply([&](const auto&... x) { (check_one(x, arg++), ...); }, xs);
  r.report = os.str();
  return r;
}

template <class F, class... Args>
gradient_report check_gradients(F f, const tensor<Args>&... args) {
  return check_gradients(std::move(f), check_options{}, args...);
}

}  // namespace fluxion::testing
