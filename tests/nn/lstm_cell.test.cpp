// The LSTM's fused cell on the cpu (nn/lstm_cell.hpp; nn/lstm.hpp decides when it runs). A sequence
// that one tape records (one-shot or persistent) is one tape entry over the fused cell; nested tapes
// give the reference: the same steps as statements, which
// tests/nn/lstm.test.cpp checks against a hand-written LSTM and tests/nn/peer_lstm.test.cpp against
// PyTorch. (tests/nn/lstm.test.cpp's finite-difference check records with a one-shot tape, so it
// checks the fused cell's gradients; peer_lstm.test.cpp checks both paths against PyTorch.)
// Second derivatives through an LSTM (the last test case).
#define FLUXION_MAX_DERIVATIVE_ORDER 2

#include <cstdint>
#include <optional>
#include <vector>

#include <fluxion/fluxion.hpp>

#include "../test_util.hpp"

namespace {

namespace fx = fluxion;
namespace nn = fluxion::nn;
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

/// Two LSTMs (the first returns its sequence) and a dense layer, with Units chosen so that the
/// cells' vector loop has a scalar tail (3, 17, 33: not multiples of 4, 8 or 16 lanes).
template <class T, fx::index_t Steps, fx::index_t Units1, fx::index_t Units2>
void check_fused(fx::index_t batch, double rtol) {
  CAPTURE(batch);
  CAPTURE(Units1);
  fx::random::generator gen{41};
  auto model = nn::sequential(gen, nn::typed_input<T, Steps, 3>{}, nn::lstm<Units1, true>{}, nn::lstm<Units2>{},
                              nn::dense<2>{});
  const fx::tensor<T> x = fx::random::normal<T>({batch, Steps, 3}, gen);
  const result<T> want = run<T>(model, x, taping::nested);  // nested tapes keep the statements
  REQUIRE(want.gradients.size() == 9);
  const result<T> fused = run<T>(model, x, taping::one_shot);
  check_same(fused, want, rtol);
  CHECK(fused.entries + 2 * 3 * (Steps - 1) <= want.entries);  // one entry a layer, not three a step
  const result<T> persistent = run<T>(model, x, taping::persistent);
  check_same(persistent, want, rtol);
  CHECK(persistent.entries == fused.entries);  // a tape never records its own backward pass
  // Inference records nothing and gives the same output.
  const std::vector<T> y = fx::tensor<T>(model(x)).to_vector();
  check_close(y, want.output, rtol, rtol);
}

}  // namespace

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, double") {
  check_fused<double, 5, 3, 4>(2, 1e-12);
  check_fused<double, 4, 17, 9>(300, 1e-12);  // 4096 / 17 = 240 rows a task: the thread pool's path
}

TEST_CASE("lstm cell: the fused sequence gives the statements' output and gradients, float") {
  check_fused<float, 5, 33, 7>(3, 2e-5);
  check_fused<float, 3, 16, 16>(260, 2e-5);  // whole vectors only, and 256 rows a task
}

TEST_CASE("lstm cell: second derivatives through an LSTM take the statements") {
  // d/dx of sum(d loss / dx * w) through nested tapes against central differences of the
  // first derivative (double).
  fx::random::generator gen{43};
  auto model = nn::sequential(gen, nn::typed_input<double, 3, 2>{}, nn::lstm<4>{}, nn::dense<1>{});
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 2}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({2, 3, 2}, gen);
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
