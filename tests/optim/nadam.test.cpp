#include <fluxion/optim/nadam.hpp>

#include "reference.hpp"

#include <cmath>

namespace {

/// Keras's Nadam: _backend_update_step's u_product, then update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_nadam(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr,
                                        double beta_1, double beta_2, double epsilon, std::size_t first_step = 1) {
  std::vector<double> m(w.size(), 0), v(w.size(), 0);
  double u_product = 1;
  for (std::size_t s = 1; s < first_step; ++s) u_product *= beta_1 * (1 - 0.5 * std::pow(0.96, 0.004 * static_cast<double>(s)));
  std::vector<std::vector<T>> out;
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const double t = static_cast<double>(first_step + k);
    const double u_t = beta_1 * (1 - 0.5 * std::pow(0.96, 0.004 * t));
    const double u_next = beta_1 * (1 - 0.5 * std::pow(0.96, 0.004 * (t + 1)));
    u_product *= u_t;
    const auto& g = grads[k];
    for (std::size_t i = 0; i < w.size(); ++i) {
      m[i] += (g[i] - m[i]) * (1 - beta_1);
      v[i] += (static_cast<double>(g[i]) * g[i] - v[i]) * (1 - beta_2);
      const double m_hat = u_next * m[i] / (1 - u_product * u_next) + (1 - u_t) * g[i] / (1 - u_product);
      const double v_hat = v[i] / (1 - std::pow(beta_2, t));
      w[i] = static_cast<T>(w[i] - m_hat * lr / (std::sqrt(v_hat) + epsilon));
    }
    out.push_back(w);
  }
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("nadam: follows Keras's formula, also from a restored iteration count", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 3);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 50);
  fx::optim::nadam opt{{.learning_rate = 0.02, .beta_1 = 0.85, .beta_2 = 0.99, .epsilon = 1e-3}};
  fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
  optim_test::check_steps(optim_test::run(opt, w, grads), naive_nadam(w0, grads, 0.02, 0.85, 0.99, 1e-3));
  const auto slots = opt.slot_variables<T, fx::cpu>();
  REQUIRE(slots.size() == 2);
  CHECK(slots[0].first == "w/momentum");
  CHECK(slots[1].first == "w/velocity");
  // The momentum product is a function of the step: a fresh optimizer set to iteration 100 (as a
  // checkpoint restores it) continues as Keras's would from step 101, and so does this one after
  // jumping back.
  for (fx::optim::optimizer* o : std::initializer_list<fx::optim::optimizer*>{&opt, nullptr}) {
    fx::optim::nadam fresh{{.learning_rate = 0.02, .beta_1 = 0.85, .beta_2 = 0.99, .epsilon = 1e-3}};
    fx::optim::optimizer& target = o ? *o : fresh;
    fx::variable<T> w2{fx::from_vector(w0, {optim_test::size}), "w2"};
    target.set_iterations(100);
    optim_test::check_steps(optim_test::run(target, w2, grads), naive_nadam(w0, grads, 0.02, 0.85, 0.99, 1e-3, 101));
  }
}

TEST_CASE("nadam: Keras's defaults and hyperparameter checks") {
  fx::optim::nadam opt;
  CHECK(opt.name() == "nadam");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.beta_1() == 0.9);
  CHECK(opt.beta_2() == 0.999);
  CHECK(opt.epsilon() == 1e-7);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::nadam bad{{.beta_2 = -0.1}}; },
                                                "nadam: beta_2 = -0.1 is not in [0, 1)");
}
