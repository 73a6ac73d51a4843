#include "../test_util.hpp"

TEST_CASE("variable: assign, assign_add, assign_sub, version and metadata") {
  fx::variable<float> v{fx::tensor<float>{1.f, 2.f, 3.f}, "w"};
  CHECK(v.name() == "w");
  CHECK(v.trainable());
  CHECK(v.version() == 0);
  fx::tensor<float> before = v.value();
  v.assign_add(fx::tensor<float>{1.f, 1.f, 1.f} * 2.f);
  CHECK(v.value().to_vector() == std::vector<float>{3, 4, 5});
  CHECK(v.version() == 1);
  v.assign_sub(1.f);  // a scalar broadcasts
  CHECK(v.value().to_vector() == std::vector<float>{2, 3, 4});
  v.assign(v * v);
  CHECK(v.value().to_vector() == std::vector<float>{4, 9, 16});
  CHECK(v.version() == 3);
  CHECK(before.to_vector() == std::vector<float>{1, 2, 3});  // earlier reads never change
  fx::variable<float> frozen{fx::tensor<float>{0.f}, "f", false};
  CHECK(!frozen.trainable());
  CHECK(frozen.id() != v.id());
}

TEST_CASE("variable: an update is one fused pass with one new buffer") {
  fx::variable<float> w{fx::tensor<float>(fx::broadcast_to(fx::tensor<float>(1.f), {256, 256})), "w"};
  auto g = test::random_tensor<float>({256, 256}, 1);
  const auto before = fx::memory::stats().allocations;
  w.assign_sub(0.1f * g * g);
  CHECK(fx::memory::stats().allocations - before == 1);
  CHECK(w.value()(3, 4) == doctest::Approx(1.f - 0.1f * g(3, 4) * g(3, 4)));
}

TEST_CASE("variable: shape errors leave the value untouched") {
  fx::variable<float> v{fx::tensor<float>{{1.f, 2.f}}, "bias"};
  test::check_throws_with<fx::shape_error>([&] { v.assign(fx::tensor<float>{1.f, 2.f, 3.f}); },
                                           "assign: cannot assign a value of shape (3,) to variable 'bias' of shape (1, 2)");
  test::check_throws_with<fx::shape_error>([&] { v.assign(fx::tensor<float>{}); },
                                           "assign: cannot assign a value of shape (0,) to variable 'bias' of shape (1, 2) "
                                           "(shape (0,) is the shape of a default-constructed or moved-from tensor: was it "
                                           "assigned?)");
  test::check_throws_with<fx::shape_error>([&] { v.assign_sub(fx::tensor<float>{1.f, 2.f, 3.f}); },
                                           "assign_sub: cannot apply an update of shape (3,) to variable 'bias' of shape (1, 2)");
  test::check_throws_with<fx::shape_error>([&] { v.assign_add(fx::tensor<float>{{1.f}, {2.f}}); },
                                           "assign_add: cannot apply an update of shape (2, 1) to variable 'bias' of shape (1, 2)");
  CHECK(v.value().to_vector() == std::vector<float>{1, 2});
  CHECK(v.version() == 0);
}
