#include "../test_util.hpp"

#include <fluxion/backend/cpu/evaluator.hpp>

// Principle 2: a statement runs as one loop over memory. Proof: the allocator sees exactly one
// request (the output) and the view the evaluator runs is vectorized end to end.

TEST_CASE("fusion: a*b + c*d - sin(e) allocates exactly its output") {
  for (int n : {16, 1000, 1 << 16, 1 << 20}) {
    auto a = test::random_tensor<float>({n}, 1), b = test::random_tensor<float>({n}, 2),
         c = test::random_tensor<float>({n}, 3), d = test::random_tensor<float>({n}, 4),
         e = test::random_tensor<float>({n}, 5);
    const auto before = fx::memory::stats().allocations;
    fx::tensor<float> r = a * b + c * d - fx::sin(e);
    CHECK(fx::memory::stats().allocations - before == 1);
    const auto av = a.to_vector(), bv = b.to_vector(), cv = c.to_vector(), dv = d.to_vector(), ev = e.to_vector(),
               rv = r.to_vector();
    for (std::size_t i = 0; i < rv.size(); i += 1 + rv.size() / 97)
      CHECK(rv[i] == doctest::Approx(av[i] * bv[i] + cv[i] * dv[i] - std::sin(ev[i])).epsilon(1e-5));
  }
}

TEST_CASE("fusion: the chain's view is evaluated with SIMD batches") {
  fx::tensor<float> a(fx::shape{8});
  auto expr = a * a + a * a - fx::sin(a);
  using view = decltype(expr.make_view());
  static_assert(fx::detail::simd::enabled<view, float>::value);
  using mixed = decltype((fx::cast<float>(fx::tensor<int>{}) + a).make_view());
  static_assert(!fx::detail::simd::enabled<mixed, float>::value);  // casts run the scalar loop
  CHECK(true);
}

TEST_CASE("fusion: an expression is lazy until materialized") {
  fx::tensor<float> a = {1.f, 2.f};
  const auto before = fx::memory::stats().allocations;
  auto e = fx::exp(a) * 3.f + fx::reduce_sum(a);  // the reduction is a boundary: computed on use
  CHECK(fx::memory::stats().allocations == before);
  fx::tensor<float> r = e;
  CHECK(fx::memory::stats().allocations - before == 2);  // the reduction's scalar and the output
  CHECK(r(1) == doctest::Approx(std::exp(2.f) * 3.f + 3.f));
}
