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
                                "FLUXION_MAX_DERIVATIVE_ORDER to 2 or more in the translation units that write the "
                                "statements being differentiated (`#define` it before including fluxion, or "
                                "target_compile_definitions(app PRIVATE "
                                "FLUXION_MAX_DERIVATIVE_ORDER=2) in CMake)"),
                       fx::error);
}

TEST_CASE("errors: a tape's gradient of a gradient beyond the configured derivative order says how to raise it") {
  using doctest::Contains;
  fx::tensor<double> x = {1.0, 2.0};
  fx::gradient_tape outer;
  outer.watch(x);
  fx::tensor<double> g;
  {
    fx::gradient_tape inner;
    inner.watch(x);
    const fx::tensor<double> y = fx::reduce_sum(x * x * x);
    g = inner.gradient(y, x);
  }
  CHECK_THROWS_WITH_AS((void)outer.gradient(fx::tensor<double>(fx::reduce_sum(g)), x),
                       Contains("gradient_tape: a derivative of order above 1 was requested; define "
                                "FLUXION_MAX_DERIVATIVE_ORDER to 2 or more in the translation units that write the "
                                "statements being differentiated"),
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

TEST_CASE("errors: a gradient the tape could not give, used in an update, says why it is none") {
  // TensorFlow returns None for a source the tape never saw; fluxion tensor::none(), which an
  // operation refuses, naming itself and where the none came from.
  fx::tensor<float> a = {0.f, 0.5f, 1.f};
  fx::gradient_tape tape;  // a is not watched, and not a variable
  fx::tensor<float> loss = fx::reduce_sum(fx::square(a));
  const fx::tensor<float> g = tape.gradient(loss, a);
  CHECK(g.shape() == fx::shape{0});
  CHECK(g.is_none());
  CHECK_THROWS_WITH_AS(fx::tensor<float>(a - 0.1f * g),
                       "multiply: an operand is none, the gradient that gradient_tape::gradient returns for a source "
                       "the target does not depend on (TensorFlow's None): check that the target reads the source "
                       "while the tape records (a tensor must be watched), test g.is_none(), or ask for zeros with "
                       "fluxion::unconnected_gradients::zero",
                       fx::invalid_argument);
  // An empty tensor that is not none says where else a shape (0,) comes from.
  const fx::tensor<float> unassigned;
  CHECK_THROWS_WITH_AS(fx::tensor<float>(a - unassigned),
                       "subtract: shapes (3,) and (0,) cannot be broadcast (shape (0,) is the shape of a "
                       "default-constructed or moved-from tensor: was it assigned?)",
                       fx::shape_error);
  fx::gradient_tape zeros;
  fx::tensor<float> loss2 = fx::reduce_sum(fx::square(a));
  CHECK(zeros.gradient(loss2, a, fx::unconnected_gradients::zero).to_vector() == std::vector<float>{0.f, 0.f, 0.f});
}
