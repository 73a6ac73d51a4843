// The fused cells' checks shared by tests/nn/lstm_cell.test.cpp and tests/nn/gru_cell.test.cpp: a
// model's output and gradients recorded by one tape (the fused sequence), a persistent tape, or
// nested tapes (the statements, the reference).
#pragma once

#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include <fluxion/fluxion.hpp>

#include "../test_util.hpp"

namespace recurrent_check {

namespace fx = fluxion;
using test::check_close;

enum class taping { one_shot, persistent, nested };

template <class T>
struct result {
  std::vector<T> output;
  std::vector<std::vector<T>> gradients;  // input, then each trainable variable
  std::size_t entries = 0;                // the differentiating tape's entries after the forward pass
};

/// The output of model(x) and the gradients of sum((y - 0.25)^2 + y) with respect to x and every
/// trainable variable, recorded as `how` says (nested: an outer persistent tape around the one
/// that differentiates, as for second derivatives).
template <class T, class Model>
result<T> run(Model& model, const fx::tensor<T>& x, taping how) {
  std::optional<fx::gradient_tape> outer;
  if (how == taping::nested) outer.emplace(fx::persistent);
  result<T> r;
  auto forward = [&](fx::gradient_tape& tape) {
    tape.watch(x);
    const fx::tensor<T> y = model(x, true);
    r.output = y.to_vector();
    r.entries = tape.entries();
    return fx::tensor<T>(fx::reduce_sum(fx::square(y - T(0.25)) + y));
  };
  std::vector<const fx::tensor<T>*> sources{&x};
  auto vars = model.trainable_variables();
  if (how == taping::persistent) {
    fx::gradient_tape tape{fx::persistent};
    const fx::tensor<T> loss = forward(tape);
    r.gradients.push_back(tape.gradient(loss, x).to_vector());
    for (auto& g : tape.gradient(loss, vars)) r.gradients.push_back(g.to_vector());
  } else {
    for (int pass = 0; pass < 2; ++pass) {  // a one-shot tape answers once: x, then the variables
      fx::gradient_tape tape;
      const fx::tensor<T> loss = forward(tape);
      if (pass == 0) r.gradients.push_back(tape.gradient(loss, x).to_vector());
      else
        for (auto& g : tape.gradient(loss, vars)) r.gradients.push_back(g.to_vector());
    }
  }
  return r;
}

template <class T>
void check_same(const result<T>& got, const result<T>& want, double rtol) {
  check_close(got.output, want.output, rtol, rtol);
  REQUIRE(got.gradients.size() == want.gradients.size());
  for (std::size_t i = 0; i < got.gradients.size(); ++i) {
    CAPTURE(i);
    check_close(got.gradients[i], want.gradients[i], rtol, rtol);
  }
}

/// The fused sequence (one tape, or a persistent one) against the statements (nested tapes): the
/// same output and gradients, one tape entry a layer instead of `per_step` a step for each of the
/// two recurrent layers, and the same output again without a tape.
template <class T, class Model>
void check_fused_model(Model& model, const fx::tensor<T>& x, std::size_t variables, fx::index_t steps,
                       std::size_t per_step, double rtol) {
  const result<T> want = run<T>(model, x, taping::nested);  // nested tapes keep the statements
  REQUIRE(want.gradients.size() == variables + 1);
  const result<T> fused = run<T>(model, x, taping::one_shot);
  check_same(fused, want, rtol);
  CHECK(fused.entries + 2 * per_step * (steps - 1) <= want.entries);  // one entry a layer
  const result<T> persistent = run<T>(model, x, taping::persistent);
  check_same(persistent, want, rtol);
  CHECK(persistent.entries == fused.entries);  // a tape never records its own backward pass
  // Inference records nothing and gives the same output.
  const std::vector<T> y = fx::tensor<T>(model(x)).to_vector();
  check_close(y, want.output, rtol, rtol);
}

/// check_fused_model on two Layer<...> (the first returns its sequence) and a dense layer, with
/// Units chosen so that the cells' vector loop has a scalar tail (3, 17, 33: not multiples of 4, 8
/// or 16 lanes); the statements record per_step entries a step. options: both layers'.
template <template <fx::index_t, bool, class, class> class Layer, class T, fx::index_t Steps, fx::index_t Units1,
          fx::index_t Units2>
void check_fused_stack(fx::index_t batch, std::size_t per_step, double rtol, const fx::nn::recurrent_options& options) {
  CAPTURE(batch);
  CAPTURE(Units1);
  fx::random::generator gen{41};
  auto model = fx::nn::sequential(gen, fx::nn::typed_input<T, Steps, 3>{}, Layer<Units1, true, float, fx::cpu>{options},
                                  Layer<Units2, false, float, fx::cpu>{options}, fx::nn::dense<2>{});
  const fx::tensor<T> x = fx::random::normal<T>({batch, Steps, 3}, gen);
  check_fused_model<T>(model, x, 8, Steps, per_step, rtol);
}

/// The fused cells' cases of each layer, in T: small batches, and batches that take the thread
/// pool's path (4096 / 17 = 240 rows a task; whole vectors only and 256 rows a task).
template <template <fx::index_t, bool, class, class> class Layer, class T>
void check_fused_cases(std::size_t per_step, const fx::nn::recurrent_options& options = {}) {
  if constexpr (std::is_same_v<T, double>) {
    check_fused_stack<Layer, double, 5, 3, 4>(2, per_step, 1e-12, options);
    check_fused_stack<Layer, double, 4, 17, 9>(300, per_step, 1e-12, options);
  } else {
    check_fused_stack<Layer, float, 5, 33, 7>(3, per_step, 2e-5, options);
    check_fused_stack<Layer, float, 3, 16, 16>(260, per_step, 2e-5, options);
  }
}

/// d/dx of sum(d sum(model(x)^2) / dx * w) through nested tapes against central differences of the
/// first derivative (double): second derivatives take the statements.
template <class Model>
void check_second_derivative(Model& model, const fx::shape& shape, fx::random::generator& gen) {
  const fx::tensor<double> x = fx::random::normal<double>(shape, gen);
  const fx::tensor<double> w = fx::random::normal<double>(shape, gen);
  auto first = [&](const fx::tensor<double>& at) {  // d sum(y^2) / dx, one tape
    fx::gradient_tape tape;
    tape.watch(at);
    const fx::tensor<double> y = model(at);
    const fx::tensor<double> s = fx::reduce_sum(fx::square(y));
    return tape.gradient(s, at);
  };
  fx::gradient_tape outer;
  outer.watch(x);
  const fx::tensor<double> g = first(x);
  const fx::tensor<double> gw = fx::reduce_sum(g * w);
  const std::vector<double> second = outer.gradient(gw, x).to_vector();
  const double h = 1e-5;
  std::vector<double> xs = x.to_vector();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    CAPTURE(i);
    auto at = [&](double d) {
      std::vector<double> v = xs;
      v[i] += d;
      return fx::tensor<double>(fx::reduce_sum(first(fx::from_vector(v, x.shape())) * w)).item();
    };
    const double fd = (at(h) - at(-h)) / (2 * h);
    CHECK(second[i] == doctest::Approx(fd).epsilon(1e-6));
  }
}

/// check_second_derivative through Layer (4 units, every step's output; double) under Keras's mask
/// with a hole in one example and padding in the other (the statements' masked path).
template <template <fx::index_t, bool, class, class> class Layer>
void check_masked_second_derivative(std::uint64_t seed) {
  fx::random::generator gen{seed};
  Layer<4, true, double, fx::cpu> layer;
  layer.build(fx::shape{3, 2}, gen);
  const fx::tensor<bool> m(fx::from_vector(std::vector<std::int32_t>{1, 0, 1, 0, 1, 1}, {2, 3}) != 0);
  auto model = [&](const fx::tensor<double>& x) { return layer(x, m); };
  check_second_derivative(model, fx::shape{2, 3, 2}, gen);
}

}  // namespace recurrent_check
