#include "gradient_checks.hpp"

// Indexing and assembly ops against finite differences in reverse and forward mode: gather along
// each axis (repeated indices sum their gradients), concat, stack, split, pad, one_hot times
// values, where and clip.

using test::check_op;
using test::random_tensor;

namespace {
const auto x234 = random_tensor<double>({2, 3, 4}, 8);
}

TEST_CASE("rules: gather") {
  check_op("gather axis 0", [](const auto& v) { return fx::gather(v, fx::tensor<int>{1, 0, 1}); }, x234);
  check_op("gather axis 1", [](const auto& v) { return fx::gather(v, fx::tensor<int>{2, 0, 2}, 1); }, x234);
  check_op("gather axis -1, 2-D indices",
           [](const auto& v) { return fx::gather(v, fx::tensor<int>{{3, 0}, {1, 3}}, -1); }, x234);
  // A gather inside an elementwise statement: its tangent once carried no derivative order, and the
  // compiler instantiated tangents of tangents without end (the reason rules_shape was removed).
  check_op("gather times a scalar", [](const auto& v) { return fx::gather(v, fx::tensor<int>{2, 0, 2}, 1) * 2.0; }, x234);
  check_op("gather of an expression", [](const auto& v) { return fx::gather(fx::exp(v), fx::tensor<int>{4, 0}); },
           random_tensor<double>({5}, 1));
}

TEST_CASE("rules: concat, stack and split") {
  check_op("concat", [](const auto& a, const auto& b) { return fx::concat({a, b}, 1); }, random_tensor<double>({2, 3}, 2),
           random_tensor<double>({2, 1}, 3));
  check_op("concat of expressions", [](const auto& v) { return fx::concat({v, fx::tensor<double>(v * v)}, 2); }, x234);
  check_op("concat times a scalar", [](const auto& v) { return fx::concat({v, v}, 0) * 2.0; }, x234);
  check_op("stack", [](const auto& a, const auto& b) { return fx::stack({a, b}, 1); }, random_tensor<double>({2, 3}, 4),
           random_tensor<double>({2, 3}, 5));
  check_op("stack at the end", [](const auto& v) { return fx::stack({v, fx::tensor<double>(fx::sin(v))}, -1) - 1.0; },
           x234);
  // split's pieces are slices of one materialized tensor; weight them differently
  check_op("split", [](const auto& v) {
    auto parts = fx::split(v, {1, -1}, 1);
    return fx::concat({fx::tensor<double>(parts[1] * 3.0), parts[0]}, 1);
  }, x234);
}

TEST_CASE("rules: pad") {
  check_op("pad", [](const auto& v) { return fx::pad(v, {{1, 0}, {0, 2}, {1, 1}}, 3.0); }, x234);
  check_op("pad of an expression", [](const auto& v) { return fx::pad(v * v, {{2, 1}}); }, random_tensor<double>({3}, 6));
}

TEST_CASE("rules: one_hot * values, where and clip") {
  const fx::tensor<int> labels = {2, 0, 3};
  check_op("one_hot * values", [&](const auto& v) { return fx::one_hot<double>(labels, 4) * v; },
           random_tensor<double>({3, 4}, 7));
  check_op("one_hot * values broadcast", [&](const auto& v) { return fx::one_hot<double>(labels, 4) * fx::exp(v); },
           random_tensor<double>({4}, 8));
  check_op("where", [](const auto& a, const auto& b) { return fx::where(a > 0.0, a * b, fx::sin(b)); },
           test::both_signs({2, 3}, 9, 0.1, 2), random_tensor<double>({3}, 10));
  check_op("where with a scalar branch", [](const auto& v) { return fx::where(v < 0.0, 0.5, v * v); },
           test::both_signs({5}, 11, 0.1, 2));
  // values at least 0.1 from the bounds, where clip has kinks
  check_op("clip", [](const auto& v) { return fx::clip(v, -1.0, 1.0); },
           fx::tensor<double>{-1.9, -0.8, -0.2, 0.3, 0.9, 1.5});
  check_op("clip with tensor bounds", [](const auto& v, const auto& lo) { return fx::clip(v, lo, 2.0); },
           fx::tensor<double>{{-1.5, 0.5, 1.2}, {2.5, -0.3, 0.1}}, fx::tensor<double>{-1.0, 0.0, 1.0});
}

TEST_CASE("rules: unsorted_segment_sum and unsorted_segment_mean") {
  const fx::tensor<std::int32_t> ids = {{1, 0, 1}, {3, 1, 1}};
  check_op("segment sum", [&](const auto& v) { return fx::unsorted_segment_sum(v, ids, 4); }, x234);
  check_op("segment sum of an expression, rows", [&](const auto& v) {
    return fx::unsorted_segment_sum(v * v, fx::tensor<std::int64_t>{2, 2}, 3) * 3.0;
  }, x234);
  check_op("segment mean", [&](const auto& v) { return fx::unsorted_segment_mean(fx::sin(v), ids, 5); }, x234);
}
