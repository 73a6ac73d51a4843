#include <fluxion/optim.hpp>
#include <fluxion/optim/clip.hpp>

#include "reference.hpp"

TEST_CASE_TEMPLATE("clip_by_global_norm: against a naive norm, TensorFlow's semantics", T, float, double) {
  const std::vector<fx::tensor<T>> grads{test::random_tensor<T>({3, 4}, 1), test::random_tensor<T>({5}, 2),
                                         fx::tensor<T>{},   // an empty gradient counts for nothing,
                                         fx::tensor<T>::none()};  // and so does none (TensorFlow's None)
  double sum = 0;
  for (const auto& g : grads)
    for (T x : g.to_vector()) sum += static_cast<double>(x) * x;
  const double norm = std::sqrt(sum);
  REQUIRE(norm > 1);

  SUBCASE("above the clip norm: every gradient is scaled by clip_norm / global_norm") {
    auto [clipped, got_norm] = fx::optim::clip_by_global_norm(grads, 1.0);
    CHECK(static_cast<double>(got_norm) == doctest::Approx(norm).epsilon(optim_test::rtol<T>()));
    REQUIRE(clipped.size() == grads.size());
    double clipped_sum = 0;
    for (std::size_t k = 0; k < grads.size(); ++k) {
      CHECK(clipped[k].shape() == grads[k].shape());
      CHECK(clipped[k].is_none() == grads[k].is_none());
      std::vector<T> want;
      for (T x : grads[k].to_vector()) want.push_back(static_cast<T>(x * (1.0 / norm)));
      test::check_close(clipped[k].to_vector(), want, optim_test::rtol<T>(), 0);
      for (T x : clipped[k].to_vector()) clipped_sum += static_cast<double>(x) * x;
    }
    CHECK(std::sqrt(clipped_sum) == doctest::Approx(1.0).epsilon(optim_test::rtol<T>()));
  }
  SUBCASE("at or below the clip norm: the same tensors come back") {
    auto [same, got_norm] = fx::optim::clip_by_global_norm(grads, norm * 2);
    CHECK(static_cast<double>(got_norm) == doctest::Approx(norm).epsilon(optim_test::rtol<T>()));
    for (std::size_t k = 0; k < grads.size(); ++k) {
      CHECK(same[k].id() == grads[k].id());
      CHECK(same[k].to_vector() == grads[k].to_vector());
    }
  }
  SUBCASE("an infinite norm makes every element NaN, as in TensorFlow") {
    auto with_inf = grads;
    with_inf[1] = fx::tensor<T>{std::numeric_limits<T>::infinity(), T(1)};
    auto [clipped, got_norm] = fx::optim::clip_by_global_norm(with_inf, 1.0);
    CHECK(std::isinf(got_norm));
    for (T x : clipped[0].to_vector()) CHECK(std::isnan(x));
  }
}

TEST_CASE("clip_by_global_norm: clip_norm must be positive") {
  const std::vector<fx::tensor<float>> grads{fx::tensor<float>{3.f, 4.f}};
  test::check_throws_with<fx::invalid_argument>([&] { fx::optim::clip_by_global_norm(grads, 0.0); },
                                                "clip_by_global_norm: clip_norm = 0 must be finite and positive");
  test::check_throws_with<fx::invalid_argument>([&] { fx::optim::clip_by_global_norm(grads, -1.0); },
                                                "clip_by_global_norm: clip_norm = -1 must be finite and positive");
  auto [clipped, norm] = fx::optim::clip_by_global_norm(grads, 1.0);  // 3-4-5
  CHECK(norm == 5.f);
  CHECK(clipped[0].to_vector() == std::vector<float>{0.6f, 0.8f});
}

namespace {
/// w -= g (sgd with learning rate 1) on two trainable variables and a frozen one, with `clipping`:
/// returns each variable's change, which is then the clipped gradient itself.
template <class T>
std::vector<std::vector<T>> clipped_steps(const std::vector<fx::tensor<T>>& grads, fx::optim::sgd_options o) {
  o.learning_rate = 1.0;
  fx::optim::sgd opt{o};
  std::vector<fx::variable<T>> vars;
  for (std::size_t i = 0; i < grads.size(); ++i) vars.emplace_back(fx::zeros<T>(grads[i].shape()), "v" + std::to_string(i));
  vars.back().set_trainable(false);
  opt.apply_gradients(grads, {&vars[0], &vars[1], &vars[2]});
  std::vector<std::vector<T>> change;
  for (const auto& v : vars) {
    std::vector<T> d;
    for (T x : v.peek().to_vector()) d.push_back(-x);
    change.push_back(d);
  }
  return change;
}
}  // namespace

TEST_CASE_TEMPLATE("optimizers: Keras's clipnorm, clipvalue and global_clipnorm, against naive loops", T, float, double) {
  // Two trainable gradients of norms 2-ish and 4-ish, and a frozen variable's huge one, which no
  // kind of clipping may read (Keras clips the gradients of the trainable variables it updates).
  const std::vector<fx::tensor<T>> grads{test::random_tensor<T>({3, 4}, 1, -1, 1), test::random_tensor<T>({5}, 2, -3, 3),
                                         fx::full<T>({2}, T(1000))};
  auto norm_of = [](const std::vector<T>& v) {
    double s = 0;
    for (T x : v) s += static_cast<double>(x) * x;
    return std::sqrt(s);
  };
  const std::vector<T> g0 = grads[0].to_vector(), g1 = grads[1].to_vector();
  const double n0 = norm_of(g0), n1 = norm_of(g1), global = std::sqrt(n0 * n0 + n1 * n1);
  auto scaled = [](const std::vector<T>& g, double s) {
    std::vector<T> out;
    for (T x : g) out.push_back(static_cast<T>(x * s));
    return out;
  };
  const std::vector<T> frozen(2, T(0));
  SUBCASE("clipnorm: each gradient to its own norm of at most clipnorm") {
    const double c = 1.5;
    REQUIRE(n0 > c);
    REQUIRE(n1 > c);
    const auto got = clipped_steps<T>(grads, {.clipnorm = c});
    test::check_close(got[0], scaled(g0, c / n0), optim_test::rtol<T>(), 0);
    test::check_close(got[1], scaled(g1, c / n1), optim_test::rtol<T>(), 0);
    CHECK(got[2] == frozen);
    CHECK(norm_of(got[1]) == doctest::Approx(c).epsilon(optim_test::rtol<T>()));
    // A norm at or below clipnorm: the gradient exactly as it was.
    const auto same = clipped_steps<T>(grads, {.clipnorm = n1 * 1.01});
    CHECK(same[1] == g1);
    test::check_close(same[0], g0, optim_test::rtol<T>(), 0);
  }
  SUBCASE("clipvalue: each element to [-clipvalue, clipvalue]") {
    const auto got = clipped_steps<T>(grads, {.clipvalue = 0.5});
    for (std::size_t k = 0; k < 2; ++k) {
      std::vector<T> want;
      for (T x : (k == 0 ? g0 : g1)) want.push_back(std::min(std::max(x, T(-0.5)), T(0.5)));
      CHECK(got[k] == want);
    }
    CHECK(got[2] == frozen);
  }
  SUBCASE("global_clipnorm: all trainable gradients together") {
    const double c = 2.0;
    REQUIRE(global > c);
    const auto got = clipped_steps<T>(grads, {.global_clipnorm = c});
    test::check_close(got[0], scaled(g0, c / global), optim_test::rtol<T>(), 0);
    test::check_close(got[1], scaled(g1, c / global), optim_test::rtol<T>(), 0);
    CHECK(got[2] == frozen);
    CHECK(std::sqrt(std::pow(norm_of(got[0]), 2) + std::pow(norm_of(got[1]), 2)) ==
          doctest::Approx(c).epsilon(optim_test::rtol<T>()));
    const auto same = clipped_steps<T>(grads, {.global_clipnorm = global * 1.01});
    CHECK(same[0] == g0);
    CHECK(same[1] == g1);
  }
  SUBCASE("a NaN in a gradient makes every clipped gradient NaN, as tf.clip_by_global_norm") {
    auto with_nan = grads;
    with_nan[0] = fx::tensor<T>{std::numeric_limits<T>::quiet_NaN(), T(1)};
    fx::optim::sgd opt{{.learning_rate = 1.0, .global_clipnorm = 1.0}};
    fx::variable<T> a{fx::zeros<T>({2}), "a"}, b{fx::zeros<T>({5}), "b"};
    opt.apply_gradients(std::vector<fx::tensor<T>>{with_nan[0], with_nan[1]}, {a, b});
    for (T x : b.peek().to_vector()) CHECK(std::isnan(x));
  }
}

TEST_CASE("optimizers: clipping runs before the update, for every optimizer, and is checked") {
  const std::vector<fx::tensor<double>> grads{test::random_tensor<double>({4, 3}, 5, -4, 4), test::random_tensor<double>({6}, 6, -4, 4)};
  // Each optimizer with clipnorm takes the steps the same optimizer takes on gradients clipped by
  // hand with clip_by_global_norm, one gradient at a time (clipnorm) or all of them (global).
  auto run = [&](auto opt, bool clip_by_hand, double each, double all) {
    fx::variable<double> a{test::random_tensor<double>({4, 3}, 7), "a"}, b{test::random_tensor<double>({6}, 8), "b"};
    for (int step = 0; step < 3; ++step) {
      std::vector<fx::tensor<double>> g = grads;
      if (clip_by_hand && each > 0)
        for (auto& t : g) t = fx::optim::clip_by_global_norm(std::vector<fx::tensor<double>>{t}, each).first[0];
      if (clip_by_hand && all > 0) g = fx::optim::clip_by_global_norm(g, all).first;
      opt.apply_gradients(g, {a, b});
    }
    std::vector<double> out = a.peek().to_vector();
    for (double x : b.peek().to_vector()) out.push_back(x);
    return out;
  };
  CHECK(run(fx::optim::adam{{.learning_rate = 0.1, .clipnorm = 1.0}}, false, 0, 0) ==
        run(fx::optim::adam{{.learning_rate = 0.1}}, true, 1.0, 0));
  CHECK(run(fx::optim::adamw{{.learning_rate = 0.1, .global_clipnorm = 2.0}}, false, 0, 0) ==
        run(fx::optim::adamw{{.learning_rate = 0.1}}, true, 0, 2.0));
  CHECK(run(fx::optim::rmsprop{{.learning_rate = 0.1, .momentum = 0.5, .clipnorm = 0.5}}, false, 0, 0) ==
        run(fx::optim::rmsprop{{.learning_rate = 0.1, .momentum = 0.5}}, true, 0.5, 0));
  CHECK(run(fx::optim::adagrad{{.learning_rate = 0.1, .global_clipnorm = 1.0}}, false, 0, 0) ==
        run(fx::optim::adagrad{{.learning_rate = 0.1}}, true, 0, 1.0));
  CHECK(run(fx::optim::sgd{{.learning_rate = 0.1, .momentum = 0.9, .weight_decay = 0.1, .clipnorm = 1.0}}, false, 0, 0) ==
        run(fx::optim::sgd{{.learning_rate = 0.1, .momentum = 0.9, .weight_decay = 0.1}}, true, 1.0, 0));

  fx::optim::adam opt{{.clipnorm = 1.0}};
  CHECK(opt.clipnorm() == 1.0);
  CHECK(opt.clipvalue() == 0.0);
  CHECK(opt.global_clipnorm() == 0.0);
  opt.set_clipping({.clipvalue = 0.25});
  CHECK(opt.clipnorm() == 0.0);
  CHECK(opt.clipvalue() == 0.25);
  test::check_throws_with<fx::invalid_argument>(
      [] { fx::optim::sgd{{.clipnorm = 1.0, .global_clipnorm = 2.0}}; },
      "sgd: only one of clipnorm, clipvalue and global_clipnorm can be set (as in Keras), not clipnorm = 1, clipvalue "
      "= 0 and global_clipnorm = 2");
  test::check_throws_with<fx::invalid_argument>([] { fx::optim::adamw{{.clipvalue = -1.0}}; },
                                                "adamw: clipvalue = -1 must be finite and non-negative");
  test::check_throws_with<fx::invalid_argument>(
      [&] { opt.set_clipping({.clipnorm = std::numeric_limits<double>::quiet_NaN()}); },
      "adam: clipnorm = nan must be finite and non-negative");
  CHECK(opt.clipvalue() == 0.25);  // a refused setting changes nothing
}
