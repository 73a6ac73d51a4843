// Helpers of the loss tests (tests/losses.test.cpp, tests/losses/keras.test.cpp): naive per-example
// references, the check of a loss's three reductions, error messages, and PyTorch's numbers
// (tests/fixtures/losses/make_fixtures.py) read through fx::io::load_npy.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <fluxion/io/npy.hpp>
#include <fluxion/losses.hpp>

#include "test_util.hpp"

namespace losses_check {

namespace fx = fluxion;

using fx::losses::reduction;
using matrix = std::vector<std::vector<double>>;

matrix rows(const fx::tensor<double>& t) {
  const auto v = t.to_vector();
  const auto n = static_cast<std::size_t>(t.shape()[0]), k = static_cast<std::size_t>(t.shape()[1]);
  matrix m(n, std::vector<double>(k));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < k; ++j) m[i][j] = v[i * k + j];
  return m;
}

double naive_logsumexp(const std::vector<double>& r) {
  double m = r[0];
  for (double v : r) m = std::max(m, v);
  double s = 0;
  for (double v : r) s += std::exp(v - m);
  return m + std::log(s);
}

/// Per-example losses from a naive loop over rows.
std::vector<double> per_row(const matrix& a, const matrix& b, const std::function<double(double, double)>& element,
                            bool average) {
  std::vector<double> out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double s = 0;
    for (std::size_t j = 0; j < a[i].size(); ++j) s += element(a[i][j], b[i][j]);
    out.push_back(average ? s / static_cast<double>(a[i].size()) : s);
  }
  return out;
}

/// Checks a loss's three reductions against the per-example reference.
template <class F>
void check_reductions(F loss, const std::vector<double>& want_none) {
  double sum = 0;
  for (double v : want_none) sum += v;
  const fx::tensor<double> none = loss(reduction::none);
  CHECK(none.shape() == fx::shape{static_cast<fx::index_t>(want_none.size())});
  test::check_close(none.to_vector(), want_none, 1e-12, 1e-12);
  const fx::tensor<double> total = loss(reduction::sum), mean = loss(reduction::mean);
  CHECK(total.rank() == 0);
  CHECK(mean.rank() == 0);
  CHECK(total.item() == doctest::Approx(sum).epsilon(1e-12));
  CHECK(mean.item() == doctest::Approx(sum / static_cast<double>(want_none.size())).epsilon(1e-12));
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fx::error& e) {
    return e.what();
  }
  FAIL("no fx::error was thrown");
  return "";
}

void check_contains(const std::string& message, const std::vector<std::string>& parts) {
  INFO("message: " << message);
  for (const auto& part : parts) CHECK_MESSAGE(message.find(part) != std::string::npos, "missing: " << part);
}


fx::tensor<float> peer(const std::string& name) {
  return fx::io::load_npy<float>(std::string(FLUXION_TEST_FIXTURES_DIR) + "/losses/" + name + ".npy");
}

/// |got - want| <= rtol * max(1, |want|) element by element, with equal shapes.
void check_peer(const fx::tensor<float>& got, const fx::tensor<float>& want, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  const auto g = got.to_vector(), w = want.to_vector();
  for (std::size_t i = 0; i < g.size(); ++i)
    CHECK_MESSAGE(std::abs(g[i] - w[i]) <= 1e-5 * std::max(1.f, std::abs(w[i])),
                  "element " << i << ": " << g[i] << " vs PyTorch " << w[i]);
}

template <class F>
void check_against_torch(const std::string& prefix, const fx::tensor<float>& x, F loss) {
  check_peer(loss(x, reduction::none), peer(prefix + "_none"), prefix + ", reduction none");
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<float> mean = loss(x, reduction::mean);
  check_peer(mean, peer(prefix + "_mean"), prefix + ", reduction mean");
  check_peer(tape.gradient(mean, x), peer(prefix + "_grad"), prefix + ", gradient of the mean");
}

}  // namespace losses_check
