#include <fluxion/optim/adagrad.hpp>

#include "reference.hpp"

namespace {

/// Keras's Adagrad.update_step, one element at a time.
template <class T>
std::vector<std::vector<T>> naive_adagrad(std::vector<T> w, const std::vector<std::vector<T>>& grads, double lr_d,
                                          double initial, double epsilon_d, std::vector<T>* accumulator_out) {
  const T lr = static_cast<T>(lr_d), epsilon = static_cast<T>(epsilon_d);
  std::vector<T> a(w.size(), static_cast<T>(initial));
  std::vector<std::vector<T>> out;
  for (const auto& g : grads) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      a[i] += g[i] * g[i];
      w[i] -= lr * g[i] / std::sqrt(a[i] + epsilon);
    }
    out.push_back(w);
  }
  *accumulator_out = a;
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("adagrad: follows Keras's formula", T, float, double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 3);
  const auto grads = optim_test::random_gradients<T>(optim_test::size, 30);
  struct config {
    double initial, epsilon;
  };
  for (config c : {config{0.1, 1e-7}, config{0.0, 1e-3}, config{1.0, 0.0}}) {
    CAPTURE(c.initial);
    CAPTURE(c.epsilon);
    fx::optim::adagrad opt{{.learning_rate = 0.1, .initial_accumulator_value = c.initial, .epsilon = c.epsilon}};
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    const auto got = optim_test::run(opt, w, grads);
    std::vector<T> a;
    optim_test::check_steps(got, naive_adagrad(w0, grads, 0.1, c.initial, c.epsilon, &a));
    const auto slots = opt.slot_variables<T, fx::cpu>();
    REQUIRE(slots.size() == 1);
    CHECK(slots[0].first == "w/accumulator");
    test::check_close(slots[0].second->peek().to_vector(), a, optim_test::rtol<T>(), 1e-7);
  }
}

TEST_CASE("adagrad: Keras's defaults; the accumulator starts at initial_accumulator_value") {
  fx::optim::adagrad opt;
  CHECK(opt.name() == "adagrad");
  CHECK(opt.learning_rate() == 0.001);
  CHECK(opt.initial_accumulator_value() == 0.1);
  CHECK(opt.epsilon() == 1e-7);
  fx::variable<float> w{fx::tensor<float>{{1.f, 2.f}, {3.f, 4.f}}, "w"};
  opt.build(std::vector<fx::variable<float>*>{&w});
  auto* a = opt.get_slot(w, "accumulator");
  REQUIRE(a != nullptr);
  CHECK(a->shape() == fx::shape{2, 2});
  CHECK(a->peek().to_vector() == std::vector<float>(4, 0.1f));
  CHECK(opt.iterations() == 0);
  CHECK(w.version() == 0);
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adagrad bad{{.epsilon = -1e-7}}; },
                                                "adagrad: epsilon = -1e-07 must be finite and non-negative");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adagrad bad{{.initial_accumulator_value = -1}}; },
                                                "adagrad: initial_accumulator_value = -1 must be finite and non-negative");
}
