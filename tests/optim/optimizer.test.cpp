// The machinery every optimizer shares (optim/optimizer.hpp): checks, slots, the counter, the
// fused loop's parallel path, and training through a gradient tape.
#include <fluxion/optim/adam.hpp>
#include <fluxion/optim/sgd.hpp>

#include "reference.hpp"

namespace {

struct model_state {
  std::vector<float> kernel, bias;
  std::uint64_t kernel_version, bias_version;
};

model_state snapshot(const fx::variable<float>& kernel, const fx::variable<float>& bias) {
  return {kernel.peek().to_vector(), bias.peek().to_vector(), kernel.version(), bias.version()};
}

void check_unchanged(const model_state& before, const fx::variable<float>& kernel, const fx::variable<float>& bias,
                     fx::optim::optimizer& opt) {
  CHECK(kernel.peek().to_vector() == before.kernel);
  CHECK(bias.peek().to_vector() == before.bias);
  CHECK(kernel.version() == before.kernel_version);
  CHECK(bias.version() == before.bias_version);
  CHECK(opt.iterations() == 0);
  CHECK(opt.slot_variables<float, fx::cpu>().empty());
}

}  // namespace

TEST_CASE("apply_gradients: every bad call throws before anything changes, naming the variable") {
  fx::variable<float> kernel{test::random_tensor<float>({2, 3}, 1), "dense/kernel"};
  fx::variable<float> bias{test::random_tensor<float>({3}, 2), "dense/bias"};
  fx::optim::adam opt{0.1};
  const std::vector<fx::variable<float>*> vars{&bias, &kernel};  // bias first: it would be updated first
  const fx::tensor<float> good_bias = test::random_tensor<float>({3}, 3);
  const auto before = snapshot(kernel, bias);

  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias}, vars); },
      "apply_gradients: 1 gradients for 2 variables; pass one gradient per variable, in the same order");
  check_unchanged(before, kernel, bias, opt);

  // What the tape returns for a variable the loss does not depend on: none, TensorFlow's None.
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, fx::tensor<float>::none()}, vars); },
      "apply_gradients: the gradient for variable 'dense/kernel' of shape (2, 3) is none (TensorFlow's None): the "
      "tape never saw variable 'dense/kernel' read");
  check_unchanged(before, kernel, bias, opt);
  // An empty tensor of shape (0,) is refused the same way.
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, fx::tensor<float>{}}, vars); },
      "apply_gradients: the gradient for variable 'dense/kernel' of shape (2, 3) is empty (shape (0,)): the tape "
      "never saw variable 'dense/kernel' read: the loss does not depend on it, it was read before the tape "
      "started recording, or the code that ran the model was compiled with FLUXION_MAX_DERIVATIVE_ORDER=0 "
      "(autodiff off)");
  check_unchanged(before, kernel, bias, opt);

  test::check_throws_with<fx::shape_error>(
      [&] { opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, test::random_tensor<float>({3, 2}, 4)}, vars); },
      "apply_gradients: the gradient for variable 'dense/kernel' has shape (3, 2), but the variable has shape (2, 3)");
  check_unchanged(before, kernel, bias, opt);

  test::check_throws_with<fx::invalid_argument>(
      [&] {
        opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, good_bias},
                            std::vector<fx::variable<float>*>{&bias, nullptr});
      },
      "apply_gradients: variables[1] is a null pointer");
  check_unchanged(before, kernel, bias, opt);

  test::check_throws_with<fx::invalid_argument>(
      [&] {
        opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, good_bias},
                            std::vector<fx::variable<float>*>{&bias, &bias});
      },
      "apply_gradients: variable 'dense/bias' appears more than once");
  check_unchanged(before, kernel, bias, opt);

  fx::variable<float> unnamed{fx::tensor<float>{1.f}};
  test::check_throws_with<fx::shape_error>(
      [&] {
        opt.apply_gradients(std::vector<fx::tensor<float>>{fx::tensor<float>{1.f, 2.f}},
                            std::vector<fx::variable<float>*>{&unnamed});
      },
      "apply_gradients: the gradient for variables[0] (unnamed) has shape (2,), but the variable has shape (1,)");
  CHECK(unnamed.version() == 0);

  // The same calls, fixed, then succeed.
  opt.apply_gradients(std::vector<fx::tensor<float>>{good_bias, test::random_tensor<float>({2, 3}, 5)}, vars);
  CHECK(opt.iterations() == 1);
  CHECK(kernel.version() == 1);
  CHECK(bias.version() == 1);
  test::check_throws_with<fx::invalid_argument>([&] { opt.set_iterations(-1); },
                                                "set_iterations: n = -1 must be non-negative");
}

TEST_CASE("apply_gradients: non-trainable variables are skipped, an empty list is an error") {
  fx::variable<float> w{fx::tensor<float>{1.f, 2.f}, "w"};
  fx::variable<float> frozen{fx::tensor<float>{3.f, 4.f}, "frozen", /*trainable=*/false};
  fx::optim::sgd opt{{.learning_rate = 0.5, .momentum = 0.5}};
  // Most often a layer's trainable_variables() taken before its first call built them: every
  // step would then change nothing, silently (TensorFlow: "No gradients provided for any variable").
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients(std::vector<fx::tensor<float>>{}, std::vector<fx::variable<float>*>{}); },
      "apply_gradients: no variables to update (the lists are empty), so this step would train nothing. A layer "
      "used alone makes its variables on its first call (or build(shape)): take trainable_variables() after that");
  CHECK(opt.iterations() == 0);
  // The frozen variable's gradient is not even looked at (the tape gives none for it).
  opt.apply_gradients(std::vector<fx::tensor<float>>{fx::tensor<float>{1.f, 1.f}, fx::tensor<float>{}},
                      std::vector<fx::variable<float>*>{&w, &frozen});
  CHECK(opt.iterations() == 1);
  CHECK(w.peek().to_vector() == std::vector<float>{0.5f, 1.5f});
  CHECK(frozen.peek().to_vector() == std::vector<float>{3.f, 4.f});
  CHECK(frozen.version() == 0);
  const auto slots = opt.slot_variables<float, fx::cpu>();
  REQUIRE(slots.size() == 1);
  CHECK(slots[0].first == "w/momentum");
  CHECK(opt.get_slot(frozen, "momentum") == nullptr);
  test::check_throws_with<fx::invalid_argument>([&] { opt.get_slot(w, "velocity"); },
                                                "get_slot: sgd has no slot named 'velocity'");
}

TEST_CASE("slots: float and double variables in one optimizer, named <variable>/<slot>, in creation order") {
  fx::variable<float> a{fx::tensor<float>{1.f}, "a"};
  fx::variable<double> b{fx::tensor<double>{{1.0, 2.0}}, "b"};
  fx::variable<float> c{fx::tensor<float>{1.f, 2.f, 3.f}, "c"};
  fx::optim::adam opt{{.amsgrad = true}};
  opt.build(std::vector<fx::variable<float>*>{&c});
  opt.apply_gradients(std::vector<fx::tensor<double>>{fx::tensor<double>{{0.5, 0.5}}}, std::vector<fx::variable<double>*>{&b});
  opt.apply_gradients(std::vector<fx::tensor<float>>{fx::tensor<float>{1.f}, fx::tensor<float>{1.f, 1.f, 1.f}},
                      std::vector<fx::variable<float>*>{&a, &c});
  CHECK(opt.iterations() == 2);
  std::vector<std::string> names;
  for (auto& [name, slot] : opt.slot_variables<float, fx::cpu>()) {
    names.push_back(name);
    CHECK(!slot->trainable());
  }
  CHECK(names == std::vector<std::string>{"c/momentum", "c/velocity", "c/velocity_hat", "a/momentum", "a/velocity",
                                          "a/velocity_hat"});
  const auto doubles = opt.slot_variables<double, fx::cpu>();
  REQUIRE(doubles.size() == 3);
  CHECK(doubles[0].first == "b/momentum");
  CHECK(doubles[0].second->shape() == fx::shape{1, 2});
  // Adam's first momentum is (1 - beta_1) * g.
  CHECK(doubles[0].second->peek()(0, 1) == doctest::Approx(0.05).epsilon(1e-12));
  // A slot can be written, as a checkpoint restore does, and the next step reads it.
  auto* m = opt.get_slot(a, "momentum");
  REQUIRE(m != nullptr);
  m->assign(fx::tensor<float>{0.f});
  CHECK(opt.get_slot(a, "momentum")->peek()(0) == 0.f);
  // The optimizer moves with its slots.
  fx::optim::adam moved = std::move(opt);
  CHECK(moved.iterations() == 2);
  CHECK(moved.slot_variables<float, fx::cpu>().size() == 6);
}

TEST_CASE("the update is one fused pass: into fresh buffers while anything else holds the old ones, else in place") {
  fx::variable<float> w{test::random_tensor<float>({64, 64}, 1), "w"};
  fx::variable<float> twin{test::random_tensor<float>({64, 64}, 1), "twin"};
  fx::optim::adam opt{0.01}, twin_opt{0.01};
  const std::vector<fx::variable<float>*> vars{&w}, twin_vars{&twin};
  const std::vector<fx::tensor<float>> g{test::random_tensor<float>({64, 64}, 2)};
  opt.apply_gradients(g, vars);  // creates the two slots
  twin_opt.apply_gradients(g, twin_vars);

  // A tensor read from w is alive: w's new value goes to a fresh buffer; the slots, which nothing
  // else holds, are updated in place.
  const fx::tensor<float> earlier = w.peek();
  const auto earlier_values = earlier.to_vector();
  auto allocations = fx::memory::stats().allocations;
  opt.apply_gradients(g, vars);
  CHECK(fx::memory::stats().allocations - allocations == 1);
  CHECK(earlier.to_vector() == earlier_values);  // tensors read earlier never change
  CHECK(w.peek().id() != earlier.id());

  // Nothing else holds any buffer: no allocation, a new id, the same numbers as fresh buffers.
  twin_opt.apply_gradients(g, twin_vars);
  const std::uint64_t id = w.peek().id();
  const float* data = w.peek().data();
  allocations = fx::memory::stats().allocations;
  opt.apply_gradients(g, vars);
  CHECK(fx::memory::stats().allocations - allocations == 0);
  const fx::tensor<float> twin_earlier = twin.peek();  // keeps twin's update out of place
  twin_opt.apply_gradients(g, twin_vars);
  CHECK(twin.peek().data() != twin_earlier.data());
  CHECK(w.peek().data() == data);
  CHECK(w.peek().id() != id);
  CHECK(w.peek().to_vector() == twin.peek().to_vector());
  CHECK(opt.get_slot(w, "velocity")->peek().to_vector() == twin_opt.get_slot(twin, "velocity")->peek().to_vector());
}

TEST_CASE("large variables: the thread pool splits the loop, and the result does not depend on the thread count") {
  const fx::index_t n = 100003;  // four tasks of 32768 and a scalar tail
  const auto w0 = optim_test::random_vector<double>(n, 1);
  const auto grads = optim_test::random_gradients<double>(n, 10);
  auto train = [&](int threads) {
    fx::set_num_threads(threads);
    fx::optim::adam opt{{.learning_rate = 0.1, .amsgrad = true}};
    fx::variable<double> w{fx::from_vector(w0, {n}), "w"};
    return optim_test::run(opt, w, grads).back();
  };
  const int saved = fx::get_num_threads();
  const auto one = train(1), two = train(2);
  fx::set_num_threads(saved);
  CHECK(one == two);
  // Against a naive loop over every element.
  std::vector<double> w = w0, m(n, 0.0), v(n, 0.0), v_hat(n, 0.0);
  for (int s = 0; s < optim_test::steps; ++s) {
    const double t = s + 1, alpha = 0.1 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (fx::index_t i = 0; i < n; ++i) {
      const double g = grads[s][i];
      m[i] += (g - m[i]) * (1 - 0.9);
      v[i] += (g * g - v[i]) * (1 - 0.999);
      v_hat[i] = std::max(v_hat[i], v[i]);
      w[i] -= m[i] * alpha / (std::sqrt(v_hat[i]) + 1e-7);
    }
  }
  test::check_close(two, w, 1e-12, 1e-14);
}

TEST_CASE("training through a gradient tape: the tape's gradients go straight in") {
  fx::variable<float> w{fx::tensor<float>{1.f, -2.f, 3.f}, "w"};
  fx::variable<float> unused{fx::tensor<float>{5.f}, "unused"};
  fx::optim::sgd opt{0.25};
  std::vector<fx::variable<float>*> vars{&w};
  for (int step = 0; step < 3; ++step) {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::reduce_sum(w * w);  // gradient 2 w: w shrinks by half each step
    opt.apply_gradients(tape.gradient(loss, vars), vars);
  }
  CHECK(w.peek().to_vector() == std::vector<float>{0.125f, -0.25f, 0.375f});
  CHECK(opt.iterations() == 3);
  // A variable the loss does not read gets an empty gradient, and the error says why.
  std::vector<fx::variable<float>*> both{&w, &unused};
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(w * w);
  auto grads = tape.gradient(loss, both);
  test::check_throws_with<fx::invalid_argument>([&] { opt.apply_gradients(grads, both); },
                                                "the tape never saw variable 'unused' read");
  CHECK(w.peek().to_vector() == std::vector<float>{0.125f, -0.25f, 0.375f});
  CHECK(opt.iterations() == 3);
}

TEST_CASE("apply_gradients: braces of variables, as optimizer.apply_gradients(zip(grads, [w, b]))") {
  fx::variable<float> w{fx::tensor<float>{1.f, -2.f}, "w"};
  fx::variable<float> b{fx::tensor<float>{4.f}, "b"};
  fx::optim::sgd opt{0.25};
  {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::reduce_sum(w * w) + fx::reduce_sum(b * b);  // gradients 2 w and 2 b
    auto [dw, db] = tape.gradient(loss, {w, b});
    opt.apply_gradients({dw, db}, {w, b});
  }
  CHECK(w.peek().to_vector() == std::vector<float>{0.5f, -1.f});
  CHECK(b.peek().to_vector() == std::vector<float>{2.f});
  {
    fx::gradient_tape tape;
    fx::tensor<float> loss = fx::reduce_sum(w * w) + fx::reduce_sum(b * b);
    opt.apply_gradients(tape.gradient(loss, {w, b}), {&w, &b});  // pointers, as trainable_variables()
  }
  CHECK(w.peek().to_vector() == std::vector<float>{0.25f, -0.5f});
  CHECK(b.peek().to_vector() == std::vector<float>{1.f});
  CHECK(opt.iterations() == 2);
  // The same checks as with pointers: here a list of the wrong length.
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.apply_gradients({fx::tensor<float>{1.f, 1.f}}, {w, b}); }, "1 gradients for 2 variables");
  CHECK(opt.iterations() == 2);
}

TEST_CASE_TEMPLATE("use_ema: Keras's moving average of the weights, overwrite frequency and finalize_variable_values", T, float,
                   double) {
  const auto w0 = optim_test::random_vector<T>(optim_test::size, 5);
  std::vector<std::vector<T>> grads;
  for (unsigned s = 0; s < 7; ++s) grads.push_back(optim_test::random_vector<T>(optim_test::size, 80 + s));
  for (std::int64_t frequency : {std::int64_t{0}, std::int64_t{3}}) {
    CAPTURE(frequency);
    fx::optim::sgd opt{{.learning_rate = 0.1, .momentum = 0.5, .use_ema = true, .ema_momentum = 0.9,
                        .ema_overwrite_frequency = frequency}};
    CHECK(opt.use_ema());
    CHECK(opt.ema_momentum() == 0.9);
    fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
    // Keras's optimizer, element by element: SGD with momentum (Keras's form), then the average
    // (the variable itself at the first step), then every `frequency` steps the overwrite.
    std::vector<double> want_w(w0.begin(), w0.end()), velocity(w0.size(), 0), average(w0.size(), 0);
    for (std::size_t step = 0; step < grads.size(); ++step) {
      CAPTURE(step);
      optim_test::run(opt, w, {grads[step]});
      const double momentum = step == 0 ? 0 : 0.9;
      const bool overwrite = frequency > 0 && static_cast<std::int64_t>(step + 1) % frequency == 0;
      for (std::size_t i = 0; i < w0.size(); ++i) {
        velocity[i] = 0.5 * velocity[i] - 0.1 * grads[step][i];
        want_w[i] += velocity[i];
        average[i] = momentum * average[i] + (1 - momentum) * want_w[i];
        if (overwrite) want_w[i] = average[i];
      }
      test::check_close(w.peek().to_vector(), std::vector<T>(want_w.begin(), want_w.end()), 10 * optim_test::rtol<T>(), 1e-6);
      test::check_close(opt.get_slot(w, "average")->peek().to_vector(), std::vector<T>(average.begin(), average.end()),
                        10 * optim_test::rtol<T>(), 1e-6);
    }
    const auto slots = opt.template slot_variables<T, fx::cpu>();
    REQUIRE(slots.size() == 2);
    CHECK(slots[0].first == "w/momentum");
    CHECK(slots[1].first == "w/average");
    opt.finalize_variable_values(std::vector<fx::variable<T>*>{&w});
    CHECK(w.peek().to_vector() == opt.get_slot(w, "average")->peek().to_vector());
  }
  // Without use_ema there is no average, and finalize_variable_values changes nothing.
  fx::optim::adam plain{0.1};
  fx::variable<T> w{fx::from_vector(w0, {optim_test::size}), "w"};
  optim_test::run(plain, w, {grads[0]});
  const auto before = w.peek().to_vector();
  plain.finalize_variable_values(std::vector<fx::variable<T>*>{&w});
  CHECK(w.peek().to_vector() == before);
  CHECK(plain.template slot_variables<T, fx::cpu>().size() == 2);
}

TEST_CASE("use_ema: hyperparameter checks") {
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adam bad{{.use_ema = true, .ema_momentum = 1.5}}; },
                                                "adam: ema_momentum = 1.5 is not in [0, 1]");
  test::check_throws_with<fx::invalid_argument>(
      [] { fx::optim::sgd bad{{.use_ema = true, .ema_overwrite_frequency = -2}}; },
      "sgd: ema_overwrite_frequency = -2 is negative (0 never overwrites the variables with their averages)");
}
