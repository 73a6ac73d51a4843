#include <fluxion/optim/adam.hpp>

#include "reference.hpp"

namespace {

/// Keras's Adam.update_step (and, with weight_decay, the base optimizer's _apply_weight_decay
/// first), one element at a time. `first_iteration` is the optimizer's iterations() before the
/// first step. alpha is computed in double and rounded to T, as fluxion documents: Keras's float32
/// 1 - 0.999f^t is 1.3e-5 off in relative terms, which would hide a real difference in the test.
template <class T>
std::vector<std::vector<T>> naive_adam(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr_d,
                                       double beta_1_d, double beta_2_d, double epsilon_d, bool amsgrad,
                                       double weight_decay_d, std::vector<std::vector<T>>& slots,
                                       std::int64_t first_iteration = 0) {
  const T lr = static_cast<T>(lr_d), epsilon = static_cast<T>(epsilon_d), weight_decay = static_cast<T>(weight_decay_d);
  std::vector<T> m(w.size(), T(0)), v(w.size(), T(0)), v_hat(w.size(), T(0));
  std::vector<std::vector<T>> out;
  std::int64_t iteration = first_iteration;
  for (const auto& g : grads) {
    const double local_step = static_cast<double>(iteration + 1);
    const T alpha = static_cast<T>(lr_d * std::sqrt(1 - std::pow(beta_2_d, local_step)) / (1 - std::pow(beta_1_d, local_step)));
    for (std::size_t i = 0; i < w.size(); ++i) {
      w[i] = w[i] - w[i] * weight_decay * lr;
      m[i] += (g[i] - m[i]) * static_cast<T>(1 - beta_1_d);
      v[i] += (g[i] * g[i] - v[i]) * static_cast<T>(1 - beta_2_d);
      T denominator_v = v[i];
      if (amsgrad) {
        v_hat[i] = std::max(v_hat[i], v[i]);
        denominator_v = v_hat[i];
      }
      w[i] -= m[i] * alpha / (std::sqrt(denominator_v) + epsilon);
    }
    out.push_back(w);
    ++iteration;
  }
  slots = {m, v};
  if (amsgrad) slots.push_back(v_hat);
  return out;
}

template <class T>
void check_slots(fx::optim::optimizer& opt, const std::vector<std::vector<T>>& want, const std::string& prefix,
                 const std::vector<std::string>& names) {
  const auto slots = opt.slot_variables<T, fx::cpu>();
  REQUIRE(slots.size() == names.size());
  for (std::size_t k = 0; k < slots.size(); ++k) {
    CHECK(slots[k].first == prefix + "/" + names[k]);
    test::check_close(slots[k].second->peek().to_vector(), want[k], optim_test::rtol<T>(), 1e-7);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("adam: with and without amsgrad, follows Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 5);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 50);
  for (bool amsgrad : {false, true}) {
    CAPTURE(amsgrad);
    fx::optim::adam opt{{.learning_rate = 0.1, .beta_1 = 0.8, .beta_2 = 0.9, .epsilon = 1e-3, .amsgrad = amsgrad}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "dense/kernel"};
    const auto got = optim_test::run(opt, w, grads);
    std::vector<std::vector<T>> slots;
    optim_test::check_steps(got, naive_adam(w0, grads, 0.1, 0.8, 0.9, 1e-3, amsgrad, 0.0, slots));
    check_slots(opt, slots, "dense/kernel",
                amsgrad ? std::vector<std::string>{"momentum", "velocity", "velocity_hat"}
                        : std::vector<std::string>{"momentum", "velocity"});
  }
}

TEST_CASE_TEMPLATE("adamw and adam with weight_decay: decoupled decay before the Adam step", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 6);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 60);
  std::vector<std::vector<T>> slots;
  const auto want = naive_adam(w0, grads, 0.05, 0.9, 0.999, 1e-7, false, 0.2, slots);
  {
    fx::optim::adamw opt{{.learning_rate = 0.05, .weight_decay = 0.2}};
    CHECK(opt.name() == "adamw");
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    optim_test::check_steps(optim_test::run(opt, w, grads), want);
    check_slots(opt, slots, "w", {"momentum", "velocity"});
  }
  {
    fx::optim::adam opt{{.learning_rate = 0.05, .weight_decay = 0.2}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    optim_test::check_steps(optim_test::run(opt, w, grads), want);
  }
  {  // the decay matters: without it the weights differ
    fx::optim::adam opt{0.05};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    const auto got = optim_test::run(opt, w, grads);
    CHECK(std::abs(got.back()[0] - want.back()[0]) > 1e-4);
  }
}

TEST_CASE_TEMPLATE("adam: the bias correction follows set_iterations", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 7);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 70);
  fx::optim::adam opt{{.learning_rate = 0.1, .beta_1 = 0.5, .beta_2 = 0.6}};
  opt.set_iterations(5);
  fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
  const auto got = optim_test::run(opt, w, grads);
  CHECK(opt.iterations() == 5 + optim_test::steps);
  std::vector<std::vector<T>> slots;
  optim_test::check_steps(got, naive_adam(w0, grads, 0.1, 0.5, 0.6, 1e-7, false, 0.0, slots, 5));
}

TEST_CASE("adam, adamw: Keras's defaults and hyperparameter checks") {
  fx::optim::adam opt;
  CHECK(opt.name() == "adam");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.beta_1() == 0.9);
  CHECK(opt.beta_2() == 0.999);
  CHECK(opt.epsilon() == 1e-7);
  CHECK(!opt.amsgrad());
  CHECK(opt.weight_decay() == 0.0);
  fx::optim::adamw w;
  CHECK(w.learning_rate() == 0.001);
  CHECK(w.weight_decay() == 0.004);
  CHECK(w.beta_1() == 0.9);
  CHECK(w.beta_2() == 0.999);
  CHECK(w.epsilon() == 1e-7);
  fx::optim::adam lr{1e-2};
  CHECK(lr.learning_rate() == 1e-2);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adam bad{{.beta_1 = 1.0}}; },
                                                "adam: beta_1 = 1 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adam bad{{.beta_2 = -0.1}}; },
                                                "adam: beta_2 = -0.1 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adam bad{{.epsilon = -1e-8}}; },
                                                "adam: epsilon = -1e-08 must be finite and non-negative");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adamw bad{{.beta_1 = 2}}; },
                                                "adamw: beta_1 = 2 is not in [0, 1)");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adamw bad{{.weight_decay = -0.1}}; },
                                                "adamw: weight_decay = -0.1 must be finite and non-negative");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adam bad{std::nan("")}; },
                                                "adam: learning_rate = nan must be finite and non-negative");
}
