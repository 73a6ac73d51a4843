#include <fluxion/optim/lion.hpp>

#include "reference.hpp"

#include <cmath>

namespace {

/// Keras's Lion.update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_lion(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr,
                                       double beta_1, double beta_2) {
  std::vector<double> m(w.size(), 0);
  std::vector<std::vector<T>> out;
  for (const auto& g : grads) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double c = m[i] * beta_1 + g[i] * (1 - beta_1);
      w[i] = static_cast<T>(w[i] - lr * (c > 0 ? 1 : c < 0 ? -1 : 0));
      m[i] = m[i] * beta_2 + g[i] * (1 - beta_2);
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("lion: follows Keras's formula; every coordinate moves by the rate", T, float, double) {
  auto w0 = optim_test::random_vector<T>(optim_test::size, 3);
  auto grads = optim_test::random_gradients<T>(optim_test::size, 70);
  grads[0][5] = 0;  // sign(0) = 0 at the first step: that coordinate stays
  fx::optim::lion opt{{.learning_rate = 0.01, .beta_1 = 0.8, .beta_2 = 0.95}};
  fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
  const auto got = optim_test::run(opt, w, grads);
  optim_test::check_steps(got, naive_lion(w0, grads, 0.01, 0.8, 0.95));
  CHECK(got[0][5] == w0[5]);
  CHECK(std::abs(static_cast<double>(got[0][0] - w0[0])) == doctest::Approx(0.01));
  const auto slots = opt.slot_variables<T, fx::cpu>();
  REQUIRE(slots.size() == 1);
  CHECK(slots[0].first == "w/momentum");
}

TEST_CASE("lion: Keras's defaults and hyperparameter checks") {
  fx::optim::lion opt;
  CHECK(opt.name() == "lion");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.beta_1() == 0.9);
  CHECK(opt.beta_2() == 0.99);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::lion bad{{.beta_1 = 0.0}}; },
                                                "lion: beta_1 = 0 is not in (0, 1] (at 0 the optimizer is sign SGD)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::lion bad{{.beta_2 = 1.5}}; },
                                                "lion: beta_2 = 1.5 is not in [0, 1]");
}
