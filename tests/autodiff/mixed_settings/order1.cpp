// Translation units of one program compiled with different autodiff settings (core/config.hpp):
// this one with the autodiff tests' settings (first order, forward mode on), order0.cpp without
// autodiff, order2.cpp at second order. The linker keeps one copy of the code two units
// instantiate, the one that comes first on its command line; CMake links the units in both orders
// (autodiff.mixed_settings.order0_first: 0, 1, 2; .order2_first: 2, 1, 0).
// Before stop 68, with order0.cpp first, a gradient of the same statement type here was silently
// none, a dense layer under a tape took its inference path, and under a forward accumulator a
// fused LSTM and a segment maximum had no tangent; with this unit before order2.cpp, a second
// derivative there of a statement type this unit runs too failed.
#include "shared.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <string>

namespace fx = fluxion;
namespace nn = fluxion::nn;

fx::tensor<double> mixed_settings::cubic_at_first_order(const fx::tensor<double>& x) { return fx::eval(x * x * x - x); }

TEST_CASE("mixed settings: a statement type both units materialize is recorded here") {
  const fx::tensor<double> x({1.0, 2.0, 3.0});
  CHECK(mixed_settings::affine(x).to_vector() == std::vector<double>{3.0, 5.0, 7.0});
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> y = fx::eval(x * 2.0 + 1.0);
  const fx::tensor<double> g = tape.gradient(y, x);
  REQUIRE_FALSE(g.is_none());
  CHECK(g.to_vector() == std::vector<double>{2.0, 2.0, 2.0});
}

TEST_CASE("mixed settings: the other unit's statements are recorded when this unit compiles them too") {
  // The tape is alive while order0.cpp materializes 2 x + 1: this unit enrolled that type's recording.
  const fx::tensor<double> x({1.0, -1.0});
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> y = mixed_settings::affine(x);
  const fx::tensor<double> g = tape.gradient(y, x);
  REQUIRE_FALSE(g.is_none());
  CHECK(g.to_vector() == std::vector<double>{2.0, 2.0});
}

TEST_CASE("mixed settings: a dense layer under a tape records its statements") {
  CHECK(mixed_settings::dense_inference(fx::tensor<double>({{1.0, 1.0, 1.0}})).to_vector() ==
        std::vector<double>{0.25, 2.5});
  nn::dense<2, double> layer;
  layer.build(fx::shape{3});
  const fx::tensor<double> x({{1.0, 2.0, 3.0}, {-1.0, 0.5, 2.0}});
  fx::gradient_tape tape;
  const fx::tensor<double> loss = fx::reduce_sum(layer(x));
  auto [dk, db] = tape.gradient(loss, {layer.kernel(), layer.bias()});
  REQUIRE_FALSE(dk.is_none());
  REQUIRE_FALSE(db.is_none());
  // d sum(x K + b) / dK[i][j] = sum over rows of x[., i]; / db[j] = rows.
  CHECK(dk.to_vector() == std::vector<double>{0.0, 0.0, 2.5, 2.5, 5.0, 5.0});
  CHECK(db.to_vector() == std::vector<double>{2.0, 2.0});
}

TEST_CASE("mixed settings: a fused LSTM under a forward accumulator has a tangent") {
  const fx::tensor<double> x({{{0.5, -0.25}, {1.0, 0.75}}});  // (batch 1, time 2, features 2)
  const fx::tensor<double> y0 = mixed_settings::lstm_inference(x);
  REQUIRE(y0.shape() == fx::shape{1, 2, 3});
  fx::random::generator gen{5};
  nn::lstm<3, true, double> layer;
  layer.build(fx::shape{2, 2}, gen);
  CHECK(layer(x).to_vector() == y0.to_vector());  // the same initial weights
  const fx::tensor<double> direction = fx::ones_like(x);
  fx::tensor<double> jvp;
  {
    fx::forward_accumulator acc(x, direction);
    const fx::tensor<double> y = layer(x);
    jvp = acc.jvp(y);
  }
  REQUIRE_FALSE(jvp.is_none());
  // Central differences along the direction.
  const double h = 1e-6;
  const auto up = layer(fx::tensor<double>(x + h * direction)).to_vector();
  const auto down = layer(fx::tensor<double>(x - h * direction)).to_vector();
  const auto got = jvp.to_vector();
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx((up[i] - down[i]) / (2 * h)).epsilon(1e-6));
}

TEST_CASE("mixed settings: a segment maximum under a forward accumulator has a tangent") {
  const fx::tensor<double> x({{1.0, 5.0}, {3.0, 2.0}, {4.0, 0.0}});
  CHECK(mixed_settings::segment_maxima(x).to_vector() == std::vector<double>{3.0, 5.0, 4.0, 0.0});
  const fx::tensor<double> direction({{1.0, 10.0}, {100.0, 1000.0}, {1e4, 1e5}});
  fx::forward_accumulator acc(x, direction);
  const fx::tensor<double> m = fx::eval(fx::unsorted_segment_max(x, fx::tensor<std::int64_t>({0, 0, 1}), 2));
  const fx::tensor<double> t = acc.jvp(m);
  REQUIRE_FALSE(t.is_none());
  CHECK(t.to_vector() == std::vector<double>{100.0, 10.0, 1e4, 1e5});
}

TEST_CASE("mixed settings: a batch norm in both units, under a forward accumulator") {
  const fx::tensor<double> x({{1.0, 2.0}, {3.0, 6.0}});
  const auto y0 = mixed_settings::batch_norm_training(x).to_vector();
  nn::batch_norm<-1, double> layer;
  layer.build(fx::shape{2});
  fx::forward_accumulator acc(x, fx::ones_like(x));
  const fx::tensor<double> y = layer(x, true);
  CHECK(y.to_vector() == y0);
  CHECK(acc.has(y.id()));
  CHECK_FALSE(acc.has(layer.moving_mean().peek().id()));  // the moving statistics' update is not seen
  // Normalizing cancels a shift of every example by the same amount.
  for (double v : acc.jvp(y).to_vector()) CHECK(v == doctest::Approx(0.0).scale(1.0));
}

TEST_CASE("mixed settings: a statement no unit with autodiff compiles is an error, not a missing gradient") {
  const fx::tensor<double> x({0.5, -1.0});
  {
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<double> y = mixed_settings::only_here(x);
    try {
      (void)tape.gradient(y, x);
      FAIL("gradient() returned");
    } catch (const fx::error& e) {
      const std::string what = e.what();
      CHECK(what.find("gradient_tape::gradient: no gradient reaches source 0 of 1 (shape (2,))") == 0);
      CHECK(what.find("could not record 1 statement") != std::string::npos);
      CHECK(what.find("FLUXION_MAX_DERIVATIVE_ORDER=0") != std::string::npos);
    }
  }
  {  // Paused, the tape does not count it, and an unconnected source is TensorFlow's None again.
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y;
    {
      auto quiet = tape.stop_recording();
      y = mixed_settings::only_here(x);
    }
    CHECK(tape.gradient(y, x).is_none());
  }
  {  // The unit's statements still give gradients where they are connected through this unit's.
    fx::gradient_tape tape{fx::persistent};
    tape.watch(x);
    const fx::tensor<double> unrelated = mixed_settings::only_here(x);
    const fx::tensor<double> y = fx::eval(x * x);
    CHECK(tape.gradient(y, x).to_vector() == std::vector<double>{1.0, -2.0});
    CHECK_THROWS_AS((void)tape.gradient(unrelated, x), fx::error);
  }
  // A tape in a unit without autodiff records nothing: its gradient says why.
  const std::string said = mixed_settings::gradient_in_this_unit();
  CHECK(said.find("FLUXION_MAX_DERIVATIVE_ORDER=0 (autodiff off)") != std::string::npos);
}

TEST_CASE("mixed settings: a statement no unit with forward mode compiles is an error for a forward accumulator") {
  const fx::tensor<double> x({0.5, -1.0});
  fx::forward_accumulator acc(x, fx::ones_like(x));
  const fx::tensor<double> unseen = mixed_settings::only_here(x);
  const fx::tensor<double> y = fx::eval(x * x);
  CHECK(acc.jvp(y).to_vector() == std::vector<double>{1.0, -2.0});  // connected through this unit
  try {
    (void)acc.jvp(unseen);
    FAIL("jvp() returned");
  } catch (const fx::error& e) {
    const std::string what = e.what();
    CHECK(what.find("forward_accumulator::jvp: no tangent reaches the tensor of shape (2,), and 1 statement ran") == 0);
    CHECK(what.find("FLUXION_FORWARD_MODE 1") != std::string::npos);
  }
  // An accumulator made after that statement did not see it run: TensorFlow's None for an unconnected tensor.
  fx::forward_accumulator later(x, fx::ones_like(x));
  CHECK(later.jvp(unseen).is_none());
}
