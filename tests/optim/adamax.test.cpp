#include <fluxion/optim/adamax.hpp>

#include "reference.hpp"

#include <algorithm>
#include <cmath>

namespace {

/// Keras's Adamax.update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_adamax(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr,
                                         double beta_1, double beta_2, double epsilon) {
  std::vector<double> m(w.size(), 0), u(w.size(), 0);
  std::vector<std::vector<T>> out;
  for (std::size_t t = 1; t <= grads.size(); ++t) {
    const auto& g = grads[t - 1];
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * (1 - beta_1);
      u[i] = std::max(beta_2 * u[i], std::abs(static_cast<double>(g[i])));
      w[i] = static_cast<T>(w[i] - lr * m[i] / ((1 - std::pow(beta_1, static_cast<double>(t))) * (u[i] + epsilon)));
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("adamax: follows Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 3);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 40);
  for (double epsilon : {1e-7, 0.5}) {
    CAPTURE(epsilon);
    fx::optim::adamax opt{{.learning_rate = 0.02, .beta_1 = 0.8, .beta_2 = 0.9, .epsilon = epsilon}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    optim_test::check_steps(optim_test::run(opt, w, grads), naive_adamax(w0, grads, 0.02, 0.8, 0.9, epsilon));
    const auto slots = opt.slot_variables<T, fx::cpu>();
    REQUIRE(slots.size() == 2);
    CHECK(slots[0].first == "w/m");
    CHECK(slots[1].first == "w/u");
  }
}

TEST_CASE("adamax: Keras's defaults and hyperparameter checks") {
  fx::optim::adamax opt;
  CHECK(opt.name() == "adamax");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.beta_1() == 0.9);
  CHECK(opt.beta_2() == 0.999);
  CHECK(opt.epsilon() == 1e-7);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adamax bad{{.beta_1 = 1.0}}; },
                                                "adamax: beta_1 = 1 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adamax bad{{.epsilon = -1}}; },
                                                "adamax: epsilon = -1 must be finite and non-negative");
}
