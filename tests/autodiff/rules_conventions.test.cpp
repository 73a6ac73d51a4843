#include "../test_util.hpp"

TEST_CASE("rules: TensorFlow's conventions at kinks and ties") {
  fx::tensor<double> x = {-1.0, 0.0, 2.0};
  auto g = fx::gradients_function([](const auto& v) { return fx::relu(v); })(x)[0];
  CHECK(g.to_vector() == std::vector<double>{0, 0, 1});  // relu'(0) = 0
  fx::tensor<double> t = {1.0, 3.0, 3.0};
  auto gm = fx::gradients_function([](const auto& v) { return fx::reduce_max(v); })(t)[0];
  CHECK(gm.to_vector() == std::vector<double>{0, 0.5, 0.5});  // ties share the gradient
  fx::tensor<double> a = {1.0, 2.0}, b = {1.0, 3.0};
  auto gab = fx::gradients_function([](const auto& p, const auto& q) { return fx::maximum(p, q); })(a, b);
  CHECK(gab[0].to_vector() == std::vector<double>{1, 0});  // a >= b picks a
  CHECK(gab[1].to_vector() == std::vector<double>{0, 1});
}
