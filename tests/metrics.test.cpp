// fx::metrics: weighted means accumulated over several updates against hand-computed values,
// reset, ties in argmax (the first maximum wins, as in Keras), sample weights, bad shapes, and
// that an update under a gradient tape records nothing.
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <fluxion/metrics.hpp>

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace metrics_test {

namespace fx = fluxion;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::shape_error& e) {
    return e.what();
  }
  FAIL("no fx::shape_error was thrown");
  return "";
}

}  // namespace

TEST_CASE("metrics::mean over several updates, with and without sample weights") {
  fx::metrics::mean m;
  CHECK(m.name() == "mean");
  CHECK(m.result() == 0.0);  // no update yet: 0, not NaN
  m.update(fx::tensor<float>{1.f, 3.f});
  CHECK(m.result() == 2.0);
  m.update(5);  // a C++ scalar
  CHECK(m.result() == 3.0);
  CHECK(m.total() == 9.0);
  CHECK(m.count() == 3.0);
  // Per-example weights: (2,) for (2, 2) values weigh whole rows: 1 + 2 with weight 1.
  m.update(fx::tensor<double>{{1.0, 2.0}, {3.0, 4.0}}, fx::tensor<double>{1.0, 0.0});
  CHECK(m.total() == 12.0);
  CHECK(m.count() == 5.0);
  CHECK(m.result() == doctest::Approx(2.4));
  // Broadcast weights: (1, 3) against (2, 3) values: 0.5 (1 + 4) + 2 (3 + 6) = 20.5, count 2 (0.5 + 0 + 2) = 5.
  m.update(fx::tensor<float>{{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}, fx::tensor<float>{{0.5f, 0.f, 2.f}});
  CHECK(m.total() == 32.5);
  CHECK(m.count() == 10.0);
  CHECK(m.result() == 3.25);
  // An expression, a scalar weight, an empty batch.
  const fx::tensor<std::int32_t> a = {2, 4};
  m.update(a * 2, 0.5);
  CHECK(m.total() == 38.5);
  CHECK(m.count() == 11.0);
  m.update(fx::tensor<float>());
  CHECK(m.count() == 11.0);
  m.reset();
  CHECK(m.result() == 0.0);
  CHECK(m.count() == 0.0);
  m.update(fx::tensor<bool>{true, false, true, true});
  CHECK(m.result() == 0.75);
}

TEST_CASE("metrics::mean: weights that do not broadcast throw, naming both shapes") {
  fx::metrics::mean m("loss");
  const fx::tensor<float> v = {{1.f, 2.f}, {3.f, 4.f}};
  const std::string msg = message_of([&] { m.update(v, fx::tensor<float>{1.f, 2.f, 3.f}); });
  CHECK(msg == "loss.update: sample_weight of shape (3,) does not broadcast to the values' shape (2, 2)");
  CHECK_THROWS_AS(m.update(fx::tensor<float>{1.f, 2.f}, fx::tensor<float>{{1.f}, {2.f}}), fx::shape_error);
  CHECK(m.count() == 0.0);  // a failed update changes nothing
}

TEST_CASE("metrics::sparse_categorical_accuracy: accumulates over batches; ties take the first max") {
  fx::metrics::sparse_categorical_accuracy acc;
  CHECK(acc.name() == "sparse_categorical_accuracy");
  // Row 1 ties classes 0 and 2: the first (0) is the prediction, so label 2 is wrong.
  const fx::tensor<float> p1 = {{0.1f, 0.8f, 0.1f}, {0.4f, 0.2f, 0.4f}, {0.f, 0.f, 1.f}};
  acc.update(fx::tensor<std::int32_t>{1, 2, 2}, p1);
  CHECK(acc.result() == doctest::Approx(2.0 / 3));
  acc.update(fx::tensor<std::int64_t>{0, 0, 1}, p1);  // row 1 is right now
  CHECK(acc.total() == 3.0);
  CHECK(acc.count() == 6.0);
  // Labels of shape (batch, 1) and of a floating type, as Keras accepts.
  acc.update(fx::tensor<float>{{1.f}, {0.f}}, fx::tensor<double>{{0.0, 1.0}, {2.0, -1.0}});
  CHECK(acc.result() == doctest::Approx(5.0 / 8));
  // Sample weights: only the wrong example counts.
  acc.update(fx::tensor<std::int32_t>{1, 1}, fx::tensor<float>{{0.f, 1.f}, {1.f, 0.f}}, fx::tensor<float>{0.f, 3.f});
  CHECK(acc.total() == 5.0);
  CHECK(acc.count() == 11.0);
  acc.reset();
  CHECK(acc.result() == 0.0);
  acc.update(fx::tensor<std::int32_t>{2}, fx::tensor<float>{{1.f, 1.f, 1.f}});
  CHECK(acc.result() == 0.0);  // an all-equal row predicts class 0
}

TEST_CASE("metrics::categorical_accuracy: one-hot labels, ties, weights and reset") {
  fx::metrics::categorical_accuracy acc;
  const fx::tensor<float> y = {{0.f, 1.f, 0.f}, {1.f, 0.f, 0.f}, {0.f, 0.f, 1.f}, {0.f, 0.f, 1.f}};
  const fx::tensor<float> p = {{0.2f, 0.7f, 0.1f}, {0.5f, 0.5f, 0.f}, {0.3f, 0.3f, 0.3f}, {0.1f, 0.2f, 0.7f}};
  acc.update(y, p);  // right, right (tie -> 0), wrong (tie -> 0), right
  CHECK(acc.result() == 0.75);
  acc.update(fx::tensor<bool>{{true, false}}, fx::tensor<double>{{0.0, 1.0}});  // bool one-hot labels
  CHECK(acc.total() == 3.0);
  CHECK(acc.count() == 5.0);
  acc.update(y, p, fx::tensor<float>{0.f, 0.f, 5.f, 0.f});
  CHECK(acc.result() == doctest::Approx(3.0 / 10));
  acc.reset();
  CHECK(acc.count() == 0.0);
}

TEST_CASE("metrics: bad shapes throw, naming the metric and the shapes") {
  fx::metrics::sparse_categorical_accuracy sparse;
  const fx::tensor<float> p = {{0.2f, 0.8f}, {0.6f, 0.4f}};
  CHECK(message_of([&] { sparse.update(fx::tensor<std::int32_t>{1, 0, 1}, p); }) ==
        "sparse_categorical_accuracy.update: y_true of shape (3,) does not fit y_pred of shape (2, 2): expected "
        "(2,) or (2, 1)");
  CHECK(message_of([&] { sparse.update(fx::tensor<std::int32_t>{1}, fx::tensor<float>(1.f)); }) ==
        "sparse_categorical_accuracy.update: y_pred of shape () has no class axis; give it the shape (batch, classes)");
  fx::metrics::categorical_accuracy categorical;
  CHECK(message_of([&] { categorical.update(fx::tensor<float>{{1.f, 0.f, 0.f}}, p); }) ==
        "categorical_accuracy.update: y_true of shape (1, 3) and y_pred of shape (2, 2) must have the same shape");
  CHECK(message_of([&] {
          categorical.update(fx::tensor<float>(fx::shape{2, 0}), fx::tensor<float>(fx::shape{2, 0}));
        }) == "categorical_accuracy.update: y_pred of shape (2, 0) has no classes");
  CHECK(sparse.count() == 0.0);
  CHECK(categorical.count() == 0.0);
}

TEST_CASE("metrics: updates under a gradient tape record nothing and watch nothing") {
  const fx::tensor<float> x = {{1.f, 2.f}, {3.f, 0.f}};
  fx::variable<float> v(fx::tensor<float>{1.f, 2.f});
  fx::metrics::mean m;
  fx::metrics::categorical_accuracy acc;
  fx::gradient_tape tape;
  tape.watch(x);
  m.update(x * 2.f);
  m.update(v);
  acc.update(x, x * 3.f);
  CHECK(tape.entries() == 0);
  CHECK(!tape.tracks(v.peek().id()));  // reading the variable did not make the tape watch it
  CHECK(m.result() == doctest::Approx((12.0 + 3.0) / 6));
  CHECK(acc.result() == 1.0);
  // The tape still records what it should.
  const fx::tensor<float> y = fx::reduce_sum(x * x);
  CHECK(tape.entries() == 1);
  CHECK(tape.gradient(y, x).to_vector() == std::vector<float>{2.f, 4.f, 6.f, 0.f});
}

}  // namespace metrics_test
