// Autodiff error paths: each throws the documented type with a message naming the op and the
// values. Built with the default FLUXION_MAX_DERIVATIVE_ORDER (1), which the first case relies on.
#include "../test_util.hpp"

TEST_CASE("errors: nested forward accumulators beyond the configured derivative order") {
  using doctest::Contains;
  static_assert(fx::max_derivative_order == 1, "this test nests one accumulator more than order 1 allows");
  fx::tensor<double> x = {0.5, 1.0}, v = {1.0, 1.0};
  fx::forward_accumulator outer(x, v);
  fx::forward_accumulator inner(x, v);
  // The inner accumulator's tangent of exp(x) is a first-order statement; the outer one would
  // need its tangent, a second derivative.
  CHECK_THROWS_WITH_AS(fx::tensor<double>(fx::exp(x)),
                       Contains("forward_accumulator: a derivative of order above 1 was requested; define "
                                "FLUXION_MAX_DERIVATIVE_ORDER to a larger value"),
                       fx::error);
}

TEST_CASE("errors: batch_jacobian needs a shared batch dimension") {
  using doctest::Contains;
  fx::tensor<double> x(fx::shape{3, 2});
  fx::gradient_tape tape(fx::persistent);
  tape.watch(x);
  fx::tensor<double> y = fx::transpose(x * 2.0);  // (2, 3): the first dimensions differ
  CHECK_THROWS_WITH_AS(tape.batch_jacobian(y, x),
                       Contains("batch_jacobian: target (2, 3) and source (3, 2) must share their first (batch) "
                                "dimension"),
                       fx::shape_error);
  fx::tensor<double> s = fx::reduce_sum(x);  // rank 0: no batch dimension at all
  CHECK_THROWS_WITH_AS(tape.batch_jacobian(s, x),
                       Contains("batch_jacobian: target () and source (3, 2) must share their first (batch) dimension"),
                       fx::shape_error);
}
