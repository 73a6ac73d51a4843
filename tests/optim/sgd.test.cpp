#include <fluxion/optim/schedules.hpp>
#include <fluxion/optim/sgd.hpp>

#include "reference.hpp"

namespace {

/// Keras's SGD.update_step, one element at a time, with the learning rate of each step.
template <class T>
std::vector<std::vector<T>> naive_sgd(std::vector<T> w, const std::vector<std::vector<T>>& grads,
                                      const std::vector<double>& lrs, double momentum_d, bool nesterov,
                                      std::vector<T>* momentum_out = nullptr) {
  const T momentum = static_cast<T>(momentum_d);
  std::vector<T> m(w.size(), T(0));
  std::vector<std::vector<T>> out;
  for (std::size_t s = 0; s < grads.size(); ++s) {
    const T lr = static_cast<T>(lrs[s]);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const T g = grads[s][i];
      if (momentum_d == 0) {
        w[i] -= g * lr;
      } else {
        m[i] = m[i] * momentum - g * lr;
        w[i] += nesterov ? m[i] * momentum - g * lr : m[i];
      }
    }
    out.push_back(w);
  }
  if (momentum_out) *momentum_out = m;
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("sgd: plain, momentum and nesterov follow Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 1);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 10);
  struct config {
    double momentum;
    bool nesterov;
  };
  for (config c : {config{0.0, false}, config{0.9, false}, config{0.9, true}, config{0.5, true}}) {
    CAPTURE(c.momentum);
    CAPTURE(c.nesterov);
    fx::optim::sgd opt{{.learning_rate = 0.1, .momentum = c.momentum, .nesterov = c.nesterov}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "dense/kernel"};
    const auto got = optim_test::run(opt, w, grads);
    std::vector<T> m;
    optim_test::check_steps(got, naive_sgd(w0, grads, std::vector<double>(grads.size(), 0.1), c.momentum, c.nesterov, &m));
    CHECK(opt.iterations() == optim_test::steps);
    if (c.momentum == 0) {
      CHECK(opt.slot_variables<T, fx::cpu>().empty());
    } else {
      const auto slots = opt.slot_variables<T, fx::cpu>();
      REQUIRE(slots.size() == 1);
      CHECK(slots[0].first == "dense/kernel/momentum");
      CHECK(!slots[0].second->trainable());
      test::check_close(slots[0].second->peek().to_vector(), m, optim_test::rtol<T>(), 1e-7);
    }
  }
}

TEST_CASE_TEMPLATE("sgd: a 2-d variable and a schedule", T, float, double) {
  // Steps 0 and 1 run at 0.5 (step <= 1), step 2 at 0.1, step 3 at 0.01. The learning rate changes
  // between steps: Keras's velocity keeps the rate of each past step.
  const auto w0 = optim_test::random_vector<T>(12, 2);
  const auto grads = optim_test::random_gradients<T>(12, 20);
  fx::optim::sgd opt{{.learning_rate = fx::optim::piecewise_constant({1, 2}, {0.5, 0.1, 0.01}), .momentum = 0.8}};
  fx::variable<T> w{fx::from_vector(w0, {3, 4}), "w"};
  const auto got = optim_test::run(opt, w, grads);
  CHECK(w.shape() == fx::shape{3, 4});
  optim_test::check_steps(got, naive_sgd(w0, grads, {0.5, 0.5, 0.1, 0.01}, 0.8, false));
}

TEST_CASE("sgd: Keras's defaults and hyperparameter checks") {
  fx::optim::sgd opt;
  CHECK(opt.name() == "sgd");
  CHECK(opt.learning_rate() == 0.01);
  CHECK(opt.momentum() == 0.0);
  CHECK(!opt.nesterov());
  CHECK(opt.weight_decay() == 0.0);
  CHECK(opt.slot_specs().empty());
  fx::optim::sgd lr_only{0.25f};
  CHECK(lr_only.learning_rate() == 0.25);
  CHECK(fx::optim::sgd{{.momentum = 0.9}}.slot_specs().at(0).name == "momentum");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::sgd bad{-0.1}; },
                                                "sgd: learning_rate = -0.1 must be finite and non-negative");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::sgd bad{{.momentum = 1.5}}; },
                                                "sgd: momentum = 1.5 is not in [0, 1]");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::sgd bad{{.weight_decay = -1}}; },
                                                "sgd: weight_decay = -1 must be finite and non-negative");
}
