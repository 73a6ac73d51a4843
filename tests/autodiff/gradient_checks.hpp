// Helpers of the rules_* tests: every differentiable op against central finite differences, in
// double, in reverse and forward mode (fx::testing::check_gradients), at several shapes including
// broadcasting. Each distinct lambda instantiates its statement's kernels, backward and forward
// functions, so a test file holds a bounded number of them (see cmake/tests.cmake on compile time).
#pragma once

#include <string>

#include "../test_util.hpp"

#include <fluxion/testing/check_gradients.hpp>

namespace test {

using fx::testing::check_gradients;
using fx::testing::check_options;

/// Values in [lo, hi] with alternating signs (for ops with a kink at 0: abs, relu).
inline fx::tensor<double> both_signs(const fx::shape& s, unsigned seed, double lo, double hi) {
  fx::tensor<double> t = random_tensor<double>(s, seed, lo, hi);
  for (fx::index_t i = 0; i < s.size(); i += 2) t.mutable_data()[i] = -t.mutable_data()[i];
  return t;
}

/// Checks f at the given arguments; `name` labels failures.
template <class F, class... A>
void check_op(const std::string& name, F f, const check_options& opt, const A&... args) {
  CAPTURE(name);
  auto r = check_gradients(f, opt, args...);
  CHECK_MESSAGE(r.ok, r.report);
}
template <class F, class... A>
void check_op(const std::string& name, F f, const A&... args) {
  check_op(name, f, check_options{}, args...);
}

/// Checks Hessian-vector products of f at the given arguments (FLUXION_MAX_DERIVATIVE_ORDER >= 2).
template <class F, class... A>
void check_second(const std::string& name, F f, const check_options& opt, const A&... args) {
  CAPTURE(name);
  auto r = fx::testing::check_second_order(f, opt, args...);
  CHECK_MESSAGE(r.ok, r.report);
}
template <class F, class... A>
void check_second(const std::string& name, F f, const A&... args) {
  check_second(name, f, check_options{}, args...);
}

/// Second derivatives of a unary op at shapes () and (2, 3).
template <class F>
void check_second_unary(const char* name, F f, double lo = -2, double hi = 2) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{2, 3}}) {
    CAPTURE(fx::to_string(s));
    check_second(name, f, check_options{}, random_tensor<double>(s, 3, lo, hi));
  }
}

/// A unary op at shapes (), (5) and (2, 3), with arguments in [lo, hi] (both signs of it with
/// `signs`).
template <class F>
void check_unary(const char* name, F f, double lo = -2, double hi = 2, check_options opt = {}, bool signs = false) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{5}, fx::shape{2, 3}}) {
    CAPTURE(fx::to_string(s));
    check_op(name, f, opt, signs ? both_signs(s, 3, lo, hi) : random_tensor<double>(s, 3, lo, hi));
  }
}

/// A binary op at equal shapes and with broadcasting of either operand, and of a scalar.
template <class F>
void check_binary(const char* name, F f, double lo = -2, double hi = 2) {
  struct Case {
    fx::shape a, b;
  };
  for (auto c : {Case{{4}, {4}}, Case{{2, 3}, {3}}, Case{{3, 1}, {1, 4}}, Case{{}, {2, 2}}, Case{{2, 1, 3}, {}}}) {
    CAPTURE(fx::to_string(c.a));
    CAPTURE(fx::to_string(c.b));
    check_op(name, f, random_tensor<double>(c.a, 5, lo, hi), random_tensor<double>(c.b, 6, lo, hi));
  }
}

}  // namespace test
