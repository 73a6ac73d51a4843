// fx::testing::check_gradients: compares a function's derivatives with central finite
// differences, in double, in both modes of automatic differentiation:
//
//   auto r = fx::testing::check_gradients([](const auto& x, const auto& y) { return x * fx::sin(y); },
//                                         x, y);
//   CHECK_MESSAGE(r.ok, r.report);   // else r.report names the mode, the argument, the worst
//                                    // element and both values
//
// f takes tensors and returns an expression or tensor.
//   reverse mode: the gradient tape's d/dx_i of sum(f(x...) * w), for a fixed random weight w (so
//                 every output element matters), against central differences of that sum, one
//                 element of x_i at a time;
//   forward mode: for each argument, the tangent of f(x...) that a fx::forward_accumulator computes
//                 along a random direction v_i, element by element (and its shape), against
//                 (f(.., x_i + h v_i, ..) - f(.., x_i - h v_i, ..)) / 2h.
// Graph mode (fx::grad) is not checked here: it shares the rule table and backward<E> with the
// tape but has a sink of its own (autodiff/functional.hpp), tested in tests/autodiff/functional.
//
// fx::testing::check_second_order (FLUXION_MAX_DERIVATIVE_ORDER >= 2) checks Hessian-vector
// products: with g(x) the tape gradient above and a random direction v over all arguments, the
// gradient of sum_i <g_i(x), v_i> from an outer tape (reverse over reverse) and the tangent of g
// along v from a forward accumulator (forward over reverse) against (g(x + hv) - g(x - hv)) / 2h.
//
// The forward-mode checks need FLUXION_FORWARD_MODE (core/config.hpp): this header turns it on when
// it comes first. If fluxion was included before with forward mode off, a check that asks for
// forward mode (the default) fails and says so, rather than checking less than it was asked to.
#pragma once

#ifndef FLUXION_FORWARD_MODE
#define FLUXION_FORWARD_MODE 1
#endif

#include <algorithm>
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
  double step = 1e-6;  // relative to max(1, |x|)
  double rtol = 1e-6;
  double atol = 1e-7;
  unsigned seed = 1;
  bool reverse = true;  // check the tape's gradients
  bool forward = true;  // check forward-mode tangents
};

namespace detail_check {

/// forward_accumulator, named through F so that a check compiled with forward mode off does not
/// instantiate the stand-in's error in the discarded branch.
template <class F>
struct accumulator_of {
  using type = forward_accumulator;
};

inline void forward_mode_missing(gradient_report& r, std::ostream& os) {
  r.ok = false;
  os << "forward mode: not checked, it is compiled out (FLUXION_FORWARD_MODE is 0); include "
        "<fluxion/testing/check_gradients.hpp> first, define FLUXION_FORWARD_MODE to 1, or set "
        "check_options::forward to false\n";
}

inline tensor<double> uniform(const shape& s, unsigned seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  tensor<double> w(s);
  for (index_t i = 0; i < s.size(); ++i) w.mutable_data()[i] = d(rng);
  return w;
}
inline tensor<double> weights(const shape& s, unsigned seed) { return uniform(s, seed, 0.5, 1.5); }
/// A direction for argument `which`: entries in [-1, -0.25] and [0.25, 1], none negligible.
inline tensor<double> direction(const shape& s, unsigned seed, std::size_t which) {
  tensor<double> v = uniform(s, seed * 7919u + 101u * static_cast<unsigned>(which) + 13u, -0.75, 0.75);
  for (index_t i = 0; i < s.size(); ++i) {
    double& e = v.mutable_data()[i];
    e = e < 0 ? e - 0.25 : e + 0.25;
  }
  return v;
}

inline double max_abs(const tensor<double>& t) {
  double m = 0;
  for (double e : t.to_vector()) m = std::max(m, std::abs(e));
  return m;
}

/// args with argument `which` replaced by `x`.
template <class Tuple>
Tuple replaced(const Tuple& args, std::size_t which, const tensor<double>& x) {
  Tuple out = args;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((I == which ? (void)(std::get<I>(out) = x) : (void)0), ...);
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
  return out;
}

template <class F, class Tuple>
tensor<double> value(const F& f, const Tuple& args) {
  return std::apply(f, args);
}

template <class F, class Tuple>
double objective(const F& f, const Tuple& args, const tensor<double>& w) {
  tensor<double> y = value(f, args);
  if (y.shape() != w.shape()) throw invalid_argument("check_gradients: f's output shape changed between calls");
  tensor<double> s = reduce_sum(y * w);
  return s.item();
}

template <class Tuple>
std::vector<const tensor<double>*> pointers(const Tuple& args) {
  std::vector<const tensor<double>*> p;
  std::apply([&](const auto&... x) { (p.push_back(&x), ...); }, args);
  return p;
}

/// The tape's gradients of sum(f(args...) * w) with respect to every argument.
template <class F, class Tuple>
std::vector<tensor<double>> tape_gradients(const F& f, const Tuple& args, const tensor<double>& w) {
  gradient_tape tape;
  std::apply([&](const auto&... x) { (tape.watch(x), ...); }, args);
  tensor<double> y = value(f, args);
  tensor<double> s = reduce_sum(y * w);
  return tape.gradient(s, pointers(args), unconnected_gradients::zero);
}

/// Compares `got` with the reference `ref` element by element; on failure, a line of `os` says
/// which (`what`) and where.
inline void compare(const std::vector<double>& got, const std::vector<double>& ref, const check_options& opt,
                    const std::string& what, const char* got_name, gradient_report& r, std::ostream& os) {
  if (got.size() != ref.size()) {
    r.ok = false;
    os << what << ": " << got.size() << " elements computed, " << ref.size() << " expected\n";
    return;
  }
  bool ok = true;
  double worst = 0, worst_ref = 0;
  std::size_t worst_i = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(got[i] - ref[i]);
    const double err = diff / std::max(1.0, std::abs(ref[i]));
    const bool bad = !(diff <= opt.atol + opt.rtol * std::abs(ref[i])) && !(err <= opt.rtol);
    if (bad || std::isnan(got[i])) ok = false;
    if (err > worst || std::isnan(err)) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
      worst_ref = ref[i];
    }
  }
  r.worst_error = std::max(r.worst_error, worst);
  if (!ok) {
    r.ok = false;
    os << what << ": worst element " << worst_i << ": " << got_name << " " << (got.empty() ? 0.0 : got[worst_i])
       << ", finite differences " << worst_ref << " (relative error " << worst << ")\n";
  }
}

template <class Tuple>
std::string describe(const Tuple& args, std::size_t which) {
  std::string s;
  std::size_t i = 0;
  std::apply([&](const auto&... x) { ((i++ == which ? (void)(s = to_string(x.shape())) : (void)0), ...); }, args);
  return "argument " + std::to_string(which) + " of shape " + s;
}

}  // namespace detail_check

namespace detail_check {
template <class F, class... Args>
gradient_report first_order(F f, const check_options& opt, const tensor<Args>&... args);
}  // namespace detail_check

/// Checks the tape's gradients of sum(f(x...) * w) and forward-mode tangents of f(x...) against
/// central differences (see the top of this file).
template <class F, class... Args>
gradient_report check_gradients(F f, const check_options& opt, const tensor<Args>&... args) {
  constexpr bool in_double = (std::is_same_v<Args, double> && ...);
  static_assert(in_double, "fluxion::testing::check_gradients works in double.");
  if constexpr (in_double) return detail_check::first_order(std::move(f), opt, args...);
  else return {};  // the message above, and no other
}

namespace detail_check {
template <class F, class... Args>
gradient_report first_order(F f, const check_options& opt, const tensor<Args>&... args) {
  const auto xs = std::make_tuple(args...);
  const tensor<double> probe = value(f, xs);
  const tensor<double> w = weights(probe.shape(), opt.seed);
  gradient_report r;
  std::ostringstream os;
  std::size_t which = 0;

  // Reverse mode: the tape against differences of the objective, element by element.
  if (opt.reverse) {
    const std::vector<tensor<double>> analytic = tape_gradients(f, xs, w);
    auto check_reverse = [&](const tensor<double>& x) {
      const std::vector<double> base = x.to_vector();
      std::vector<double> ref(base.size());
      for (std::size_t i = 0; i < base.size(); ++i) {
        const double h = opt.step * std::max(1.0, std::abs(base[i]));
        auto at = [&](double v) {
          tensor<double> xi(x.shape());
          std::copy(base.begin(), base.end(), xi.mutable_data());
          xi.mutable_data()[i] = v;
          return objective(f, replaced(xs, which, xi), w);
        };
        ref[i] = (at(base[i] + h) - at(base[i] - h)) / (2 * h);
      }
      compare(analytic[which].to_vector(), ref, opt, "reverse mode, " + describe(xs, which), "tape", r, os);
      ++which;
    };
    std::apply([&](const auto&... x) { (check_reverse(x), ...); }, xs);
  }

  // Forward mode: the accumulator's tangent of f along v against differences along v.
  which = 0;
  if constexpr (!forward_mode_enabled) {
    if (opt.forward) detail_check::forward_mode_missing(r, os);
  } else {
    if (opt.forward) {
      auto check_forward = [&](const tensor<double>& x) {
        const tensor<double> v = direction(x.shape(), opt.seed, which);
        const std::string what = "forward mode, " + describe(xs, which);
        tensor<double> t;
        {
          typename detail_check::accumulator_of<F>::type acc(x, v);
          const tensor<double> y = value(f, xs);
          t = acc.jvp(y, unconnected_gradients::zero);
        }
        if (t.shape() != probe.shape()) {
          r.ok = false;
          os << what << ": the tangent has shape " << to_string(t.shape()) << ", the value "
             << to_string(probe.shape()) << "\n";
        } else {
          const double h = opt.step * std::max(1.0, max_abs(x));
          const tensor<double> xp = x + h * v, xm = x - h * v;
          const tensor<double> ref = (value(f, replaced(xs, which, xp)) - value(f, replaced(xs, which, xm))) / (2 * h);
          compare(t.to_vector(), ref.to_vector(), opt, what, "jvp", r, os);
        }
        ++which;
      };
      std::apply([&](const auto&... x) { (check_forward(x), ...); }, xs);
    }
  }
  r.report = os.str();
  return r;
}
}  // namespace detail_check

template <class F, class... Args>
gradient_report check_gradients(F f, const tensor<Args>&... args) {
  return check_gradients(std::move(f), check_options{}, args...);
}

namespace detail_check {
template <class F, class... Args>
gradient_report second_order(F f, const check_options& opt, const tensor<Args>&... args);
}  // namespace detail_check

/// Checks Hessian-vector products of sum(f(x...) * w), reverse over reverse and forward over
/// reverse, against central differences of the tape's gradients (see the top of this file).
/// Needs FLUXION_MAX_DERIVATIVE_ORDER >= 2; opt.reverse and opt.forward pick the modes.
template <class F, class... Args>
gradient_report check_second_order(F f, const check_options& opt, const tensor<Args>&... args) {
  constexpr bool in_double = (std::is_same_v<Args, double> && ...);
  static_assert(in_double, "fluxion::testing::check_second_order works in double.");
  static_assert(sizeof(F) > 0 && max_derivative_order >= 2,
                "fluxion::testing::check_second_order: define FLUXION_MAX_DERIVATIVE_ORDER to 2 or more before "
                "including fluxion.");
  if constexpr (in_double && max_derivative_order >= 2)
    return detail_check::second_order(std::move(f), opt, args...);
  else
    return {};  // the messages above, and no other
}

namespace detail_check {
template <class F, class... Args>
gradient_report second_order(F f, const check_options& opt, const tensor<Args>&... args) {
  using Tuple = std::tuple<tensor<Args>...>;
  const Tuple xs = std::make_tuple(args...);
  const tensor<double> w = weights(value(f, xs).shape(), opt.seed);
  std::vector<tensor<double>> v;
  double scale = 1;
  std::apply([&](const auto&... x) { (v.push_back(direction(x.shape(), opt.seed, v.size())), ...); }, xs);
  std::apply([&](const auto&... x) { ((scale = std::max(scale, max_abs(x))), ...); }, xs);

  // Central differences of the gradients along v, all arguments moving together.
  const double h = opt.step * scale;
  auto moved = [&](double sign) {
    Tuple out = xs;
    std::size_t i = 0;
    std::apply([&](auto&... x) { ((x = tensor<double>(x + (sign * h) * v[i++])), ...); }, out);
    return tape_gradients(f, out, w);
  };
  const std::vector<tensor<double>> plus = moved(1), minus = moved(-1);

  gradient_report r;
  std::ostringstream os;
  const std::size_t n = sizeof...(Args);
  if (opt.reverse) {  // the gradient of <g(x), v> from an outer tape
    gradient_tape outer;
    std::apply([&](const auto&... x) { (outer.watch(x), ...); }, xs);
    const std::vector<tensor<double>> g = tape_gradients(f, xs, w);
    tensor<double> s = reduce_sum(g[0] * v[0]);
    for (std::size_t i = 1; i < n; ++i) s = s + reduce_sum(g[i] * v[i]);
    const std::vector<tensor<double>> hv = outer.gradient(s, pointers(xs), unconnected_gradients::zero);
    for (std::size_t i = 0; i < n; ++i) {
      const tensor<double> ref = (plus[i] - minus[i]) / (2 * h);
      compare(hv[i].to_vector(), ref.to_vector(), opt, "reverse over reverse, " + describe(xs, i), "Hv", r, os);
    }
  }
  if constexpr (!forward_mode_enabled) {
    if (opt.forward) detail_check::forward_mode_missing(r, os);
  } else {
    if (opt.forward) {  // the tangent of g(x) along v
      typename detail_check::accumulator_of<F>::type acc;
      std::size_t k = 0;
      std::apply([&](const auto&... x) { (acc.watch(x, v[k++]), ...); }, xs);
      const std::vector<tensor<double>> g = tape_gradients(f, xs, w);
      for (std::size_t i = 0; i < n; ++i) {
        const tensor<double> ref = (plus[i] - minus[i]) / (2 * h);
        compare(acc.jvp(g[i], unconnected_gradients::zero).to_vector(), ref.to_vector(), opt, "forward over reverse, " + describe(xs, i), "Hv", r, os);
      }
    }
  }
  r.report = os.str();
  return r;
}
}  // namespace detail_check

template <class F, class... Args>
gradient_report check_second_order(F f, const tensor<Args>&... args) {
  return check_second_order(std::move(f), check_options{}, args...);
}

}  // namespace fluxion::testing
