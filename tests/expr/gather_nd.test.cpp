#include "../test_util.hpp"

#include <limits>

// gather_nd, scatter_nd and tensor_scatter_nd_add against naive loops and TensorFlow's docstring
// examples; their errors.

namespace {

/// The element of p at the flat position of the multi-index c.
template <class T>
T at_index(const fx::tensor<T>& p, const std::vector<fx::index_t>& c) {
  fx::index_t flat = 0;
  for (int d = 0; d < p.rank(); ++d) flat = flat * p.shape()[d] + c[static_cast<std::size_t>(d)];
  return p.data()[flat];
}

/// gather_nd(p, idx, batch_dims) against a naive loop: each output element read from p at its
/// batch position, its tuple and its place in the slice.
template <class I>
void check_gather_nd(const fx::tensor<float>& p, const fx::tensor<I>& idx, int b) {
  CAPTURE(b);
  CAPTURE(fx::to_string(idx.shape()));
  const fx::tensor<float> g = fx::gather_nd(p, idx, b);
  const int k = static_cast<int>(idx.shape()[idx.rank() - 1]);
  fx::shape want(idx.shape().begin(), idx.shape().end() - 1);
  for (int d = b + k; d < p.rank(); ++d) want.push_back(p.shape()[d]);
  REQUIRE(g.shape() == want);
  const auto iv = idx.to_vector();
  for (fx::index_t i = 0; i < g.size(); ++i) {
    const auto c = test::unravel(i, g.shape());
    const int outer = idx.rank() - 1;
    fx::index_t tuple = 0;
    for (int d = 0; d < outer; ++d) tuple = tuple * idx.shape()[d] + c[static_cast<std::size_t>(d)];
    std::vector<fx::index_t> src(c.begin(), c.begin() + b);  // the batch position
    for (int d = 0; d < k; ++d) src.push_back(static_cast<fx::index_t>(iv[static_cast<std::size_t>(tuple * k + d)]));
    for (std::size_t d = static_cast<std::size_t>(outer); d < c.size(); ++d) src.push_back(c[d]);
    CHECK(g.data()[i] == at_index(p, src));
  }
}

}  // namespace

TEST_CASE_TEMPLATE("gather_nd: K = 1, 2, 3 against a naive loop", I, std::int32_t, std::int64_t) {
  const auto p = test::random_tensor<float>({3, 4, 5}, 11);
  const std::vector<fx::tensor<I>> all = {
      fx::tensor<I>{{2}, {0}, {2}, {1}},                                   // (4, 1): rows (4, 4, 5)
      fx::tensor<I>{{{0, 3}, {2, 1}}, {{1, 1}, {0, 0}}, {{2, 3}, {0, 3}}},  // (3, 2, 2): slices (3, 2, 5)
      fx::tensor<I>{{1, 2, 4}, {0, 0, 0}, {2, 3, 1}},                      // (3, 3): elements (3,)
  };
  for (const auto& idx : all) check_gather_nd(p, idx, 0);
}

TEST_CASE_TEMPLATE("gather_nd with batch_dims 1 and 2 against a naive loop", I, std::int32_t, std::int64_t) {
  const auto p = test::random_tensor<float>({2, 3, 4, 5}, 12);
  struct example {
    int batch_dims;
    fx::tensor<I> idx;
  };
  const std::vector<example> all = {
      {1, fx::tensor<I>{{{2}, {0}, {2}}, {{1}, {1}, {0}}}},                      // (2, 3, 1): rows (2, 3, 4, 5)
      {1, fx::tensor<I>{{{0, 3}, {2, 1}}, {{1, 1}, {2, 0}}}},                    // (2, 2, 2): slices (2, 2, 5)
      {1, fx::tensor<I>{{2, 3, 4}, {0, 0, 1}}},                                  // (2, 3): one element a batch
      {2, fx::tensor<I>{{{1}, {3}, {0}}, {{2}, {2}, {0}}}},                      // (2, 3, 1): rows (2, 3, 5)
      {2, fx::tensor<I>{{{{3, 4}, {0, 1}}, {{1, 1}, {2, 2}}, {{0, 0}, {3, 3}}},
                        {{{1, 0}, {1, 4}}, {{2, 3}, {0, 2}}, {{3, 1}, {2, 0}}}}},  // (2, 3, 2, 2): elements (2, 3, 2)
  };
  for (const auto& [b, idx] : all) check_gather_nd(p, idx, b);
  // batch_dims 0 is the plain gather_nd.
  const fx::tensor<I> pairs = {{1, 2}, {0, 1}};
  CHECK(fx::tensor<float>(fx::gather_nd(p, pairs, 0)).to_vector() == fx::tensor<float>(fx::gather_nd(p, pairs)).to_vector());
}

TEST_CASE("gather_nd and scatter_nd: TensorFlow's docstring examples") {
  // tf.gather_nd(params=[['a', 'b'], ['c', 'd']], indices=[[1, 0], [0, 1]]) -> ['c', 'b'], as numbers.
  const fx::tensor<double> p = {{1.0, 2.0}, {3.0, 4.0}};
  CHECK(fx::tensor<double>(fx::gather_nd(p, fx::tensor<std::int32_t>{{1, 0}, {0, 1}})).to_vector() == std::vector<double>{3.0, 2.0});
  CHECK(fx::tensor<double>(fx::gather_nd(p, fx::tensor<std::int32_t>{{1}})).to_vector() == std::vector<double>{3.0, 4.0});
  // A single tuple: indices of rank 1 give one element.
  const fx::tensor<double> one = fx::gather_nd(p, fx::tensor<std::int64_t>{0, 1});
  CHECK(one.rank() == 0);
  CHECK(one.item() == 2.0);
  // tf.gather_nd(params=[[['a0', 'b0'], ['c0', 'd0']], [['a1', 'b1'], ['c1', 'd1']]], indices=[[1], [0]],
  //   batch_dims=1) -> [['c0', 'd0'], ['a1', 'b1']], and indices=[[[1]], [[0]]] -> [[['c0', 'd0']], [['a1', 'b1']]].
  const fx::tensor<double> batched = {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}};
  const fx::tensor<double> per_batch = fx::gather_nd(batched, fx::tensor<std::int32_t>{{1}, {0}}, 1);
  CHECK(per_batch.shape() == fx::shape{2, 2});
  CHECK(per_batch.to_vector() == std::vector<double>{3, 4, 5, 6});
  const fx::tensor<double> nested = fx::gather_nd(batched, fx::tensor<std::int32_t>{{{1}}, {{0}}}, 1);
  CHECK(nested.shape() == fx::shape{2, 1, 2});
  CHECK(nested.to_vector() == std::vector<double>{3, 4, 5, 6});
  // tf.scatter_nd(indices=[[4], [3], [1], [7]], updates=[9, 10, 11, 12], shape=[8])
  //   -> [0, 11, 0, 10, 9, 0, 0, 12]
  const fx::tensor<int> s = fx::scatter_nd(fx::tensor<std::int32_t>{{4}, {3}, {1}, {7}}, fx::tensor<int>{9, 10, 11, 12}, fx::shape{8});
  CHECK(s.to_vector() == std::vector<int>{0, 11, 0, 10, 9, 0, 0, 12});
  // Repeated tuples add up; slices of rank 1.
  const fx::tensor<float> rows = fx::scatter_nd(fx::tensor<std::int32_t>{{0}, {2}, {0}},
                                                fx::tensor<float>{{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}, fx::shape{3, 2});
  CHECK(rows.to_vector() == std::vector<float>{6.f, 8.f, 0.f, 0.f, 3.f, 4.f});
  // tf.tensor_scatter_nd_add([1, 2, 3, 4, 5, 6, 7, 8], [[4], [3], [1], [7]], [9, 10, 11, 12])
  //   -> [1, 13, 3, 14, 14, 6, 7, 20]
  const fx::tensor<int> added = fx::tensor_scatter_nd_add(fx::tensor<int>{1, 2, 3, 4, 5, 6, 7, 8},
                                                          fx::tensor<std::int32_t>{{4}, {3}, {1}, {7}}, fx::tensor<int>{9, 10, 11, 12});
  CHECK(added.to_vector() == std::vector<int>{1, 13, 3, 14, 14, 6, 7, 20});
}

TEST_CASE("scatter_nd against a naive loop, and gather_nd of it") {
  const auto u = test::random_tensor<double>({4, 3, 2}, 12);
  const fx::tensor<std::int32_t> idx = {{{1, 0}, {2, 3}, {1, 0}}, {{0, 0}, {2, 3}, {1, 2}}, {{0, 1}, {0, 1}, {0, 1}}, {{2, 0}, {1, 3}, {0, 2}}};
  // indices (4, 3, 2) into the first two axes of (3, 4, 2): updates (4, 3) + (2,)... of shape (4, 3, 2).
  const fx::tensor<double> s = fx::scatter_nd(idx, u, fx::shape{3, 4, 2});
  std::vector<double> want(24, 0.0);
  const auto iv = idx.to_vector();
  for (std::size_t t = 0; t < 12; ++t)
    for (std::size_t e = 0; e < 2; ++e)
      want[(static_cast<std::size_t>(iv[2 * t]) * 4 + static_cast<std::size_t>(iv[2 * t + 1])) * 2 + e] += u.data()[2 * t + e];
  const auto got = s.to_vector();
  for (std::size_t i = 0; i < 24; ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-15));
}

TEST_CASE("tensor_scatter_nd_update: TensorFlow's examples, the last repeat wins, against a naive loop") {
  // tf.tensor_scatter_nd_update([1, 2, 3, 4, 5, 6, 7, 8], [[4], [3], [1], [7]], [9, 10, 11, 12])
  //   -> [1, 11, 3, 10, 9, 6, 7, 12]
  const fx::tensor<int> updated = fx::tensor_scatter_nd_update(fx::tensor<int>{1, 2, 3, 4, 5, 6, 7, 8},
                                                               fx::tensor<std::int32_t>{{4}, {3}, {1}, {7}},
                                                               fx::tensor<int>{9, 10, 11, 12});
  CHECK(updated.to_vector() == std::vector<int>{1, 11, 3, 10, 9, 6, 7, 12});
  // Whole rows; a NaN or an infinity in a replaced row is dropped, not multiplied by 0.
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const fx::tensor<double> grid = {{nan, 1.0}, {2.0, 3.0}, {inf, 4.0}};
  const fx::tensor<double> rows = fx::tensor_scatter_nd_update(grid, fx::tensor<std::int64_t>{{2}, {0}, {2}},
                                                               fx::tensor<double>{{5.0, 6.0}, {7.0, 8.0}, {9.0, 10.0}});
  CHECK(rows.to_vector() == std::vector<double>{7.0, 8.0, 2.0, 3.0, 9.0, 10.0});  // row 2: the later of its two
  // Elements of (3, 4, 2) by (row, column) pairs with repeats, against a loop that writes them in order.
  const auto x = test::random_tensor<double>({3, 4, 2}, 14);
  const auto u = test::random_tensor<double>({5, 2}, 15);
  const fx::tensor<std::int32_t> idx = {{1, 0}, {2, 3}, {1, 0}, {0, 2}, {2, 3}};
  const fx::tensor<double> got = fx::tensor_scatter_nd_update(x, idx, u);
  std::vector<double> want = x.to_vector();
  const auto iv = idx.to_vector();
  for (std::size_t t = 0; t < 5; ++t)
    for (std::size_t e = 0; e < 2; ++e)
      want[(static_cast<std::size_t>(iv[2 * t]) * 4 + static_cast<std::size_t>(iv[2 * t + 1])) * 2 + e] = u.data()[2 * t + e];
  CHECK(got.to_vector() == want);
  // No updates: the tensor itself.
  const fx::tensor<double> none = fx::tensor_scatter_nd_update(x, fx::tensor<std::int32_t>(fx::shape{0, 2}), fx::tensor<double>(fx::shape{0, 2}));
  CHECK(none.to_vector() == x.to_vector());
}

TEST_CASE("gather_nd and scatter_nd: errors name the op, the index and the axis") {
  const fx::tensor<float> p = test::random_tensor<float>({3, 4}, 13);
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::gather_nd(p, fx::tensor<std::int32_t>{{0, 1}, {2, 4}}); },
                                            "gather_nd: indices[1, 1] = 4 is not in [0, 4) (axis 1 of params of shape (3, 4))");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::gather_nd(p, fx::tensor<std::int64_t>{{-1}}); },
                                            "gather_nd: indices[0, 0] = -1 is not in [0, 3) (axis 0 of params of shape (3, 4))");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gather_nd(p, fx::tensor<std::int32_t>{{0, 1, 2}}); },
                                           "gather_nd: indices of shape (1, 3) index 3 axes (their last extent), but params of "
                                           "shape (3, 4) has 2");
  // batch_dims: the batch axes' extents, the axes left for the tuples, its range; a bad index names its axis of params.
  const fx::tensor<float> q = test::random_tensor<float>({2, 3, 4}, 14);
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gather_nd(q, fx::tensor<std::int32_t>{{1}, {0}, {2}}, 1); },
                                           "gather_nd: with batch_dims = 1, indices of shape (3, 1) and params of shape (2, 3, 4) "
                                           "must have the same first 1 extents");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gather_nd(q, fx::tensor<std::int32_t>{{1, 2, 0}, {0, 0, 0}}, 1); },
                                           "gather_nd: indices of shape (2, 3) index 3 axes (their last extent) after 1 batch axes, "
                                           "but params of shape (2, 3, 4) has 3");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::gather_nd(q, fx::tensor<std::int32_t>{{1}, {0}}, 2); },
                                                "gather_nd: batch_dims = 2 is not in [0, 2): indices of shape (2, 1) have that many "
                                                "axes before the last, which holds the tuples");
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::gather_nd(q, fx::tensor<std::int32_t>{{1}, {0}}, -1); },
                                                "gather_nd: batch_dims = -1 is not in [0, 2)");
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::gather_nd(q, fx::tensor<std::int32_t>{{1, 4}, {2, 0}}, 1); },
                                            "gather_nd: indices[0, 1] = 4 is not in [0, 4) (axis 2 of params of shape (2, 3, 4))");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gather_nd(p, fx::tensor<std::int32_t>(7)); },
                                           "gather_nd: indices is a scalar; its last axis holds the indices of one element or slice");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::gather_nd(p, fx::tensor<std::int32_t>(fx::shape{2, 0})); },
                                           "gather_nd: indices of shape (2, 0) have an empty last axis; it holds the indices of one element or slice");
  test::check_throws_with<fx::out_of_range>(
      [&] { (void)fx::scatter_nd(fx::tensor<std::int32_t>{{0}, {3}}, fx::tensor<float>{{1.f, 2.f}, {3.f, 4.f}}, fx::shape{3, 2}); },
      "scatter_nd: indices[1, 0] = 3 is not in [0, 3) (axis 0 of the output of shape (3, 2))");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::scatter_nd(fx::tensor<std::int32_t>{{0}, {2}}, fx::tensor<float>{1.f, 2.f}, fx::shape{3, 2}); },
      "scatter_nd: updates of shape (2,) do not fit indices of shape (2, 1) into shape (3, 2): they need shape (2, 2)");
  test::check_throws_with<fx::out_of_range>(
      [&] { (void)fx::tensor_scatter_nd_update(p, fx::tensor<std::int32_t>{{0, 1}, {-1, 0}}, fx::tensor<float>{1.f, 2.f}); },
      "tensor_scatter_nd_update: indices[1, 0] = -1 is not in [0, 3) (axis 0 of tensor of shape (3, 4))");
  test::check_throws_with<fx::shape_error>(
      [&] { (void)fx::tensor_scatter_nd_update(p, fx::tensor<std::int32_t>{{0}, {2}}, fx::tensor<float>{1.f, 2.f}); },
      "tensor_scatter_nd_update: updates of shape (2,) do not fit indices of shape (2, 1) into tensor of shape (3, 4): "
      "they need shape (2, 4)");
  test::check_throws_with<fx::invalid_argument>(
      [&] { (void)fx::tensor_scatter_nd_update(p, fx::tensor<std::int32_t>{{0}}, fx::tensor<float>::none()); },
      "tensor_scatter_nd_update: an operand is none");
}
