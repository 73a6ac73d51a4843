#include <limits>
#include "../test_util.hpp"

TEST_CASE("tensor: construction from scalars and nested braces") {
  fx::tensor<float> x = {{2.f}};
  CHECK(x.shape() == fx::shape{1, 1});
  CHECK(x(0, 0) == 2.f);
  fx::tensor<int> s = 6;
  CHECK(s.rank() == 0);
  CHECK(s.item() == 6);
  fx::tensor<int> v{0, 1, 2};
  CHECK(v.shape() == fx::shape{3});
  fx::tensor<double> m = {{1, 2, 3}, {4, 5, 6}};
  CHECK(m.shape() == fx::shape{2, 3});
  CHECK(m(1, 2) == 6.0);
  CHECK(m(-1, -3) == 4.0);
  fx::tensor<float> col = {{1.f}, {2.f}};
  CHECK(col.shape() == fx::shape{2, 1});
  fx::tensor<float> r3 = {{{1.f, 2.f}}, {{3.f, 4.f}}};
  CHECK(r3.shape() == fx::shape{2, 1, 2});
  CHECK(r3.at({1, 0, 1}) == 4.f);
  fx::tensor<bool> b = {true, false};
  CHECK(b.to_vector() == std::vector<bool>{true, false});
  fx::tensor<std::int64_t> big = {std::int64_t{1} << 40};
  CHECK(big(0) == (std::int64_t{1} << 40));
  fx::tensor<float> empty;
  CHECK(empty.size() == 0);
  CHECK(empty.shape() == fx::shape{0});
}

TEST_CASE("tensor: bad construction and access throw with the values") {
  test::check_throws_with<fx::shape_error>([] { fx::tensor<int> t = {{1, 2}, {3}}; }, "ragged");
  // Whichever branch comes first, a list where values belong (or values where lists belong) is refused.
  test::check_throws_with<fx::shape_error>([] { fx::tensor<float> t = {{1.f, 2.f}, {{3.f}, {4.f}}}; },
                                           "tensor: nested initializer lists are ragged: a value at depth 1 of a tensor of shape (2, 2, 1)");
  test::check_throws_with<fx::shape_error>([] { fx::tensor<float> t = {{{3.f}, {4.f}}, {1.f, 2.f}}; },
                                           "tensor: nested initializer lists are ragged");
  test::check_throws_with<fx::shape_error>([] { fx::tensor<int> t = {{1, 2}, {3, 4, 5}}; },
                                           "axis 1 has lengths 2 and 3");
  test::check_throws_with<fx::invalid_argument>(
      [] { (void)fx::expand_dims(fx::tensor<float>(fx::shape{1, 1, 1, 1, 1, 1, 1, 1}), 0); },
      "expand_dims: shape (1, 1, 1, 1, 1, 1, 1, 1) already has the maximum rank, 8");
  fx::tensor<int> empty_rows = {{}, {}};
  CHECK(empty_rows.shape() == fx::shape{2, 0});
  fx::tensor<int> t = {{1, 2, 3}, {4, 5, 6}};
  test::check_throws_with<fx::out_of_range>([&] { (void)t(2, 0); }, "tensor: index 2 is out of range for axis 0 with size 2");
  test::check_throws_with<fx::out_of_range>([&] { (void)t(0, -4); }, "tensor: index -4 is out of range for axis 1 with size 3");
  test::check_throws_with<fx::invalid_argument>([&] { (void)t(0); }, "tensor: 1 indices given for a tensor of rank 2 and shape (2, 3)");
  test::check_throws_with<fx::invalid_argument>([&] { (void)t.item(); }, "item: tensor of shape (2, 3) has 6 elements, not 1");
}

TEST_CASE("tensor: copies share immutable storage; assignment rebinds") {
  fx::tensor<float> a = {1.f, 2.f};
  fx::tensor<float> b = a;
  CHECK(b.storage_id() == a.storage_id());
  CHECK(a.use_count() == 2);
  a = a * 2.f;  // a new buffer; b still sees the old values
  CHECK(a.storage_id() != b.storage_id());
  CHECK(b.to_vector() == std::vector<float>{1, 2});
  CHECK(a.to_vector() == std::vector<float>{2, 4});
  CHECK(b.use_count() == 1);
}

TEST_CASE("tensor: buffers are 64-byte aligned") {
  for (int n : {1, 3, 17, 1000, 12345}) {
    fx::tensor<float> t(fx::shape{n});
    CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  }
}

TEST_CASE("tensor: truth values of one-element tensors and expressions") {
  fx::tensor<int> a = {{3}};
  CHECK(static_cast<bool>(a == 3));
  CHECK(!(a == 4));
  CHECK(static_cast<bool>(fx::any(fx::tensor<int>{0, 1} > 0)));
  fx::tensor<int> v = {1, 2};
  test::check_throws_with<fx::invalid_argument>([&] { if (v == 1) {} },
      "bool: the truth value of a tensor of shape (2,) with 2 elements is ambiguous; reduce it with fluxion::all or fluxion::any");
}

TEST_CASE("tensor: item() of one-element expressions of every kind") {
  const fx::tensor<double> t = {{1.0, 2.0}, {3.0, 4.0}};
  CHECK(fx::reduce_sum(t * 2.0).item() == 20.0);                                 // reduction (boundary)
  CHECK(fx::reduce_max(fx::abs(t - 5.0)).item() == 4.0);
  CHECK((fx::reduce_sum(t) + 1.0).item() == 11.0);                               // binary
  CHECK(fx::exp(fx::reduce_sum(t) - 10.0).item() == 1.0);                        // unary
  CHECK(fx::where(fx::reduce_sum(t) > 5.0, 1.0, 2.0).item() == 1.0);             // ternary
  CHECK(fx::reshape(fx::slice(t, {1, 1}, {1, 1}) * 1.0, {1}).item() == 4.0);     // reshape of an expression
  CHECK(fx::slice(t, {0, 1}, {1, 1}).item() == 2.0);                             // remap
  CHECK(fx::gather(fx::tensor<double>{5.0, 6.0, 7.0}, fx::tensor<int>{{2}}, 0).item() == 7.0);  // gather
  CHECK(fx::matmul(fx::tensor<double>{{1.0, 2.0}}, fx::tensor<double>{{3.0}, {4.0}}).item() == 11.0);
  CHECK(fx::argmax(fx::tensor<float>{1.f, 5.f, 2.f}, 0).item() == 1);
  CHECK(fx::all(t > 0.0).item());
  test::check_throws_with<fx::invalid_argument>([&] { (void)(t * 2.0).item(); },
                                                "item: tensor of shape (2, 2) has 4 elements, not 1");
}

TEST_CASE("tensor: ranks 0 to 8") {
  fx::shape s;
  for (int r = 0; r <= 8; ++r) {
    fx::tensor<int> t = fx::broadcast_to(fx::tensor<int>(r), s);
    CHECK(t.rank() == r);
    CHECK(fx::tensor<int>(fx::reduce_sum(t)).item() == r * (1 << r));
    if (r < 8) s.push_back(2);
  }
}

TEST_CASE("tensor: the Collatz loop on tensor values") {
  fx::tensor<int> a = 6;
  std::vector<int> seen;
  while (!fx::all(a == 1)) {
    if (fx::all(a % 2 == 0)) a = a / 2;
    else a = 3 * a + 1;
    seen.push_back(a.item());
  }
  CHECK(seen == std::vector<int>{3, 10, 5, 16, 8, 4, 2, 1});
}

TEST_CASE("tensor: a moved-from tensor is empty") {
  fx::tensor<float> a = {1.f, 2.f, 3.f};
  fx::tensor<float> b = std::move(a);
  CHECK(b.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(a.size() == 0);  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(a.shape() == fx::shape{0});
  CHECK(a.to_vector().empty());
  fx::tensor<float> c;
  c = std::move(b);
  CHECK(c.to_vector() == std::vector<float>{1.f, 2.f, 3.f});
  CHECK(b.shape() == fx::shape{0});  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("tensor: integer division and remainder never trap") {
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  fx::tensor<std::int32_t> a = {lo, 7, -7, 5};
  fx::tensor<std::int32_t> b = {-1, -1, 2, 0};
  CHECK(fx::tensor<std::int32_t>(a / b).to_vector() == std::vector<std::int32_t>{lo, -7, -3, 0});
  CHECK(fx::tensor<std::int32_t>(a % b).to_vector() == std::vector<std::int32_t>{0, 0, -1, 0});
  const std::int64_t lo64 = std::numeric_limits<std::int64_t>::min();
  fx::tensor<std::int64_t> c = {lo64};
  CHECK(fx::tensor<std::int64_t>(c / std::int64_t(-1)).item() == lo64);
}
