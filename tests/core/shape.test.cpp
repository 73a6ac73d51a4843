#include <doctest/doctest.h>

#include <fluxion/core/shape.hpp>

namespace fx = fluxion;

TEST_CASE("shape: rank, size and printing") {
  fx::shape s{2, 3};
  CHECK(s.rank() == 2);
  CHECK(s.size() == 6);
  CHECK(fx::to_string(s) == "(2, 3)");
  CHECK(fx::to_string(fx::shape{3}) == "(3,)");
  CHECK(fx::to_string(fx::shape{}) == "()");
  CHECK(fx::shape{}.size() == 1);
  CHECK(fx::shape{4, 0, 2}.size() == 0);
}

TEST_CASE("shape: broadcasting follows NumPy") {
  CHECK(fx::broadcast_shapes({2, 3}, {3}, "add") == fx::shape{2, 3});
  CHECK(fx::broadcast_shapes({2, 1, 4}, {3, 1}, "add") == fx::shape{2, 3, 4});
  CHECK(fx::broadcast_shapes({}, {5}, "add") == fx::shape{5});
  CHECK(fx::broadcast_shapes({0, 1}, {1, 3}, "add") == fx::shape{0, 3});
  try {
    fx::broadcast_shapes({2, 3}, {4}, "add");
    FAIL("no exception");
  } catch (const fx::shape_error& e) {
    CHECK(std::string(e.what()) == "add: shapes (2, 3) and (4,) cannot be broadcast");
  }
}

TEST_CASE("shape: errors") {
  CHECK_THROWS_WITH_AS(
      fx::shape({1, 2, 3, 4, 5, 6, 7, 8, 9}),
      "shape: cannot add an axis of extent 9 to shape (1, 2, 3, 4, 5, 6, 7, 8): the rank would exceed the maximum of 8",
      fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::shape({2, -1}), "shape: extent -1 is negative (after the axes (2,))", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::shape({std::int64_t{1} << 30, std::int64_t{1} << 30}),
                       "shape: adding an axis of extent 1073741824 to shape (1073741824,) would give more than 2^56 elements",
                       fx::invalid_argument);
  CHECK(fx::shape({std::int64_t{1} << 28, 0, std::int64_t{1} << 28}).size() == 0);
  CHECK(fx::normalize_axis(-1, 3, "op") == 2);
  try {
    fx::normalize_axis(3, 3, "reduce_sum");
    FAIL("no exception");
  } catch (const fx::out_of_range& e) {
    CHECK(std::string(e.what()) == "reduce_sum: axis 3 is out of range [-3, 3) for rank 3");
  }
}

TEST_CASE("shape: Keras's sample_weight shapes, aligned to the losses' rank") {
  using fx::detail::sample_weight_shape;
  CHECK(sample_weight_shape({4}, 1) == fx::shape{4});
  CHECK(sample_weight_shape({4, 1}, 1) == fx::shape{4});          // Keras's (batch, 1)
  CHECK(sample_weight_shape({4}, 2) == fx::shape{4, 1});          // one weight per example: each step
  CHECK(sample_weight_shape({4, 5, 1}, 2) == fx::shape{4, 5});    // per-step weights with a unit axis
  CHECK(sample_weight_shape({}, 2) == fx::shape{1, 1});           // a scalar
  CHECK(sample_weight_shape({4, 5}, 1) == fx::shape{4, 5});       // too many axes: left for the caller to reject
  CHECK(sample_weight_shape({4, 1}, 2) == fx::shape{4, 1});       // the unit axis is within the rank: kept
  CHECK(fx::detail::position_text(5, {2, 3}) == "[1, 2]");
}
