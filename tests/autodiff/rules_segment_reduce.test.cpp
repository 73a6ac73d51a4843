#include "gradient_checks.hpp"

#include <limits>

// unsorted_segment_max and unsorted_segment_min against finite differences in reverse and forward
// mode, at values without ties; with ties, the gradient split among them by hand.

using test::check_op;
using test::random_tensor;

TEST_CASE("rules: unsorted_segment_max and unsorted_segment_min") {
  const auto x = random_tensor<double>({5, 3}, 51);  // distinct values, far apart against the step
  const fx::tensor<std::int64_t> ids = {2, 0, 2, 1, 0};
  check_op("unsorted_segment_max", [&](const auto& v) { return fx::unsorted_segment_max(v, ids, 3) * 2.0; }, x);
  check_op("unsorted_segment_min of an expression",
           [&](const auto& v) { return fx::unsorted_segment_min(fx::sin(v) * v, ids, 3); }, x);
}

TEST_CASE("unsorted_segment_max: the gradient goes to the maxima, split among ties") {
  fx::tensor<double> x = {3.0, 1.0, 3.0, 2.0, 7.0};
  const fx::tensor<std::int32_t> ids = {0, 0, 0, 1, 2};
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> m = fx::unsorted_segment_max(x, ids, 4);  // segment 3 empty
  CHECK(m.to_vector() == std::vector<double>{3.0, 2.0, 7.0, std::numeric_limits<double>::lowest()});
  const fx::tensor<double> g = tape.gradient(fx::reduce_sum(m * fx::tensor<double>{1.0, 2.0, 3.0, 4.0}), x);
  CHECK(g.to_vector() == std::vector<double>{0.5, 0.0, 0.5, 2.0, 3.0});
}
