#include "../test_util.hpp"

#include <limits>

// unsorted_segment_max and unsorted_segment_min against a naive loop, TensorFlow's docstring
// example, empty segments, NaN, integers and errors. Gradients: autodiff.rules_segment_reduce.

TEST_CASE_TEMPLATE("unsorted_segment_max and min against a loop", I, std::int32_t, std::int64_t) {
  const auto x = test::random_tensor<double>({6, 2, 3}, 41);
  const fx::tensor<I> ids = {3, 0, 3, 1, 0, 3};  // segment 2 is empty
  const fx::tensor<double> mx = fx::unsorted_segment_max(x, ids, 4);
  const fx::tensor<double> mn = fx::unsorted_segment_min(x, ids, 4);
  REQUIRE(mx.shape() == fx::shape{4, 2, 3});
  REQUIRE(mn.shape() == fx::shape{4, 2, 3});
  std::vector<double> want_max(24, std::numeric_limits<double>::lowest()), want_min(24, std::numeric_limits<double>::max());
  const auto iv = ids.to_vector();
  for (std::size_t k = 0; k < 6; ++k)
    for (std::size_t i = 0; i < 6; ++i) {
      const double v = x.data()[k * 6 + i];
      double& a = want_max[static_cast<std::size_t>(iv[k]) * 6 + i];
      double& b = want_min[static_cast<std::size_t>(iv[k]) * 6 + i];
      a = std::max(a, v);
      b = std::min(b, v);
    }
  CHECK(mx.to_vector() == want_max);
  CHECK(mn.to_vector() == want_min);
  // ids of rank 2: the prefix of data's shape.
  const fx::tensor<I> ids2 = {{1, 0}, {1, 1}, {0, 0}, {2, 2}, {1, 0}, {0, 2}};
  const fx::tensor<double> m2 = fx::unsorted_segment_max(x, ids2, 3);
  REQUIRE(m2.shape() == fx::shape{3, 3});
  std::vector<double> want2(9, std::numeric_limits<double>::lowest());
  const auto iv2 = ids2.to_vector();
  for (std::size_t k = 0; k < 12; ++k)
    for (std::size_t i = 0; i < 3; ++i)
      want2[static_cast<std::size_t>(iv2[k]) * 3 + i] = std::max(want2[static_cast<std::size_t>(iv2[k]) * 3 + i], x.data()[k * 3 + i]);
  CHECK(m2.to_vector() == want2);
}

TEST_CASE("unsorted_segment_max: TensorFlow's example, integers, NaN and errors") {
  // tf.math.unsorted_segment_max([[1, 2, 3, 4], [5, 6, 7, 8], [4, 3, 2, 1]], [0, 1, 0], 2)
  //   -> [[4, 3, 3, 4], [5, 6, 7, 8]]
  const fx::tensor<int> c = {{1, 2, 3, 4}, {5, 6, 7, 8}, {4, 3, 2, 1}};
  const fx::tensor<std::int32_t> ids = {0, 1, 0};
  CHECK(fx::unsorted_segment_max(c, ids, 2).to_vector() == std::vector<int>{4, 3, 3, 4, 5, 6, 7, 8});
  CHECK(fx::unsorted_segment_min(c, ids, 3).to_vector() ==
        std::vector<int>{1, 2, 2, 1, 5, 6, 7, 8, INT32_MAX, INT32_MAX, INT32_MAX, INT32_MAX});
  // A NaN makes its segment NaN, wherever it comes.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const fx::tensor<double> withnan = {1.0, nan, 3.0, 2.0, 5.0};
  const auto got = fx::unsorted_segment_max(withnan, fx::tensor<std::int32_t>{0, 0, 0, 1, 1}, 2).to_vector();
  CHECK(std::isnan(got[0]));
  CHECK(got[1] == 5.0);
  test::check_throws_with<fx::out_of_range>([&] { (void)fx::unsorted_segment_max(c, fx::tensor<std::int32_t>{0, 2, 0}, 2); },
                                            "unsorted_segment_max: segment_ids[1] = 2 is not in [0, 2)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::unsorted_segment_min(c, fx::tensor<std::int32_t>{0, 1}, 2); },
                                           "unsorted_segment_min: segment_ids of shape (2,) is not a prefix of data's shape (3, 4)");
}

// Rows long enough for the vector path (37 = whole vectors and a scalar tail at every width), with
// NaN at several lanes and zeros of both signs: max, min and sum against a naive loop, bit for bit.
TEST_CASE_TEMPLATE("unsorted_segment_max, min and sum in vectors: NaN, signed zeros and tails against a loop", T, float,
                   double) {
  const fx::index_t rows = 50, inner = 37, segments = 7;
  fx::tensor<T> x = test::random_tensor<T>({rows, inner}, 43);
  std::vector<T> xv = x.to_vector();
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (fx::index_t k : {3, 17, 29, 36, 40, 77, 512, 1000, 1849}) xv[static_cast<std::size_t>(k)] = nan;
  for (fx::index_t k : {5, 44, 81, 118}) xv[static_cast<std::size_t>(k)] = T(0);
  for (fx::index_t k : {6, 42, 80, 155}) xv[static_cast<std::size_t>(k)] = -T(0);
  std::copy(xv.begin(), xv.end(), x.mutable_data());
  std::vector<std::int32_t> idv(static_cast<std::size_t>(rows));
  for (fx::index_t k = 0; k < rows; ++k) idv[static_cast<std::size_t>(k)] = static_cast<std::int32_t>((k * 5 + k / 7) % (segments - 1));
  fx::tensor<std::int32_t> ids(fx::shape{rows});  // the last segment stays empty
  std::copy(idv.begin(), idv.end(), ids.mutable_data());
  const auto mx = fx::tensor<T>(fx::unsorted_segment_max(x, ids, segments)).to_vector();
  const auto mn = fx::tensor<T>(fx::unsorted_segment_min(x, ids, segments)).to_vector();
  const auto sm = fx::tensor<T>(fx::unsorted_segment_sum(x, ids, segments)).to_vector();
  std::vector<T> want_max(static_cast<std::size_t>(segments * inner), std::numeric_limits<T>::lowest());
  std::vector<T> want_min(want_max.size(), std::numeric_limits<T>::max()), want_sum(want_max.size(), T(0));
  for (fx::index_t k = 0; k < rows; ++k)
    for (fx::index_t i = 0; i < inner; ++i) {
      const T v = xv[static_cast<std::size_t>(k * inner + i)];
      const auto o = static_cast<std::size_t>(idv[static_cast<std::size_t>(k)] * inner + i);
      if (v > want_max[o] || v != v) want_max[o] = v;
      if (v < want_min[o] || v != v) want_min[o] = v;
      want_sum[o] += v;
    }
  auto same_bits = [](const std::vector<T>& got, const std::vector<T>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t e = 0; e < got.size(); ++e) {
      INFO("element " << e << ": " << got[e] << " against " << want[e]);
      if (std::isnan(want[e])) {
        CHECK(std::isnan(got[e]));
      } else {
        CHECK(got[e] == want[e]);
        CHECK(std::signbit(got[e]) == std::signbit(want[e]));
      }
    }
  };
  same_bits(mx, want_max);
  same_bits(mn, want_min);
  same_bits(sm, want_sum);
  CHECK(std::count_if(mx.begin(), mx.end(), [](T v) { return std::isnan(v); }) > 0);
}
