#include <fluxion/optim/rmsprop.hpp>

#include "reference.hpp"

namespace {

struct rmsprop_state {
  std::vector<double> velocity, momentum, average_gradient;
};

/// Keras's RMSprop.update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_rmsprop(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr_d,
                                          double rho_d, double momentum_d, double epsilon_d, bool centered,
                                          std::vector<std::vector<T>>& slots) {
  const T lr = static_cast<T>(lr_d), rho = static_cast<T>(rho_d), one_minus_rho = static_cast<T>(1 - rho_d),
          momentum = static_cast<T>(momentum_d), epsilon = static_cast<T>(epsilon_d);
  std::vector<T> v(w.size(), T(0)), p(w.size(), T(0)), a(w.size(), T(0));
  std::vector<std::vector<T>> out;
  for (const auto& g : grads) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      v[i] = rho * v[i] + one_minus_rho * (g[i] * g[i]);
      T denominator = v[i] + epsilon;
      if (centered) {
        a[i] = rho * a[i] + one_minus_rho * g[i];
        denominator = v[i] - a[i] * a[i] + epsilon;
      }
      const T increment = lr * g[i] / std::sqrt(denominator);
      if (momentum_d > 0) {
        p[i] = momentum * p[i] + increment;
        w[i] -= p[i];
      } else {
        w[i] -= increment;
      }
    }
    out.push_back(w);
  }
  slots = {v};
  if (momentum_d > 0) slots.push_back(p);
  if (centered) slots.push_back(a);
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("rmsprop: plain, momentum, centered and both follow Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 4);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 40);
  struct config {
    double momentum;
    bool centered;
    std::vector<std::string> slots;
  };
  const std::vector<config> configs{{0.0, false, {"velocity"}},
                                    {0.5, false, {"velocity", "momentum"}},
                                    {0.0, true, {"velocity", "average_gradient"}},
                                    {0.9, true, {"velocity", "momentum", "average_gradient"}}};
  for (const auto& c : configs) {
    CAPTURE(c.momentum);
    CAPTURE(c.centered);
    fx::optim::rmsprop opt{{.learning_rate = 0.01, .rho = 0.8, .momentum = c.momentum, .centered = c.centered}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "layer/bias"};
    const auto got = optim_test::run(opt, w, grads);
    std::vector<std::vector<T>> want_slots;
    optim_test::check_steps(got, naive_rmsprop(w0, grads, 0.01, 0.8, c.momentum, 1e-7, c.centered, want_slots));
    const auto slots = opt.slot_variables<T, fx::cpu>();
    REQUIRE(slots.size() == c.slots.size());
    for (std::size_t k = 0; k < slots.size(); ++k) {
      CHECK(slots[k].first == "layer/bias/" + c.slots[k]);
      CHECK(opt.get_slot(w, c.slots[k]) == slots[k].second);
      test::check_close(slots[k].second->peek().to_vector(), want_slots[k], optim_test::rtol<T>(), 1e-7);
    }
  }
}

TEST_CASE("rmsprop: Keras's defaults and hyperparameter checks") {
  fx::optim::rmsprop opt;
  CHECK(opt.name() == "rmsprop");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.rho() == 0.9);
  CHECK(opt.momentum() == 0.0);
  CHECK(opt.epsilon() == 1e-7);
  CHECK(!opt.centered());
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::rmsprop bad{{.rho = 1.0}}; },
                                                "rmsprop: rho = 1 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::rmsprop bad{{.momentum = -0.5}}; },
                                                "rmsprop: momentum = -0.5 is not in [0, 1]");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::rmsprop bad{{.epsilon = -1}}; },
                                                "rmsprop: epsilon = -1 must be finite and non-negative");
}
