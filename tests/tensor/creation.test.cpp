// Creation functions against naive loops and NumPy's values (hex literals taken from NumPy 2.4).
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>

namespace fx = fluxion;
using fx::index_t;

namespace {

template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const fx::error& e) {
    return e.what();
  }
  return "(no exception)";
}

}  // namespace

TEST_CASE("from_vector keeps row-major order and checks the element count") {
  auto t = fx::from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  static_assert(std::is_same_v<decltype(t), fx::tensor<float>>);
  CHECK(t.shape() == fx::shape{2, 3});
  CHECK(t(1, 0) == 4.f);
  CHECK(t.to_vector() == std::vector<float>{1, 2, 3, 4, 5, 6});

  auto v = fx::from_vector(std::vector<std::int64_t>{7, 8, 9});
  CHECK(v.shape() == fx::shape{3});
  CHECK(v(2) == 9);

  auto b = fx::from_vector(std::vector<bool>{true, false, true, true}, {2, 2});
  CHECK(b.to_vector() == std::vector<bool>{true, false, true, true});

  auto s = fx::from_vector(std::vector<double>{2.5}, fx::shape{});
  CHECK(s.rank() == 0);
  CHECK(s.item() == 2.5);

  CHECK_THROWS_AS(fx::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {2, 3}), fx::shape_error);
  CHECK(message_of([] { fx::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {2, 3}); }) ==
        "from_vector: 5 values cannot fill shape (2, 3)");
}

TEST_CASE_TEMPLATE("zeros, ones and full fill every element", T, float, double, std::int32_t, std::int64_t, bool) {
  for (const fx::shape& s : {fx::shape{}, fx::shape{0}, fx::shape{7}, fx::shape{3, 0, 2}, fx::shape{5, 1, 33},
                             fx::shape{1 << 17, 3}}) {
    CAPTURE(fx::to_string(s));
    const auto z = fx::zeros<T>(s);
    const auto o = fx::ones<T>(s);
    const auto f = fx::full<T>(s, T(1));
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(z)>, fx::tensor<T>>);
    REQUIRE(z.shape() == s);
    REQUIRE(o.shape() == s);
    REQUIRE(f.shape() == s);
    bool ok = true;
    for (index_t i = 0; i < s.size(); ++i)
      ok = ok && z.data()[i] == T(0) && o.data()[i] == T(1) && f.data()[i] == T(1);
    CHECK(ok);
  }
}

TEST_CASE("full takes its element type from the value unless named") {
  auto d = fx::full({2, 2}, 1.5);
  static_assert(std::is_same_v<decltype(d), fx::tensor<double>>);
  CHECK(d.to_vector() == std::vector<double>{1.5, 1.5, 1.5, 1.5});
  auto i = fx::full({3}, 7);
  static_assert(std::is_same_v<decltype(i), fx::tensor<std::int32_t>>);
  auto f = fx::full<float>({3}, 7);
  CHECK(f.to_vector() == std::vector<float>{7, 7, 7});
}

TEST_CASE("eye has ones on the main diagonal only") {
  auto e = fx::eye<float>(3);
  CHECK(e.shape() == fx::shape{3, 3});
  CHECK(e.to_vector() == std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1});
  auto r = fx::eye<std::int32_t>(2, 4);
  CHECK(r.to_vector() == std::vector<std::int32_t>{1, 0, 0, 0, 0, 1, 0, 0});
  auto t = fx::eye<bool>(3, 2);
  CHECK(t.to_vector() == std::vector<bool>{true, false, false, true, false, false});
  CHECK(fx::eye<double>(0).shape() == fx::shape{0, 0});
  CHECK(message_of([] { fx::eye<float>(-1, 2); }) == "eye: num_rows = -1 and num_columns = 2 must be non-negative");
  // Large enough to span several host tasks.
  auto big = fx::eye<float>(600, 700);
  bool ok = true;
  for (index_t i = 0; i < 600; ++i)
    for (index_t j = 0; j < 700; ++j) ok = ok && big.data()[i * 700 + j] == (i == j ? 1.f : 0.f);
  CHECK(ok);
}

TEST_CASE("the *_like functions copy shape, dtype and device without computing the operand") {
  fx::tensor<std::int32_t> a = {{1, 2, 3}, {4, 5, 6}};
  auto z = fx::zeros_like(a);
  static_assert(std::is_same_v<decltype(z), fx::tensor<std::int32_t>>);
  CHECK(z.shape() == fx::shape{2, 3});
  CHECK(z.to_vector() == std::vector<std::int32_t>(6, 0));

  // full_like converts the value to the operand's dtype, as NumPy does.
  const double two_and_a_half = 2.5;  // (a literal would draw clang's -Wliteral-conversion)
  CHECK(fx::full_like(a, two_and_a_half).to_vector() == std::vector<std::int32_t>(6, 2));

  fx::tensor<float> x = {1.f, 2.f, 3.f};
  fx::tensor<float> col = {{1.f}, {2.f}};
  auto o = fx::ones_like(col * x);  // broadcast shape (2, 3)
  static_assert(std::is_same_v<decltype(o), fx::tensor<float>>);
  CHECK(o.shape() == fx::shape{2, 3});
  CHECK(o.to_vector() == std::vector<float>(6, 1.f));

  auto mask = fx::ones_like(x > 1.f);
  static_assert(std::is_same_v<decltype(mask), fx::tensor<bool>>);
  CHECK(mask.to_vector() == std::vector<bool>(3, true));

  // A reduction is a kernel boundary: asking for its shape must not run it. Only the output of
  // zeros_like is allocated.
  auto r = fx::reduce_sum(col * x, 1);
  const auto before = fx::memory::stats().allocations;
  auto zr = fx::zeros_like(r);
  CHECK(fx::memory::stats().allocations - before == 1);
  CHECK(zr.shape() == fx::shape{2});
}

TEST_CASE("arange follows NumPy: length, direction, dtype and values bit for bit") {
  auto a = fx::arange(5);
  static_assert(std::is_same_v<decltype(a), fx::tensor<std::int32_t>>);
  CHECK(a.to_vector() == std::vector<std::int32_t>{0, 1, 2, 3, 4});
  CHECK(fx::arange(2, 10, 3).to_vector() == std::vector<std::int32_t>{2, 5, 8});
  CHECK(fx::arange(10, 2, -3).to_vector() == std::vector<std::int32_t>{10, 7, 4});
  CHECK(fx::arange(0, 5, -1).shape() == fx::shape{0});
  CHECK(fx::arange(3, 3).shape() == fx::shape{0});
  CHECK(fx::arange<std::int64_t>(3).to_vector() == std::vector<std::int64_t>{0, 1, 2});
  static_assert(std::is_same_v<decltype(fx::arange(std::int64_t{3})), fx::tensor<std::int64_t>>);
  // Arguments convert to a named integer type first, as tf.range does: step 2.5 becomes 2.
  CHECK(fx::arange<std::int32_t>(0, 7, 2.5).to_vector() == std::vector<std::int32_t>{0, 2, 4, 6});

  auto f = fx::arange(0.f, 1.f, 0.25f);
  static_assert(std::is_same_v<decltype(f), fx::tensor<float>>);
  CHECK(f.to_vector() == std::vector<float>{0.f, 0.25f, 0.5f, 0.75f});
  static_assert(std::is_same_v<decltype(fx::arange(1, 2.5, 0.5)), fx::tensor<double>>);
  CHECK(fx::arange(1, 2.5, 0.5).to_vector() == std::vector<double>{1, 1.5, 2});
  CHECK(fx::arange(0, 1, 0.1).size() == 10);  // np.arange(0, 1, 0.1) has 10 elements
  CHECK(fx::arange<float>(3).to_vector() == std::vector<float>{0, 1, 2});

  // np.arange(5, -3, -0.37, dtype=...): 22 elements; elements 0, 1, 2, 7, 21.
  auto d = fx::arange(5.0, -3.0, -0.37);
  REQUIRE(d.size() == 22);
  CHECK(d(0) == 0x1.4p+2);
  CHECK(d(1) == 0x1.2851eb851eb85p+2);
  CHECK(d(2) == 0x1.10a3d70a3d70ap+2);
  CHECK(d(7) == 0x1.347ae147ae146p+1);
  CHECK(d(21) == -0x1.628f5c28f5c2ep+1);
  auto s = fx::arange<float>(5, -3, -0.37);
  REQUIRE(s.size() == 22);
  CHECK(s(1) == 0x1.2851ecp+2f);
  CHECK(s(2) == 0x1.10a3d8p+2f);
  CHECK(s(7) == 0x1.347ae8p+1f);
  CHECK(s(21) == -0x1.628f48p+1f);

  // Several host tasks: compare with the same formula in a naive loop.
  auto big = fx::arange(-3.0, 1e5, 0.37);
  REQUIRE(big.size() == 270279);
  const double first = -3.0, second = -3.0 + 0.37, delta = second - first;
  bool ok = big(1) == second;
  for (index_t i = 2; i < big.size(); ++i) ok = ok && big.data()[i] == first + static_cast<double>(i) * delta;
  CHECK(ok);

  CHECK_THROWS_AS(fx::arange(0, 10, 0), fx::invalid_argument);
  CHECK(message_of([] { fx::arange(0, 10, 0); }) == "arange: step must not be 0 (start = 0, stop = 10, step = 0)");
  CHECK(message_of([] { fx::arange(0.5, 1.0, 0.0); }) ==
        "arange: step must not be 0 (start = 0.5, stop = 1, step = 0)");
}

TEST_CASE("linspace includes the endpoint and matches NumPy") {
  auto l = fx::linspace(0.0, 1.0, 5);
  static_assert(std::is_same_v<decltype(l), fx::tensor<double>>);
  CHECK(l.to_vector() == std::vector<double>{0, 0.25, 0.5, 0.75, 1});
  static_assert(std::is_same_v<decltype(fx::linspace(0, 1, 3)), fx::tensor<float>>);
  // np.linspace(0, 1, 7)
  CHECK(fx::linspace(0, 1.0, 7).to_vector() ==
        std::vector<double>{0, 0x1.5555555555555p-3, 0x1.5555555555555p-2, 0.5, 0x1.5555555555555p-1,
                            0x1.aaaaaaaaaaaaap-1, 1});
  // np.linspace(-1.3, 2.9, 9, dtype=np.float32)
  CHECK(fx::linspace<float>(-1.3, 2.9, 9).to_vector() ==
        std::vector<float>{-0x1.4cccccp+0f, -0x1.8cccccp-1f, -0x1p-2f, 0x1.19999ap-2f, 0x1.99999ap-1f, 0x1.533334p+0f,
                           0x1.d9999ap+0f, 0x1.3p+1f, 0x1.733334p+1f});
  // np.linspace(-3, 7, 4, dtype=np.int32) floors.
  CHECK(fx::linspace<std::int32_t>(-3, 7, 4).to_vector() == std::vector<std::int32_t>{-3, 0, 3, 7});
  CHECK(fx::linspace(2.5, 7.0, 1).to_vector() == std::vector<double>{2.5});
  CHECK(fx::linspace(2.5, 7.0, 0).shape() == fx::shape{0});
  CHECK(fx::linspace(1.0, 1.0, 3).to_vector() == std::vector<double>{1, 1, 1});
  CHECK(message_of([] { fx::linspace(0.0, 1.0, -2); }) ==
        "linspace: num = -2 must be non-negative (start = 0, stop = 1)");

  auto big = fx::linspace(-1.0, 1.0, 100001);
  bool ok = big(100000) == 1.0 && big(0) == -1.0;
  for (index_t i = 0; i < 100000; ++i) ok = ok && big.data()[i] == static_cast<double>(i) * (2.0 / 100000) - 1.0;
  CHECK(ok);
}
