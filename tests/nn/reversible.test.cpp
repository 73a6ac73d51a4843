// fx::nn::reversible_sequence: the reconstructed backward pass against ordinary backpropagation of
// the same blocks (double within 1e-6, float within 1e-4 relative) for the input and every variable,
// finite differences, batch normalization's moving statistics updated once per step, activation
// memory flat in depth, names, and errors; on a fixed-point grid (set_fixed_point), a bit-for-bit
// reconstruction and gradients within 1e-5 (float) of ordinary backpropagation.
#define FLUXION_FORWARD_MODE 1  // the gradient checks compare forward-mode tangents too
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

template <class T>
using residual = nn::sequential_t<nn::typed_input<T, 6, 5, 4>, nn::batch_norm<-1, T>, nn::relu,
                                  nn::conv2d<4, 3, nn::same>>;
template <class T, int N>
using stage = nn::reversible_sequence<residual<T>, residual<T>, N, T>;

/// The loss sum(y * w), w fixed: dy = w, a random direction.
template <class T, int N>
struct step_result {
  std::vector<T> y, dx;
  std::vector<std::vector<T>> dvars;
};

template <class T, int N>
step_result<T, N> run_step(stage<T, N>& s, const fx::tensor<T>& x, const fx::tensor<T>& w) {
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<T> y = s(x, /*training=*/true);
  fx::tensor<T> loss = fx::reduce_sum(y * w);
  std::vector<const fx::tensor<T>*> sources{&x};
  auto vars = s.trainable_variables();
  for (auto* v : vars) sources.push_back(&v->peek());
  auto g = tape.gradient(loss, sources);
  step_result<T, N> r{y.to_vector(), g[0].to_vector(), {}};
  for (std::size_t i = 1; i < g.size(); ++i) r.dvars.push_back(g[i].to_vector());
  return r;
}

template <class T>
double max_abs_diff(const std::vector<T>& a, const std::vector<T>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  return m;
}
template <class T>
double max_abs(const std::vector<T>& a) {
  double m = 0;
  for (T v : a) m = std::max(m, std::abs(static_cast<double>(v)));
  return m;
}

}  // namespace

TEST_CASE_TEMPLATE("reversible: the reconstructed gradients equal ordinary backpropagation's", T, double, float) {
  fx::random::generator gen{5};
  stage<T, 4> s(gen);
  const fx::tensor<T> x = fx::random::normal<T>({3, 6, 5, 8}, gen);
  const fx::tensor<T> w = fx::random::normal<T>({3, 6, 5, 8}, gen);
  const auto rev = run_step(s, x, w);
  s.set_reversible(false);
  const auto plain = run_step(s, x, w);
  CHECK(max_abs_diff(rev.y, plain.y) == 0);  // the same forward statements
  const double tol = std::is_same_v<T, double> ? 1e-6 : 1e-4;
  const auto relative = [&](const std::vector<T>& a, const std::vector<T>& b) {
    return std::is_same_v<T, double> ? max_abs_diff(a, b) : max_abs_diff(a, b) / std::max(max_abs(b), 1e-30);
  };
  CHECK(relative(rev.dx, plain.dx) <= tol);
  REQUIRE(rev.dvars.size() == 4 * 2 * 4);  // 4 blocks, F and G, gamma beta kernel bias
  for (std::size_t i = 0; i < rev.dvars.size(); ++i) {
    INFO("variable ", s.trainable_variables()[i]->name());
    CHECK(max_abs(plain.dvars[i]) > 0);
    CHECK(relative(rev.dvars[i], plain.dvars[i]) <= tol);
  }
}

TEST_CASE("reversible: gradients against finite differences (double)") {
  fx::random::generator gen{8};
  stage<double, 2> s(gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 6, 5, 8}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({2, 6, 5, 8}, gen);
  auto f = [&](const fx::tensor<double>& in) { return fx::tensor<double>(fx::reduce_sum(s(in, true) * w)); };
  CHECK(fx::testing::check_gradients(f, x).ok);
}

TEST_CASE("reversible: batch norm's moving statistics are updated once per step, not again in the backward pass") {
  fx::random::generator gen{3};
  stage<double, 2> s(gen);
  const fx::tensor<double> x = fx::random::normal<double>({4, 6, 5, 8}, gen);
  const fx::tensor<double> w = fx::random::normal<double>({4, 6, 5, 8}, gen);
  auto moving = [&] {
    std::vector<std::vector<double>> out;
    for (auto* v : s.non_trainable_variables()) out.push_back(v->peek().to_vector());
    return out;
  };
  const auto start = moving();
  REQUIRE(start.size() == 2 * 2 * 2);  // blocks, F and G, mean and variance
  run_step(s, x, w);
  const auto reversible_step = moving();
  for (auto* v : s.non_trainable_variables()) v->assign(fx::tensor<double>(v->peek() * 0.0 + (v->name().find("variance") != std::string::npos ? 1.0 : 0.0)));
  CHECK(moving() == start);
  s.set_reversible(false);
  run_step(s, x, w);
  CHECK(moving() == reversible_step);  // one update each, as ordinary backpropagation makes
  CHECK(reversible_step != start);
}

TEST_CASE("reversible: activation memory stays flat in depth, and below ordinary backpropagation's") {
  // Peak bytes of a training step (forward, loss, gradients), minus what is live before it.
  auto peak_of_step = [](auto& s, bool reversible) {
    s.set_reversible(reversible);
    fx::random::generator gen{1};
    const fx::tensor<float> x = fx::random::normal<float>({8, 6, 5, 8}, gen);
    fx::memory::reset_peak();
    const auto base = fx::memory_stats().bytes_in_use;
    {
      fx::gradient_tape tape;
      tape.watch(x);
      fx::tensor<float> loss = fx::reduce_sum(fx::square(s(x, true)));
      auto vars = s.trainable_variables();
      auto g = tape.gradient(loss, vars);
      CHECK(g.size() == vars.size());
    }
    // The variables' gradients grow with depth in any method: count the activations only.
    std::size_t gradient_bytes = 0;
    for (auto* v : s.trainable_variables()) gradient_bytes += static_cast<std::size_t>(v->size()) * sizeof(float);
    return fx::memory_stats().peak_bytes_in_use - base - gradient_bytes;
  };
  fx::random::generator gen{2};
  stage<float, 2> shallow(gen);
  stage<float, 12> deep(gen);
  const auto rev2 = peak_of_step(shallow, true), rev12 = peak_of_step(deep, true);
  const auto plain2 = peak_of_step(shallow, false), plain12 = peak_of_step(deep, false);
  MESSAGE("peak bytes: reversible ", rev2, " -> ", rev12, ", ordinary ", plain2, " -> ", plain12);
  CHECK(static_cast<double>(rev12) <= 1.3 * static_cast<double>(rev2));   // flat in depth
  CHECK(static_cast<double>(plain12) >= 3.0 * static_cast<double>(plain2));  // ordinary grows with depth
  CHECK(static_cast<double>(rev12) <= 0.35 * static_cast<double>(plain12));
}

TEST_CASE("reversible: names, inference without a tape, errors") {
  fx::random::generator gen{4};
  stage<float, 2> s(gen);
  const auto vars = s.variables();
  REQUIRE(!vars.empty());
  CHECK(vars[0]->name() == "reversible/block_0/f/batch_normalization/gamma");
  CHECK(s.trainable_variables().back()->name() == "reversible/block_1/g/conv2d/bias");
  const fx::tensor<float> x = fx::random::normal<float>({2, 6, 5, 8}, gen);
  const fx::tensor<float> y = s(x);  // inference: moving statistics, no tape
  CHECK(y.shape() == x.shape());
  CHECK_THROWS_WITH_AS(s(fx::random::normal<float>({2, 6, 5, 7}, gen)), doctest::Contains("even number of channels"),
                       fx::shape_error);
  // In a sequential model, the shapes are checked at compile time.
  auto net = nn::sequential(gen, nn::input<6, 5, 8>{}, stage<float, 1>{}, nn::flatten{}, nn::dense<3>{});
  CHECK(net(x).shape() == fx::shape{2, 3});
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(fx::square(net(x, true)));
  auto g = tape.gradient(loss, net.trainable_variables());
  REQUIRE(g.size() == net.trainable_variables().size());
  for (auto& t : g) CHECK(t.size() > 0);
}

TEST_CASE_TEMPLATE("reversible: on a fixed-point grid the reconstruction is exact", T, double, float) {
  constexpr bool is_float = std::is_same_v<T, float>;
  constexpr int N = is_float ? 12 : 4;
  const int bits = is_float ? 16 : 32;
  fx::random::generator gen{11};
  stage<T, N> s(gen);
  const fx::tensor<T> x = fx::random::normal<T>({3, 6, 5, 8}, gen);
  const fx::tensor<T> w = fx::random::normal<T>({3, 6, 5, 8}, gen);

  // Without the grid, rebuilding the inputs rounds: the backward pass from the reconstruction
  // differs from the one given the true input (the first block's).
  auto backward_both = [&] {
    const fx::tensor<T> y = s(x, true);  // no tape: the blocks' plain forward pass
    std::vector<fx::tensor<T>> g_rebuilt, g_given;
    const fx::tensor<T> d_rebuilt = s.backward(y, w, true, g_rebuilt);
    const fx::tensor<T> d_given = s.backward(y, w, true, g_given, &x);
    bool same = d_rebuilt.to_vector() == d_given.to_vector();
    REQUIRE(g_rebuilt.size() == g_given.size());
    for (std::size_t i = 0; i < g_rebuilt.size(); ++i) same = same && g_rebuilt[i].to_vector() == g_given[i].to_vector();
    return same;
  };
  CHECK_FALSE(backward_both());

  s.set_fixed_point(bits);
  CHECK(s.fixed_point() == bits);
  CHECK(backward_both());  // bit for bit: every block's input rebuilt exactly
  CHECK(s.reconstruction_exact());

  const auto rev = run_step(s, x, w);
  CHECK(s.reconstruction_exact());
  CHECK(s.largest_magnitude() > 0.5);
  CHECK(s.largest_magnitude() < std::ldexp(1.0, std::numeric_limits<T>::digits - bits));
  const T scale = std::ldexp(T(1), bits);
  std::size_t off_grid = 0;
  for (T v : rev.y) off_grid += std::nearbyint(v * scale) != v * scale;
  CHECK(off_grid == 0);
  double largest_y = 0;
  for (T v : rev.y) largest_y = std::max(largest_y, std::abs(static_cast<double>(v)));
  CHECK(s.largest_magnitude() >= largest_y);

  s.set_reversible(false);  // ordinary backpropagation of the same rounded model (straight through)
  const auto plain = run_step(s, x, w);
  CHECK(max_abs_diff(rev.y, plain.y) == 0);
  const double tol = is_float ? 1e-5 : 1e-12;  // the reversible path's own bound is 1e-4 (float), 1e-6 (double)
  CHECK(max_abs(plain.dx) > 0);
  CHECK(max_abs_diff(rev.dx, plain.dx) <= tol * max_abs(plain.dx));
  REQUIRE(rev.dvars.size() == plain.dvars.size());
  for (std::size_t i = 0; i < rev.dvars.size(); ++i) {
    INFO("variable ", s.trainable_variables()[i]->name());
    CHECK(max_abs_diff(rev.dvars[i], plain.dvars[i]) <= tol * std::max(max_abs(plain.dvars[i]), 1e-30));
  }

  // The grid changes the model by at most half a step per coupling: the output stays close to the
  // one without it.
  s.set_fixed_point(0);
  CHECK_FALSE(s.reconstruction_exact());
  CHECK(s.largest_magnitude() == 0);
  const auto unrounded = run_step(s, x, w);
  CHECK(max_abs_diff(unrounded.y, plain.y) > 0);
  CHECK(max_abs_diff(unrounded.y, plain.y) <= 1e-2 * max_abs(plain.y));
}

TEST_CASE("reversible: a fixed-point grid out of range, and its errors") {
  fx::random::generator gen{12};
  stage<float, 2> s(gen);
  s.set_fixed_point(22);  // exact while |y| < 2^(24 - 22) = 4
  const fx::tensor<float> x(fx::random::normal<float>({3, 6, 5, 8}, gen) * 50.f);
  const fx::tensor<float> w = fx::random::normal<float>({3, 6, 5, 8}, gen);
  const auto r = run_step(s, x, w);
  CHECK_FALSE(s.reconstruction_exact());  // said, not thrown: the sums round as without the grid
  CHECK(s.largest_magnitude() >= 4);
  for (float v : r.dx) REQUIRE(std::isfinite(v));

  CHECK_THROWS_WITH_AS(s.set_fixed_point(24), doctest::Contains("set_fixed_point(24)"), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(s.set_fixed_point(-1), doctest::Contains("[0, 24)"), fx::invalid_argument);
  CHECK(s.fixed_point() == 22);  // unchanged by a rejected call
  stage<double, 2> d(gen);
  d.set_fixed_point(52);
  CHECK_THROWS_AS(d.set_fixed_point(53), fx::invalid_argument);
}
