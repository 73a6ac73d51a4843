// The second-order unit of tests/autodiff/mixed_settings (see order1.cpp): the highest setting of
// the units that compile a statement type records it, whichever unit's copy the linker kept.
#define FLUXION_MAX_DERIVATIVE_ORDER 2
#define FLUXION_FORWARD_MODE 0
#include "shared.hpp"

#include <doctest/doctest.h>

#include <vector>

namespace fx = fluxion;

TEST_CASE("mixed settings: a second derivative of a statement type a first-order unit also runs") {
  const fx::tensor<double> x({0.5, -2.0});
  CHECK(mixed_settings::cubic_at_first_order(x).to_vector() == std::vector<double>{-0.375, -6.0});
  fx::gradient_tape outer;
  outer.watch(x);
  fx::tensor<double> dy;
  {
    fx::gradient_tape inner;
    inner.watch(x);
    const fx::tensor<double> y = fx::eval(x * x * x - x);
    dy = inner.gradient(y, x);  // 3 x^2 - 1
  }
  CHECK(dy.to_vector() == std::vector<double>{-0.25, 11.0});
  const fx::tensor<double> d2 = outer.gradient(dy, x);  // 6 x
  REQUIRE_FALSE(d2.is_none());
  CHECK(d2.to_vector() == std::vector<double>{3.0, -12.0});
}
