// Shared by the tests of tests/optim: random gradients, a driver that runs an optimizer for a few
// steps, and tolerances per element type. The naive references themselves live in each test.
#pragma once

#include <string>
#include <vector>

#include <fluxion/optim/optimizer.hpp>
#include <fluxion/tensor/creation.hpp>

#include "../test_util.hpp"

namespace optim_test {

/// Not a multiple of any SIMD width: the scalar tail of the fused loop runs too.
inline constexpr fx::index_t size = 37;
inline constexpr int steps = 4;

template <class T>
std::vector<T> random_vector(fx::index_t n, unsigned seed, double lo = -2, double hi = 2) {
  return test::random_tensor<T>({n}, seed, lo, hi).to_vector();
}

/// The relative tolerance between fluxion and a naive loop of the same formula: the per-step
/// coefficients may be rounded differently in float.
template <class T>
double rtol() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

/// Applies grads[0], grads[1], ... to `w` with `opt`; returns the weights after each step.
template <class T>
std::vector<std::vector<T>> run(fx::optim::optimizer& opt, fx::variable<T>& w, const std::vector<std::vector<T>>& grads) {
  std::vector<std::vector<T>> out;
  std::vector<fx::variable<T>*> vars{&w};
  for (const auto& g : grads) {
    opt.apply_gradients(std::vector<fx::tensor<T>>{fx::from_vector(g, w.shape())}, vars);
    out.push_back(w.peek().to_vector());
  }
  return out;
}

template <class T>
std::vector<std::vector<T>> random_gradients(fx::index_t n, unsigned seed) {
  std::vector<std::vector<T>> g;
  for (int s = 0; s < steps; ++s) g.push_back(random_vector<T>(n, seed + static_cast<unsigned>(s)));
  return g;
}

/// Checks every step's weights against the reference's.
template <class T>
void check_steps(const std::vector<std::vector<T>>& got, const std::vector<std::vector<T>>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t s = 0; s < got.size(); ++s) {
    INFO("after step " << s + 1);
    test::check_close(got[s], want[s], rtol<T>(), 1e-7);
  }
}

}  // namespace optim_test
