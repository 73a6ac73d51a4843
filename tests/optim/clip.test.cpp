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
