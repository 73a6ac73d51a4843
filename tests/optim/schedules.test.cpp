#include <fluxion/optim/schedules.hpp>
#include <fluxion/optim/sgd.hpp>

#include "reference.hpp"

using doctest::Approx;

TEST_CASE("exponential_decay: smooth and staircase, as Keras's ExponentialDecay") {
  const fx::optim::exponential_decay smooth(0.1, 10, 0.5);
  CHECK(smooth(0) == Approx(0.1).epsilon(1e-15));
  CHECK(smooth(5) == Approx(0.07071067811865475).epsilon(1e-15));  // 0.1 * 0.5^0.5
  CHECK(smooth(10) == Approx(0.05).epsilon(1e-15));
  CHECK(smooth(25) == Approx(0.017677669529663688).epsilon(1e-15));  // 0.1 * 0.5^2.5
  const fx::optim::exponential_decay stairs(0.1, 10, 0.5, /*staircase=*/true);
  CHECK(stairs(5) == Approx(0.1).epsilon(1e-15));
  CHECK(stairs(9) == Approx(0.1).epsilon(1e-15));
  CHECK(stairs(15) == Approx(0.05).epsilon(1e-15));
  CHECK(stairs(25) == Approx(0.025).epsilon(1e-15));
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::exponential_decay(0.1, 0, 0.5); },
                                                "exponential_decay: decay_steps = 0 must be positive");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::exponential_decay(0.1, 10, -0.5); },
                                                "exponential_decay: decay_rate = -0.5 must be finite and non-negative");
}

TEST_CASE("piecewise_constant: a boundary belongs to the interval it ends, as in Keras") {
  const fx::optim::piecewise_constant pc({10, 20}, {1.0, 0.5, 0.1});
  CHECK(pc(0) == 1.0);
  CHECK(pc(10) == 1.0);
  CHECK(pc(11) == 0.5);
  CHECK(pc(20) == 0.5);
  CHECK(pc(21) == 0.1);
  CHECK(pc(1000) == 0.1);
  const fx::optim::piecewise_constant constant({}, {0.3});
  CHECK(constant(12345) == 0.3);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::piecewise_constant({10, 20}, {1.0, 0.5}); },
                                                "piecewise_constant: 2 boundaries need 3 values, not 2");
  test::check_throws_with<fx::invalid_argument>(
      [] { fx::optim::piecewise_constant({10, 10}, {1.0, 0.5, 0.1}); },
      "piecewise_constant: boundaries must increase, but boundaries[1] = 10 follows 10");
}

TEST_CASE("cosine_decay: from the initial rate to alpha times it, then constant") {
  const fx::optim::cosine_decay to_zero(0.1, 100);
  CHECK(to_zero(0) == Approx(0.1).epsilon(1e-15));
  CHECK(to_zero(25) == Approx(0.08535533905932738).epsilon(1e-14));  // 0.05 * (1 + cos(pi / 4))
  CHECK(to_zero(50) == Approx(0.05).epsilon(1e-14));
  CHECK(std::abs(to_zero(100)) < 1e-17);
  CHECK(std::abs(to_zero(200)) < 1e-17);
  const fx::optim::cosine_decay to_alpha(0.1, 100, 0.2);
  CHECK(to_alpha(50) == Approx(0.06).epsilon(1e-14));  // 0.1 * (0.8 * 0.5 + 0.2)
  CHECK(to_alpha(100) == Approx(0.02).epsilon(1e-14));
  CHECK(to_alpha(1000) == Approx(0.02).epsilon(1e-14));
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::cosine_decay(0.1, -5); },
                                                "cosine_decay: decay_steps = -5 must be positive");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::cosine_decay(0.1, 5, 1.5); },
                                                "cosine_decay: alpha = 1.5 is not in [0, 1]");
}

TEST_CASE("an optimizer evaluates its schedule at its iteration count") {
  fx::optim::sgd opt{fx::optim::exponential_decay(1.0, 1, 0.5)};
  CHECK(!opt.learning_rate_schedule().is_constant());
  fx::variable<double> w{fx::tensor<double>{0.0}, "w"};
  std::vector<fx::variable<double>*> vars{&w};
  double want = 0;
  for (int step = 0; step < 4; ++step) {
    CHECK(opt.learning_rate() == Approx(std::pow(0.5, step)).epsilon(1e-15));
    opt.apply_gradients(std::vector<fx::tensor<double>>{fx::tensor<double>{1.0}}, vars);
    want -= std::pow(0.5, step);  // w -= lr * 1
    CHECK(w.peek()(0) == Approx(want).epsilon(1e-15));
  }
  opt.set_iterations(10);
  CHECK(opt.learning_rate() == Approx(std::pow(0.5, 10)).epsilon(1e-15));
  // Any callable of the step works, and set_learning_rate replaces the schedule.
  opt.set_learning_rate([](std::int64_t step) { return 1.0 / static_cast<double>(step + 1); });
  CHECK(opt.learning_rate() == Approx(1.0 / 11).epsilon(1e-15));
  opt.set_learning_rate(0.25);
  CHECK(opt.learning_rate() == 0.25);
  test::check_throws_with<fx::invalid_argument>([&] { opt.set_learning_rate(-1.0); },
                                                "set_learning_rate: learning_rate = -1 must be finite and non-negative");
}

TEST_CASE("a schedule that gives a negative rate fails apply_gradients and changes nothing") {
  fx::optim::sgd opt{[](std::int64_t step) { return step < 1 ? 0.1 : -0.1; }};
  fx::variable<float> w{fx::tensor<float>{1.f, 2.f}, "w"};
  std::vector<fx::variable<float>*> vars{&w};
  const std::vector<fx::tensor<float>> g{fx::tensor<float>{1.f, 1.f}};
  opt.apply_gradients(g, vars);
  const auto before = w.peek().to_vector();
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients(g, vars); },
      "apply_gradients: the learning rate schedule gives -0.1 at update 1; a learning rate must be finite and non-negative");
  CHECK(w.peek().to_vector() == before);
  CHECK(w.version() == 1);
  CHECK(opt.iterations() == 1);
}
