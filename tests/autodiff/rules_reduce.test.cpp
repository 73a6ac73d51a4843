#include "../test_util.hpp"

#include <fluxion/testing/check_gradients.hpp>

// Every differentiable op against central finite differences, in double, at several shapes
// including broadcasting.

namespace {

using fx::testing::check_gradients;

template <class F>
void check_unary(const char* name, F f, double lo = -2, double hi = 2, fx::testing::check_options opt = {}) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{5}, fx::shape{2, 3}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(s));
    auto x = test::random_tensor<double>(s, 3, lo, hi);
    auto r = check_gradients(f, opt, x);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

template <class F>
void check_binary(const char* name, F f, double lo = -2, double hi = 2) {
  struct Case {
    fx::shape a, b;
  };
  for (auto c : {Case{{4}, {4}}, Case{{2, 3}, {3}}, Case{{3, 1}, {1, 4}}, Case{{}, {2, 2}}}) {
    const std::string op = name;
    CAPTURE(op);
    CAPTURE(fx::to_string(c.a));
    CAPTURE(fx::to_string(c.b));
    auto a = test::random_tensor<double>(c.a, 5, lo, hi);
    auto b = test::random_tensor<double>(c.b, 6, lo, hi);
    auto r = check_gradients(f, a, b);
    CHECK_MESSAGE(r.ok, r.report);
  }
}

}  // namespace

TEST_CASE("rules: reductions") {
  auto x = test::random_tensor<double>({3, 4}, 7, 0.5, 2);
  for (const fx::axes& ax : {fx::axes{}, fx::axes{0}, fx::axes{1}, fx::axes{0, 1}}) {
    for (bool keep : {false, true}) {
      CAPTURE(keep);
      auto r1 = check_gradients([&](const auto& v) { return fx::reduce_sum(v * v, ax, keep); }, x);
      CHECK_MESSAGE(r1.ok, r1.report);
      auto r2 = check_gradients([&](const auto& v) { return fx::reduce_mean(fx::sin(v), ax, keep); }, x);
      CHECK_MESSAGE(r2.ok, r2.report);
      auto r3 = check_gradients([&](const auto& v) { return fx::reduce_max(v, ax, keep); }, x);
      CHECK_MESSAGE(r3.ok, r3.report);
      auto r4 = check_gradients([&](const auto& v) { return fx::reduce_min(v, ax, keep); }, x);
      CHECK_MESSAGE(r4.ok, r4.report);
      auto r5 = check_gradients([&](const auto& v) { return fx::reduce_prod(v, ax, keep); }, x);
      CHECK_MESSAGE(r5.ok, r5.report);
      auto r6 = check_gradients([&](const auto& v) { return fx::reduce_logsumexp(v, ax, keep); }, x);
      CHECK_MESSAGE(r6.ok, r6.report);
    }
  }
}
