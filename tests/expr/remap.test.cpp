#include "../test_util.hpp"

TEST_CASE("remap: transpose and permutations against index arithmetic") {
  auto x = test::random_tensor<double>({2, 3, 4}, 1);
  const auto xv = x.to_vector();
  fx::tensor<double> t = fx::transpose(x, {2, 0, 1});
  CHECK(t.shape() == fx::shape{4, 2, 3});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) CHECK(t(i, j, k) == x(j, k, i));
  fx::tensor<double> p = fx::permute(x, {2, 0, 1});
  CHECK(p.to_vector() == t.to_vector());
  fx::tensor<double> r = fx::transpose(x);
  CHECK(r.shape() == fx::shape{4, 3, 2});
  CHECK(r(3, 2, 1) == x(1, 2, 3));
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::transpose(x, {0, 0, 1}); }, "transpose: axis 0 appears twice");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::transpose(x, {0, 1}); }, "transpose: perm has 2 entries for shape (2, 3, 4)");
}

TEST_CASE("remap: shape ops fuse: one output buffer for a chain of them") {
  auto x = test::random_tensor<float>({64, 32}, 2);
  auto b = test::random_tensor<float>({64}, 3);
  const auto before = fx::memory::stats().allocations;
  fx::tensor<float> y = fx::transpose(x) * 2.f + fx::expand_dims(b, 0) - fx::squeeze(fx::expand_dims(fx::transpose(x), 1));
  CHECK(fx::memory::stats().allocations - before == 1);
  for (int i = 0; i < 32; i += 5)
    for (int j = 0; j < 64; j += 7) CHECK(y(i, j) == doctest::Approx(x(j, i) * 2.f + b(j) - x(j, i)));
}

TEST_CASE("remap: reshape, expand_dims, squeeze, broadcast_to") {
  fx::tensor<int> x = {{1, 2, 3}, {4, 5, 6}};
  fx::tensor<int> r = fx::reshape(x, {3, -1});
  CHECK(r.shape() == fx::shape{3, 2});
  CHECK(r.storage_id() == x.storage_id());  // zero copy
  CHECK(r.to_vector() == x.to_vector());
  fx::tensor<int> r2 = fx::reshape(x + 1, {-1});
  CHECK(r2.to_vector() == std::vector<int>{2, 3, 4, 5, 6, 7});
  test::check_throws_with<fx::shape_error>([&] { (void)fx::reshape(x, {4, -1}); },
                                           "reshape: cannot reshape a tensor of shape (2, 3) (6 elements) into shape (4, -1)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::reshape(x, {-1, -1}); }, "reshape:");
  CHECK(fx::tensor<int>(fx::expand_dims(x, -1)).shape() == fx::shape{2, 3, 1});
  CHECK(fx::tensor<int>(fx::expand_dims(x, 1)).shape() == fx::shape{2, 1, 3});
  CHECK(fx::tensor<int>(fx::squeeze(fx::reshape(x, {1, 2, 1, 3}))).shape() == fx::shape{2, 3});
  CHECK(fx::tensor<int>(fx::squeeze(fx::reshape(x, {1, 2, 1, 3}), {2})).shape() == fx::shape{1, 2, 3});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::squeeze(x, {0}); },
                                                "squeeze: axis 0 of shape (2, 3) has extent 2, not 1");
  fx::tensor<int> b = fx::broadcast_to(fx::tensor<int>{1, 2, 3}, {2, 3});
  CHECK(b.to_vector() == std::vector<int>{1, 2, 3, 1, 2, 3});
  test::check_throws_with<fx::shape_error>([&] { (void)fx::broadcast_to(x, {3, 3}); },
                                           "broadcast_to: shapes (2, 3) and (3, 3) cannot be broadcast");
}

TEST_CASE("remap: strided slices follow Python's slicing") {
  std::vector<int> base(10);
  for (int i = 0; i < 10; ++i) base[static_cast<std::size_t>(i)] = i;
  fx::tensor<int> x = fx::reshape(fx::tensor<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  struct Case {
    fx::index_t b, e, s;
  };
  for (auto c : {Case{0, 10, 1}, Case{2, 8, 3}, Case{-3, fx::end, 1}, Case{fx::end, fx::end, -1}, Case{8, 2, -2},
                 Case{5, 5, 1}, Case{-100, 100, 4}, Case{9, -100, -3}, Case{3, 1, 1}}) {
    std::vector<int> want;  // Python semantics, written out
    const fx::index_t n = 10;
    auto norm = [&](fx::index_t v, bool is_begin) -> fx::index_t {
      if (v == fx::end) return c.s > 0 ? n : (is_begin ? n - 1 : -1);
      if (v < 0) v += n;
      return c.s > 0 ? std::clamp<fx::index_t>(v, 0, n) : std::clamp<fx::index_t>(v, -1, n - 1);
    };
    for (fx::index_t i = norm(c.b, true); c.s > 0 ? i < norm(c.e, false) : i > norm(c.e, false); i += c.s)
      want.push_back(base[static_cast<std::size_t>(i)]);
    CAPTURE(c.b);
    CAPTURE(c.e);
    CAPTURE(c.s);
    CHECK(fx::tensor<int>(fx::strided_slice(x, {c.b}, {c.e}, {c.s})).to_vector() == want);
  }
  fx::tensor<int> m = {{1, 2, 3}, {4, 5, 6}};
  CHECK(fx::tensor<int>(fx::slice(m, {0, 1}, {2, -1})).to_vector() == std::vector<int>{2, 3, 5, 6});
  CHECK(fx::tensor<int>(fx::strided_slice(m, {1}, {2})).to_vector() == std::vector<int>{4, 5, 6});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::strided_slice(m, {0}, {1}, {0}); }, "strided_slice: step on axis 0 is 0");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::slice(m, {0, 2}, {1, 2}); }, "slice: begin 2 and size 2 do not fit axis 1 of extent 3");
}
