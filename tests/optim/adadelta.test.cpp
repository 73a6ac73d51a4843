#include <fluxion/optim/adadelta.hpp>

#include "reference.hpp"

#include <cmath>

namespace {

/// Keras's Adadelta.update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_adadelta(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr,
                                           double rho, double epsilon) {
  std::vector<double> a(w.size(), 0), d(w.size(), 0);
  const auto rms = [&](double x) { return std::sqrt(x + epsilon); };
  std::vector<std::vector<T>> out;
  for (const auto& g : grads) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      a[i] = rho * a[i] + (1 - rho) * static_cast<double>(g[i]) * g[i];
      const double delta = -(rms(d[i]) * g[i]) / rms(a[i]);
      d[i] = rho * d[i] + (1 - rho) * delta * delta;
      w[i] = static_cast<T>(w[i] + lr * delta);
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("adadelta: follows Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 3);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 60);
  fx::optim::adadelta opt{{.learning_rate = 1.0, .rho = 0.9, .epsilon = 1e-4}};
  fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
  optim_test::check_steps(optim_test::run(opt, w, grads), naive_adadelta(w0, grads, 1.0, 0.9, 1e-4));
  const auto slots = opt.slot_variables<T, fx::cpu>();
  REQUIRE(slots.size() == 2);
  CHECK(slots[0].first == "w/accumulated_grad");
  CHECK(slots[1].first == "w/accumulated_delta_var");
}

TEST_CASE("adadelta: Keras's defaults and hyperparameter checks") {
  fx::optim::adadelta opt;
  CHECK(opt.name() == "adadelta");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.rho() == 0.95);
  CHECK(opt.epsilon() == 1e-7);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adadelta bad{{.rho = 1.5}}; },
                                                "adadelta: rho = 1.5 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>(
      [] { fx::optim::adadelta bad{{.epsilon = 0}}; },
      "adadelta: epsilon = 0 must be positive: the squared updates start at 0, so every update would be 0");
}
