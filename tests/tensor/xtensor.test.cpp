// xtensor interop: zero-copy adaptors that keep storage alive, and copies from any layout.
#include <doctest/doctest.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xtensor.hpp>
#include <xtensor/xview.hpp>

#include <fluxion/tensor.hpp>
#include <fluxion/tensor/creation.hpp>
#include <fluxion/tensor/xtensor.hpp>

namespace fx = fluxion;

TEST_CASE("to_xtensor adapts the tensor's buffer without copying") {
  fx::tensor<float> t = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  auto xa = fx::to_xtensor(t);
  CHECK(xa.data() == t.data());
  REQUIRE(xa.dimension() == 2);
  CHECK(xa.shape()[0] == 2);
  CHECK(xa.shape()[1] == 3);
  CHECK(xa(1, 0) == 4.f);
  CHECK(xa(0, 2) == 3.f);
  CHECK(xt::sum(xa)() == doctest::Approx(21.0));
  // Read-only: the adaptor's elements are const.
  static_assert(std::is_const_v<std::remove_reference_t<decltype(xa(0, 0))>>);
  // It holds one more reference to the storage.
  CHECK(t.use_count() == 2);
}

TEST_CASE("an adaptor keeps the storage alive after the tensor is gone") {
  auto make = [] {
    auto t = fx::from_vector(std::vector<double>{1.5, -2.5, 3.5, 4.5}, {2, 2});
    return fx::to_xtensor(t);  // t dies here
  };
  auto xa = make();
  // Allocate and fill buffers of the same size class, which would reuse freed storage.
  auto other = fx::full<double>({2, 2}, 99.0);
  auto other2 = fx::full<double>({2, 2}, 98.0);
  CHECK(xa(0, 0) == 1.5);
  CHECK(xa(0, 1) == -2.5);
  CHECK(xa(1, 1) == 4.5);
  CHECK(xa.data() != other.data());
  CHECK(xa.data() != other2.data());
}

TEST_CASE("to_xtensor of an expression materializes it once") {
  fx::tensor<std::int32_t> a = {1, 2, 3};
  auto xa = fx::to_xtensor(a * a + 1);
  CHECK(xa.shape()[0] == 3);
  CHECK(xa(2) == 10);
  auto scalar = fx::to_xtensor(fx::tensor<float>(2.f));
  CHECK(scalar.dimension() == 0);
  CHECK(scalar() == 2.f);
}

TEST_CASE("from_xtensor copies in row-major order whatever the source layout") {
  xt::xarray<double, xt::layout_type::column_major> c = {{1, 2, 3}, {4, 5, 6}};
  REQUIRE(c.data()[1] == 4);  // column-major storage
  auto t = fx::from_xtensor(c);
  static_assert(std::is_same_v<decltype(t), fx::tensor<double>>);
  CHECK(t.shape() == fx::shape{2, 3});
  CHECK(t.to_vector() == std::vector<double>{1, 2, 3, 4, 5, 6});

  xt::xtensor<float, 2> r = {{1.f, 2.f}, {3.f, 4.f}};
  auto tr = fx::from_xtensor(r);
  CHECK(tr.to_vector() == std::vector<float>{1, 2, 3, 4});
  CHECK(tr.data() != r.data());  // a copy

  // A strided view, a transposed view and a lazy expression.
  xt::xarray<std::int64_t> big = {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}};
  auto strided = fx::from_xtensor(xt::view(big, xt::range(0, 3, 2), xt::range(1, 4, 2)));
  CHECK(strided.shape() == fx::shape{2, 2});
  CHECK(strided.to_vector() == std::vector<std::int64_t>{1, 3, 9, 11});
  auto row = fx::from_xtensor(xt::view(big, 1, xt::all()));  // contiguous: copied in one block
  CHECK(row.to_vector() == std::vector<std::int64_t>{4, 5, 6, 7});
  auto transposed = fx::from_xtensor(xt::transpose(big));
  CHECK(transposed.shape() == fx::shape{4, 3});
  CHECK(transposed.to_vector() == std::vector<std::int64_t>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  auto lazy = fx::from_xtensor(c * 2.0 + 1.0);
  CHECK(lazy.to_vector() == std::vector<double>{3, 5, 7, 9, 11, 13});

  xt::xarray<bool> mask = {true, false, true};
  CHECK(fx::from_xtensor(mask).to_vector() == std::vector<bool>{true, false, true});
  xt::xarray<float> empty = xt::xarray<float>::from_shape({0, 3});
  CHECK(fx::from_xtensor(empty).shape() == fx::shape{0, 3});
}

TEST_CASE_TEMPLATE("tensor -> xtensor -> tensor round trips", T, float, double, std::int32_t, std::int64_t) {
  auto t = fx::tensor<T>(fx::reshape(fx::arange<T>(0, 60), {3, 4, 5}));
  auto back = fx::from_xtensor(fx::to_xtensor(t));
  static_assert(std::is_same_v<decltype(back), fx::tensor<T>>);
  CHECK(back.shape() == t.shape());
  CHECK(back.to_vector() == t.to_vector());
  CHECK(back.data() != t.data());

  xt::xarray<T> x = xt::reshape_view(xt::arange<T>(0, 24), {2, 3, 4});
  xt::xarray<T> again = fx::to_xtensor(fx::from_xtensor(x));
  CHECK(again == x);
}
