// Shared by the tests of tests/nn: PyTorch's numbers (tests/fixtures/nn/make_fixtures.py) and a
// relative comparison in float.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include <fluxion/io/npy.hpp>
#include <fluxion/tensor.hpp>

namespace peer {

inline fluxion::tensor<float> load(const std::string& name) {
  return fluxion::io::load_npy<float>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/nn/" + name + ".npy");
}

/// |got - want| <= rtol * max(1, max |want|) element by element, with the shapes equal.
template <class E>
void check_close(const E& got_expr, const fluxion::tensor<float>& want, const std::string& what, double rtol = 1e-5) {
  const fluxion::tensor<float> got(got_expr);
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector(), w = want.to_vector();
  double scale = 1;
  for (float v : w) scale = std::max(scale, static_cast<double>(std::abs(v)));
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const double e = std::abs(static_cast<double>(g[i]) - w[i]) / scale;
    if (!(e <= worst)) worst = e, at = i;
  }
  INFO("worst element " << at << ": " << (g.empty() ? 0.f : g[at]) << " vs PyTorch " << (w.empty() ? 0.f : w[at]));
  CHECK(worst <= rtol);
}

}  // namespace peer
