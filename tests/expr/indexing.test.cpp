#include "../test_util.hpp"

TEST_CASE_TEMPLATE("gather: along every axis against a naive loop", I, std::int32_t, std::int64_t) {
  auto p = test::random_tensor<float>({3, 4, 5}, 1);
  fx::tensor<I> idx = {{2, 0}, {1, 1}, {0, 2}};
  for (int axis = 0; axis < 3; ++axis) {
    fx::tensor<float> g = fx::gather(p, idx, axis);
    fx::shape want_shape;
    for (int d = 0; d < axis; ++d) want_shape.push_back(p.shape()[d]);
    want_shape.push_back(3), want_shape.push_back(2);
    for (int d = axis + 1; d < 3; ++d) want_shape.push_back(p.shape()[d]);
    CHECK(g.shape() == want_shape);
    for (fx::index_t i = 0; i < g.size(); ++i) {
      auto c = test::unravel(i, g.shape());
      std::vector<fx::index_t> src;
      for (int d = 0; d < axis; ++d) src.push_back(c[static_cast<std::size_t>(d)]);
      src.push_back(idx(c[static_cast<std::size_t>(axis)], c[static_cast<std::size_t>(axis) + 1]));
      for (std::size_t d = static_cast<std::size_t>(axis) + 2; d < c.size(); ++d) src.push_back(c[d]);
      CHECK(g.to_vector()[static_cast<std::size_t>(i)] == p(src[0], src[1], src[2]));
    }
  }
}

TEST_CASE("gather: scalar index, fusion with the consumer, errors") {
  fx::tensor<int> t = {0, 1, 2};
  CHECK(fx::tensor<int>(fx::gather(t, 2)).item() == 2);
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::gather(t, 7); }, "gather: indices = 7 is not in [0, 3)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::gather(t, fx::tensor<int>{1, -1}); }, "gather: indices = -1 is not in [0, 3)");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::gather(t, 0, 1); }, "gather: axis 1 is out of range");
  auto emb = test::random_tensor<float>({10, 8}, 3);
  fx::tensor<int> ids = {3, 3, 9};
  const auto before = fx::memory::stats().allocations;
  fx::tensor<float> y = fx::gather(emb, ids) * 2.f + 1.f;
  CHECK(fx::memory::stats().allocations - before == 1);
  CHECK(y(2, 5) == doctest::Approx(emb(9, 5) * 2.f + 1.f));
}

TEST_CASE("one_hot") {
  fx::tensor<int> l = {0, 2, 5, -1};
  fx::tensor<float> o = fx::one_hot(l, 3);
  CHECK(o.shape() == fx::shape{4, 3});
  CHECK(o.to_vector() == std::vector<float>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0});
  fx::tensor<double> o0 = fx::one_hot<double>(fx::tensor<int>{1, 0}, 2, 5.0, -1.0, 0);
  CHECK(o0.shape() == fx::shape{2, 2});
  CHECK(o0.to_vector() == std::vector<double>{-1, 5, 5, -1});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::one_hot(l, -2); }, "one_hot: depth = -2 is negative");
}

TEST_CASE("concat, stack, split, pad") {
  fx::tensor<int> a = {{1, 2}, {3, 4}}, b = {{5, 6}};
  CHECK(fx::tensor<int>(fx::concat({a, b}, 0)).to_vector() == std::vector<int>{1, 2, 3, 4, 5, 6});
  fx::tensor<int> c1 = fx::concat({a, a}, 1);
  CHECK(c1.shape() == fx::shape{2, 4});
  CHECK(c1.to_vector() == std::vector<int>{1, 2, 1, 2, 3, 4, 3, 4});
  test::check_throws_with<fx::shape_error>([&] { (void)fx::concat({a, b}, 1); }, "concat: shapes (2, 2) and (1, 2) differ outside axis 1");
  fx::tensor<int> s = fx::stack({a, fx::tensor<int>(a * 10)}, 2);
  CHECK(s.shape() == fx::shape{2, 2, 2});
  CHECK(s.to_vector() == std::vector<int>{1, 10, 2, 20, 3, 30, 4, 40});
  CHECK(fx::tensor<int>(fx::stack({a, fx::tensor<int>(a * 10)})).to_vector() == std::vector<int>{1, 2, 3, 4, 10, 20, 30, 40});
  test::check_throws_with<fx::shape_error>([&] { (void)fx::stack({a, b}); }, "stack: shapes (2, 2) and (1, 2) differ");
  fx::tensor<int> x = {{1, 2, 3, 4, 5}};
  auto parts = fx::split(x, std::vector<fx::index_t>{2, -1}, 1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].to_vector() == std::vector<int>{1, 2});
  CHECK(parts[1].to_vector() == std::vector<int>{3, 4, 5});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::split(x, 2, 1); }, "split: axis 1 of shape (1, 5) cannot be split into 2 equal pieces");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::split(x, std::vector<fx::index_t>{2, 2}, 1); }, "split: sizes add up to 4");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::split(x, std::vector<fx::index_t>{-1, 2, -1}, 1); },
                                                "split: sizes 0 and 2 are both -1; at most one size may be inferred");
  fx::tensor<int> p = fx::pad(a, {{0, 1}, {2, 0}}, -1);
  CHECK(p.shape() == fx::shape{3, 4});
  CHECK(p.to_vector() == std::vector<int>{-1, -1, 1, 2, -1, -1, 3, 4, -1, -1, -1, -1});
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::pad(a, {{0, 1}}); }, "pad: 1 paddings given for shape (2, 2)");
}

TEST_CASE("pad: a strided operand written into a sub-block keeps its rows apart") {
  // The operand and the destination block share strides (6, 1) but neither is contiguous: the
  // evaluator's flat fast path must not treat them as one row.
  fx::tensor<float> x = {{0, 1, 2, 3, 4, 5}, {6, 7, 8, 9, 10, 11}};
  fx::tensor<float> p = fx::pad(fx::strided_slice(x, {0, 0}, {2, 3}), {{0, 0}, {0, 3}}, -1.f);
  CHECK(p.to_vector() == std::vector<float>{0, 1, 2, -1, -1, -1, 6, 7, 8, -1, -1, -1});
}

TEST_CASE("unsorted_segment_sum and unsorted_segment_mean against a loop") {
  const auto x = test::random_tensor<double>({4, 3, 2}, 41);
  const fx::tensor<std::int64_t> ids = {{2, 0, 2}, {4, 2, 0}, {0, 0, 0}, {2, 4, 1}};  // a prefix (4, 3) of x's shape
  fx::tensor<double> s = fx::unsorted_segment_sum(x, ids, 6);
  fx::tensor<double> m = fx::unsorted_segment_mean(x, ids, 6);
  CHECK(s.shape() == fx::shape{6, 2});
  std::vector<double> sum(12, 0.0), count(6, 0.0);
  const auto iv = ids.to_vector();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b) {
      const auto seg = static_cast<std::size_t>(iv[static_cast<std::size_t>(a * 3 + b)]);
      count[seg] += 1;
      for (int c = 0; c < 2; ++c) sum[seg * 2 + static_cast<std::size_t>(c)] += x(a, b, c);
    }
  for (std::size_t k = 0; k < 12; ++k) {
    CHECK(s.to_vector()[k] == doctest::Approx(sum[k]));
    CHECK(m.to_vector()[k] == doctest::Approx(count[k / 2] > 0 ? sum[k] / count[k / 2] : 0.0));
  }
  CHECK(s(3, 1) == 0.0);  // a segment nothing names
  // ids over the first axis only, of an expression, int32 ids
  fx::tensor<float> rows = fx::unsorted_segment_sum(fx::tensor<float>{{1, 2}, {3, 4}, {5, 6}} * 2.f, fx::tensor<std::int32_t>{1, 1, 0}, 2);
  CHECK(rows.to_vector() == std::vector<float>{10, 12, 8, 12});
  fx::tensor<float> none = fx::unsorted_segment_sum(fx::tensor<float>(fx::shape{0, 2}), fx::tensor<std::int32_t>(fx::shape{0}), 3);
  CHECK(none.to_vector() == std::vector<float>(6, 0.f));
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::unsorted_segment_sum(x, ids, 4); },
                                            "unsorted_segment_sum: segment_ids[1, 0] = 4 is not in [0, 4)");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::unsorted_segment_sum(x, fx::tensor<std::int32_t>{0, -1, 0, 0}, 4); },
                                            "unsorted_segment_sum: segment_ids[1] = -1 is not in [0, 4)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::unsorted_segment_sum(x, fx::tensor<std::int32_t>{0, 1, 0}, 4); },
                                           "unsorted_segment_sum: segment_ids of shape (3,) is not a prefix of data's shape (4, 3, 2)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::unsorted_segment_sum(x, ids, -1); },
                                                "unsorted_segment_sum: num_segments = -1 is negative");
}

TEST_CASE("gather: the SIMD rows (stop 60), contiguous, strided and element by element, against a loop") {
  const auto p = test::random_tensor<float>({37, 40}, 61);
  const fx::tensor<std::int32_t> rows = {36, 0, 5, 5, 19};
  const fx::tensor<std::int32_t> columns = {39, 2, 2, 0, 17, 38, 1};
  auto at = [&](fx::index_t i, fx::index_t j) { return p.data()[i * 40 + j]; };
  // Rows along axis 0: one index per output row, a contiguous load.
  const fx::tensor<float> r = fx::gather(p, rows, 0) * 2.f;
  for (fx::index_t i = 0; i < 5; ++i)
    for (fx::index_t j = 0; j < 40; ++j) CHECK(r(i, j) == 2.f * at(rows.data()[i], j));
  // Columns, transposed: one index per output row, its elements 40 apart in p.
  const fx::tensor<float> t = fx::transpose(fx::gather(p, columns, 1), {1, 0});  // (7, 37): row k reads column columns[k]
  for (fx::index_t k = 0; k < 7; ++k)
    for (fx::index_t i = 0; i < 37; ++i) CHECK(t(k, i) == at(i, columns.data()[k]));
  // Assigned as they are, slices of 8 or more elements are copied whole (gather_expr::direct).
  const fx::tensor<float> d = fx::gather(p, rows, 0);
  for (fx::index_t i = 0; i < 5; ++i)
    for (fx::index_t j = 0; j < 40; ++j) CHECK(d(i, j) == at(rows.data()[i], j));
  const auto q = test::random_tensor<float>({3, 5, 16}, 62);
  const fx::tensor<std::int64_t> ids = {{4, 0}, {4, 2}};
  const fx::tensor<float> g = fx::gather(q, ids, 1);  // (3, 2, 2, 16)
  REQUIRE(g.shape() == fx::shape{3, 2, 2, 16});
  for (fx::index_t o = 0; o < 3; ++o)
    for (fx::index_t a = 0; a < 2; ++a)
      for (fx::index_t b = 0; b < 2; ++b)
        for (fx::index_t e = 0; e < 16; ++e) CHECK(g(o, a, b, e) == q(o, ids(a, b), e));
  // Along the last axis: a different index for each element of a row.
  const fx::tensor<float> c = fx::gather(p, columns, 1) + 1.f;
  for (fx::index_t i = 0; i < 37; ++i)
    for (fx::index_t k = 0; k < 7; ++k) CHECK(c(i, k) == at(i, columns.data()[k]) + 1.f);
}
