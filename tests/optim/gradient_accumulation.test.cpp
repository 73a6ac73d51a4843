// Gradient accumulation (every optimizer's gradient_accumulation_steps, Keras's): k calls with the
// gradients of k batches of b examples update the variables exactly as one call with the gradient
// of the k * b examples would, for every optimizer, with schedules, weight decay, clipping and the
// moving average; between updates only the accumulators change. The reference is the same
// optimizer without accumulation, given the whole batch's gradient, computed by a naive loop.
#include <fluxion/optim.hpp>
#include <fluxion/tensor/creation.hpp>

#include "reference.hpp"

#include <functional>
#include <memory>
#include <string>

namespace fx = fluxion;

namespace {

constexpr fx::index_t inputs = 5, outputs = 3;
constexpr int micro = 4, cycle = 3, update_count = 4;
constexpr int examples = micro * cycle * update_count;

/// A linear model y = x w + b and a mean squared error: its gradients, by a naive loop, over the
/// examples [begin, end) of x (examples x inputs) and y (examples x outputs).
struct linear_problem {
  std::vector<double> x = optim_test::random_vector<double>(examples * inputs, 11);
  std::vector<double> y = optim_test::random_vector<double>(examples * outputs, 12);

  std::vector<fx::tensor<double>> gradients(const fx::variable<double>& w, const fx::variable<double>& b, int begin,
                                            int end) const {
    const auto wv = w.peek().to_vector(), bv = b.peek().to_vector();
    std::vector<double> gw(wv.size(), 0), gb(bv.size(), 0);
    const double scale = 2.0 / static_cast<double>((end - begin) * outputs);
    for (int e = begin; e < end; ++e)
      for (fx::index_t o = 0; o < outputs; ++o) {
        double r = bv[o] - y[e * outputs + o];
        for (fx::index_t i = 0; i < inputs; ++i) r += x[e * inputs + i] * wv[i * outputs + o];
        for (fx::index_t i = 0; i < inputs; ++i) gw[i * outputs + o] += scale * r * x[e * inputs + i];
        gb[o] += scale * r;
      }
    return {fx::from_vector(gw, {inputs, outputs}), fx::from_vector(gb, {outputs})};
  }
};

using factory = std::function<std::unique_ptr<fx::optim::optimizer>(std::int64_t steps)>;

/// An optimizer of type Opt whose options `configure` sets, with `steps` of accumulation.
template <class Opt, class Configure>
factory make(Configure configure) {
  return [configure](std::int64_t steps) {
    typename Opt::options o;
    configure(o);
    o.gradient_accumulation_steps = steps;
    return std::unique_ptr<fx::optim::optimizer>(std::make_unique<Opt>(o));
  };
}

/// Every optimizer, most with a schedule, decoupled weight decay, a kind of clipping or the moving
/// average: each of them must see the update count, not the call count.
std::vector<std::pair<std::string, factory>> optimizers() {
  const fx::optim::schedule decay = fx::optim::exponential_decay(0.1, 2, 0.5);
  return {
      {"sgd, Nesterov, a schedule, weight decay, global_clipnorm",
       make<fx::optim::sgd>([=](auto& o) {
         o.learning_rate = decay;
         o.momentum = 0.9;
         o.nesterov = true;
         o.weight_decay = 0.01;
         o.global_clipnorm = 0.5;
       })},
      {"adam, amsgrad, the moving average with overwrites, clipnorm", make<fx::optim::adam>([](auto& o) {
         o.learning_rate = 0.05;
         o.amsgrad = true;
         o.use_ema = true;
         o.ema_momentum = 0.8;
         o.ema_overwrite_frequency = 3;
         o.clipnorm = 0.3;
       })},
      {"adamw, a schedule", make<fx::optim::adamw>([=](auto& o) {
         o.learning_rate = decay;
         o.weight_decay = 0.1;
       })},
      {"rmsprop, centered, momentum, clipvalue", make<fx::optim::rmsprop>([](auto& o) {
         o.learning_rate = 0.01;
         o.centered = true;
         o.momentum = 0.5;
         o.clipvalue = 0.05;
       })},
      {"adagrad", make<fx::optim::adagrad>([](auto& o) { o.learning_rate = 0.1; })},
      {"adadelta", make<fx::optim::adadelta>([](auto& o) { o.learning_rate = 1.0; })},
      {"adamax, the moving average", make<fx::optim::adamax>([](auto& o) {
         o.learning_rate = 0.05;
         o.use_ema = true;
       })},
      {"nadam, a schedule", make<fx::optim::nadam>([=](auto& o) { o.learning_rate = decay; })},
      {"lion", make<fx::optim::lion>([](auto& o) { o.learning_rate = 0.01; })},
  };
}

}  // namespace

TEST_CASE("gradient_accumulation_steps: k calls of b examples train as one call of k * b, for every optimizer") {
  const linear_problem p;
  const auto w0 = optim_test::random_vector<double>(inputs * outputs, 21);
  const auto b0 = optim_test::random_vector<double>(outputs, 22);
  for (const auto& [name_, make_optimizer] : optimizers()) {
    const auto& name = name_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(name);
    const auto accumulating = make_optimizer(cycle);
    const auto whole = make_optimizer(0);
    CHECK(accumulating->gradient_accumulation_steps() == cycle);
    CHECK(whole->gradient_accumulation_steps() == 0);
    fx::variable<double> w{fx::from_vector(w0, {inputs, outputs}), "w"}, b{fx::from_vector(b0, {outputs}), "b"};
    fx::variable<double> w_ref{fx::from_vector(w0, {inputs, outputs}), "w"}, b_ref{fx::from_vector(b0, {outputs}), "b"};
    const std::vector<fx::variable<double>*> vars{&w, &b}, ref_vars{&w_ref, &b_ref};
    for (int u = 0; u < update_count; ++u) {
      CAPTURE(u);
      CHECK(accumulating->learning_rate() == whole->learning_rate());
      // The reference: one call with the gradient of the cycle's k * b examples.
      const int first = u * cycle * micro;
      whole->apply_gradients(p.gradients(w_ref, b_ref, first, first + cycle * micro), ref_vars);
      std::vector<double> sum_w(w0.size(), 0), sum_b(b0.size(), 0);
      for (int m = 0; m < cycle; ++m) {
        CAPTURE(m);
        const auto before_w = w.peek().to_vector(), before_b = b.peek().to_vector();
        const auto g = p.gradients(w, b, first + m * micro, first + (m + 1) * micro);
        accumulating->apply_gradients(g, vars);
        CHECK(accumulating->iterations() == u * cycle + m + 1);
        if (m + 1 < cycle) {
          // Between updates: the variables stay, the accumulators hold the sum of the gradients.
          CHECK(accumulating->updates() == u);
          CHECK(w.peek().to_vector() == before_w);
          CHECK(b.peek().to_vector() == before_b);
          const auto gw = g[0].to_vector(), gb = g[1].to_vector();
          for (std::size_t i = 0; i < sum_w.size(); ++i) sum_w[i] += gw[i];
          for (std::size_t i = 0; i < sum_b.size(); ++i) sum_b[i] += gb[i];
          test::check_close(accumulating->get_slot(w, "gradient_accumulator")->peek().to_vector(), sum_w, 1e-14, 1e-15);
          test::check_close(accumulating->get_slot(b, "gradient_accumulator")->peek().to_vector(), sum_b, 1e-14, 1e-15);
        } else {
          CHECK(accumulating->updates() == u + 1);
          CHECK(accumulating->get_slot(w, "gradient_accumulator")->peek().to_vector() == std::vector<double>(w0.size(), 0.0));
        }
      }
      CHECK(whole->updates() == u + 1);
      test::check_close(w.peek().to_vector(), w_ref.peek().to_vector(), 1e-12, 1e-13);
      test::check_close(b.peek().to_vector(), b_ref.peek().to_vector(), 1e-12, 1e-13);
      // Every slot of the reference (moments, averages) is the accumulating optimizer's too.
      for (const auto& [slot_name_, slot] : whole->slot_variables<double, fx::cpu>()) {
        const auto& slot_name = slot_name_;  // clang 14 cannot capture a structured binding (CAPTURE)
        CAPTURE(slot_name);
        const std::string kind = slot_name.substr(slot_name.find('/') + 1);
        const auto* mine = accumulating->get_slot(slot_name.starts_with("w/") ? w : b, kind);
        REQUIRE(mine != nullptr);
        test::check_close(mine->peek().to_vector(), slot->peek().to_vector(), 1e-12, 1e-13);
      }
    }
    // The training moved the weights: the comparison is not between two untouched models.
    CHECK(w.peek().to_vector() != w0);
    CHECK(accumulating->iterations() == cycle * update_count);
    CHECK(whole->iterations() == update_count);
    CHECK(accumulating->updates() == update_count);
  }
}

TEST_CASE("gradient_accumulation_steps: the accumulator is the last slot; 0 and 1 update at every call") {
  fx::variable<float> w{fx::tensor<float>{1.f, 2.f, 3.f}, "w"};
  fx::optim::adam opt{{.learning_rate = 0.1, .use_ema = true, .gradient_accumulation_steps = 2}};
  const auto specs = opt.slot_specs();
  REQUIRE(specs.size() == 4);
  CHECK(specs[2].name == "average");
  CHECK(specs[3].name == "gradient_accumulator");
  opt.apply_gradients({fx::tensor<float>{0.5f, -1.f, 2.f}}, {w});
  const auto slots = opt.slot_variables<float, fx::cpu>();
  REQUIRE(slots.size() == 4);
  CHECK(slots[3].first == "w/gradient_accumulator");
  CHECK(slots[3].second->peek().to_vector() == std::vector<float>{0.5f, -1.f, 2.f});
  CHECK(!slots[3].second->trainable());
  CHECK(w.peek().to_vector() == std::vector<float>{1.f, 2.f, 3.f});

  for (std::int64_t steps : {0, 1}) {
    CAPTURE(steps);
    fx::variable<float> v{fx::tensor<float>{1.f, 2.f}, "v"};
    fx::optim::sgd every{{.learning_rate = 0.5, .gradient_accumulation_steps = steps}};
    every.apply_gradients({fx::tensor<float>{1.f, -2.f}}, {v});
    CHECK(v.peek().to_vector() == std::vector<float>{0.5f, 3.f});
    CHECK(every.updates() == 1);
    CHECK(every.slot_specs().empty());
  }
}

TEST_CASE("gradient_accumulation_steps: a negative count is refused; a bad call changes no accumulator") {
  CHECK_THROWS_WITH_AS(fx::optim::sgd({.learning_rate = 0.1, .gradient_accumulation_steps = -2}),
                       "sgd: gradient_accumulation_steps = -2 is negative (0 or 1 updates the variables at every "
                       "apply_gradients)",
                       fx::invalid_argument);
  fx::variable<double> w{fx::tensor<double>{1, 2}, "w"}, b{fx::tensor<double>{3}, "b"};
  fx::optim::rmsprop opt{{.learning_rate = 0.1, .gradient_accumulation_steps = 3}};
  opt.apply_gradients({fx::tensor<double>{1, 1}, fx::tensor<double>{1}}, {w, b});
  // The second gradient has the wrong shape: the checks run before anything is added.
  CHECK_THROWS_AS(opt.apply_gradients({fx::tensor<double>{1, 1}, fx::tensor<double>{1, 1}}, {w, b}), fx::shape_error);
  CHECK(opt.iterations() == 1);
  CHECK(opt.get_slot(w, "gradient_accumulator")->peek().to_vector() == std::vector<double>{1, 1});
  CHECK(opt.get_slot(b, "gradient_accumulator")->peek().to_vector() == std::vector<double>{1});
}

TEST_CASE("gradient_accumulation_steps: an accumulator read elsewhere keeps its values; the update swaps in new buffers") {
  fx::variable<double> w{fx::tensor<double>{1, 2}, "w"};
  fx::optim::sgd opt{{.learning_rate = 1.0, .gradient_accumulation_steps = 2}};
  opt.apply_gradients({fx::tensor<double>{1, 3}}, {w});
  const fx::tensor<double> held = opt.get_slot(w, "gradient_accumulator")->peek();
  opt.apply_gradients({fx::tensor<double>{3, 1}}, {w});
  CHECK(held.to_vector() == std::vector<double>{1, 3});  // tensors read from a variable never change
  CHECK(w.peek().to_vector() == std::vector<double>{-1, 0});  // w - (1 + 3, 3 + 1) / 2
  CHECK(opt.get_slot(w, "gradient_accumulator")->peek().to_vector() == std::vector<double>{0, 0});
}
