#include "../test_util.hpp"

#include <functional>

// Every elementwise op against std:: on the same values, over broadcast shapes, both dtypes.

namespace {

template <class T, class Expr, class Ref>
void check_unary(const char* name, Expr expr, Ref ref, double lo = -2, double hi = 2) {
  CAPTURE(name);
  for (const fx::shape& s : {fx::shape{}, fx::shape{7}, fx::shape{3, 33}, fx::shape{2, 3, 67}, fx::shape{0, 3}}) {
    auto x = test::random_tensor<T>(s, 11, lo, hi);
    fx::tensor<T> y = expr(x);
    CHECK(y.shape() == s);
    std::vector<T> want;
    for (T v : x.to_vector()) want.push_back(static_cast<T>(ref(v)));
    test::check_close(y.to_vector(), want, std::is_same_v<T, float> ? 2e-6 : 1e-14, 1e-6);
  }
}

}  // namespace

TEST_CASE_TEMPLATE("elementwise: unary functions match std", T, float, double) {
  check_unary<T>("negate", [](auto x) { return -x; }, [](T v) { return -v; });
  check_unary<T>("exp", [](auto x) { return fx::exp(x); }, [](T v) { return std::exp(v); });
  check_unary<T>("log", [](auto x) { return fx::log(x); }, [](T v) { return std::log(v); }, 0.01, 5);
  check_unary<T>("log1p", [](auto x) { return fx::log1p(x); }, [](T v) { return std::log1p(v); }, -0.9, 5);
  check_unary<T>("expm1", [](auto x) { return fx::expm1(x); }, [](T v) { return std::expm1(v); });
  check_unary<T>("sqrt", [](auto x) { return fx::sqrt(x); }, [](T v) { return std::sqrt(v); }, 0, 9);
  check_unary<T>("rsqrt", [](auto x) { return fx::rsqrt(x); }, [](T v) { return 1 / std::sqrt(v); }, 0.1, 9);
  check_unary<T>("square", [](auto x) { return fx::square(x); }, [](T v) { return v * v; });
  check_unary<T>("abs", [](auto x) { return fx::abs(x); }, [](T v) { return std::abs(v); });
  check_unary<T>("sign", [](auto x) { return fx::sign(x); }, [](T v) { return T((v > 0) - (v < 0)); });
  check_unary<T>("sin", [](auto x) { return fx::sin(x); }, [](T v) { return std::sin(v); }, -10, 10);
  check_unary<T>("cos", [](auto x) { return fx::cos(x); }, [](T v) { return std::cos(v); }, -10, 10);
  check_unary<T>("tan", [](auto x) { return fx::tan(x); }, [](T v) { return std::tan(v); }, -1.5, 1.5);
  check_unary<T>("tanh", [](auto x) { return fx::tanh(x); }, [](T v) { return std::tanh(v); }, -10, 10);
  check_unary<T>("sigmoid", [](auto x) { return fx::sigmoid(x); }, [](T v) { return 1 / (1 + std::exp(-v)); }, -30, 30);
  check_unary<T>("relu", [](auto x) { return fx::relu(x); }, [](T v) { return v > 0 ? v : T(0); });
  check_unary<T>("softplus", [](auto x) { return fx::softplus(x); }, [](T v) { return std::log1p(std::exp(v)); }, -20, 20);
  check_unary<T>("erf", [](auto x) { return fx::erf(x); }, [](T v) { return std::erf(v); });
  check_unary<T>("floor", [](auto x) { return fx::floor(x); }, [](T v) { return std::floor(v); }, -5, 5);
  check_unary<T>("ceil", [](auto x) { return fx::ceil(x); }, [](T v) { return std::ceil(v); }, -5, 5);
  check_unary<T>("round", [](auto x) { return fx::round(x); }, [](T v) { return std::nearbyint(v); }, -5, 5);
}

TEST_CASE("elementwise: conventions at kinks, ties and extremes") {
  fx::tensor<float> x = {-0.f, 0.f, 0.5f, 1.5f, 2.5f, -2.5f};
  CHECK(fx::tensor<float>(fx::relu(x)).to_vector() == std::vector<float>{0, 0, 0.5f, 1.5f, 2.5f, 0});
  CHECK(fx::tensor<float>(fx::round(x)).to_vector() == std::vector<float>{0, 0, 0, 2, 2, -2});  // half to even
  CHECK(fx::tensor<float>(fx::sign(x)).to_vector() == std::vector<float>{0, 0, 1, 1, 1, -1});
  fx::tensor<float> big = {100.f, -100.f, 1000.f, -1000.f};
  auto sp = fx::tensor<float>(fx::softplus(big)).to_vector();
  CHECK(sp[0] == doctest::Approx(100.f));
  CHECK(sp[1] >= 0.f);
  CHECK(std::isfinite(sp[2]));
  auto sg = fx::tensor<float>(fx::sigmoid(big)).to_vector();
  CHECK(sg[0] == 1.f);
  CHECK(sg[1] >= 0.f);
  CHECK(sg[3] == 0.f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  fx::tensor<float> n = {nan, 1.f};
  fx::tensor<float> m = fx::maximum(n, 0.f);
  CHECK(std::isnan(m(0)));
  CHECK(m(1) == 1.f);
  fx::tensor<float> mi = fx::minimum(0.f, n);
  CHECK(std::isnan(mi(0)));
}

TEST_CASE_TEMPLATE("elementwise: binary ops broadcast like NumPy", T, float, double, std::int32_t, std::int64_t) {
  struct Case {
    fx::shape a, b;
  };
  for (auto c : {Case{{5}, {5}}, Case{{2, 3}, {3}}, Case{{4, 1}, {1, 5}}, Case{{2, 1, 3}, {4, 1}},
                 Case{{}, {3, 2}}, Case{{1, 40}, {33, 40}}, Case{{3, 0}, {1}}}) {
    CAPTURE(fx::to_string(c.a));
    CAPTURE(fx::to_string(c.b));
    auto a = test::random_tensor<T>(c.a, 1, -9, 9);
    auto b = test::random_tensor<T>(c.b, 2, 1, 9);  // positive: safe divisor
    const fx::shape out = fx::broadcast_shapes(c.a, c.b, "test");
    fx::tensor<T> sum = a + b, dif = a - b, prod = a * b, quo = a / b, mx = fx::maximum(a, b), mn = fx::minimum(a, b);
    fx::tensor<bool> lt = a < b, eq = a == b;
    CHECK(sum.shape() == out);
    const auto av = a.to_vector(), bv = b.to_vector();
    std::vector<T> ws, wd, wp, wq, wx, wn;
    std::vector<bool> wl, we;
    for (fx::index_t i = 0; i < out.size(); ++i) {
      auto co = test::unravel(i, out);
      T x = av[static_cast<std::size_t>(test::broadcast_index(co, c.a))];
      T y = bv[static_cast<std::size_t>(test::broadcast_index(co, c.b))];
      ws.push_back(x + y), wd.push_back(x - y), wp.push_back(x * y), wq.push_back(x / y);
      wx.push_back(std::max(x, y)), wn.push_back(std::min(x, y)), wl.push_back(x < y), we.push_back(x == y);
    }
    test::check_close(sum.to_vector(), ws);
    test::check_close(dif.to_vector(), wd);
    test::check_close(prod.to_vector(), wp);
    test::check_close(quo.to_vector(), wq);
    test::check_close(mx.to_vector(), wx);
    test::check_close(mn.to_vector(), wn);
    CHECK(lt.to_vector() == wl);
    CHECK(eq.to_vector() == we);
  }
}

TEST_CASE("elementwise: scalars on either side, pow, clip, where, logical ops") {
  fx::tensor<float> x = {1.f, 2.f, 3.f, 4.f};
  CHECK(fx::tensor<float>(2.f - x).to_vector() == std::vector<float>{1, 0, -1, -2});
  CHECK(fx::tensor<float>(x / 2.f).to_vector() == std::vector<float>{0.5f, 1, 1.5f, 2});
  CHECK(fx::tensor<float>(12.f / x).to_vector() == std::vector<float>{12, 6, 4, 3});
  CHECK(fx::tensor<float>(2 * x).to_vector() == std::vector<float>{2, 4, 6, 8});  // int scalar stays float
  CHECK(fx::tensor<float>(fx::pow(x, 2.f)).to_vector() == std::vector<float>{1, 4, 9, 16});
  CHECK(fx::tensor<float>(fx::pow(2.f, x)).to_vector() == std::vector<float>{2, 4, 8, 16});
  CHECK(fx::tensor<float>(fx::clip(x, 1.5f, 3.5f)).to_vector() == std::vector<float>{1.5f, 2, 3, 3.5f});
  CHECK(fx::tensor<float>(fx::where(x > 2.f, x, -x)).to_vector() == std::vector<float>{-1, -2, 3, 4});
  CHECK(fx::tensor<float>(fx::where(x > 2.f, 1.f, 0.f)).to_vector() == std::vector<float>{0, 0, 1, 1});
  fx::tensor<bool> b = (x > 1.f) && !(x > 3.f);
  CHECK(b.to_vector() == std::vector<bool>{false, true, true, false});
  fx::tensor<bool> o = (x < 2.f) || (x >= 4.f);
  CHECK(o.to_vector() == std::vector<bool>{true, false, false, true});
  CHECK(fx::tensor<bool>(x != 2.f).to_vector() == std::vector<bool>{true, false, true, true});
  CHECK(fx::tensor<bool>(x <= 2.f).to_vector() == std::vector<bool>{true, true, false, false});
}

TEST_CASE("elementwise: integer semantics follow C++") {
  fx::tensor<int> a = {7, -7, 6, 5};
  CHECK(fx::tensor<int>(a / 2).to_vector() == std::vector<int>{3, -3, 3, 2});
  CHECK(fx::tensor<int>(a % 3).to_vector() == std::vector<int>{1, -1, 0, 2});
  CHECK(fx::tensor<int>(a / 0).to_vector() == std::vector<int>{0, 0, 0, 0});  // no trap
  CHECK(fx::tensor<int>(fx::pow(a, 2)).to_vector() == std::vector<int>{49, 49, 36, 25});
  CHECK(fx::tensor<int>(fx::abs(a)).to_vector() == std::vector<int>{7, 7, 6, 5});
}

TEST_CASE("elementwise: mixed element types promote as C++ does, at compile time") {
  fx::tensor<int> i = {1, 2, 3};
  fx::tensor<float> f = {0.5f, 0.5f, 0.5f};
  fx::tensor<double> d = {0.25, 0.25, 0.25};
  fx::tensor<bool> b = {true, false, true};
  static_assert(std::is_same_v<fx::value_type_t<decltype(i + f)>, float>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(f + d)>, double>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(i + fx::tensor<std::int64_t>{})>, std::int64_t>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(b + b)>, std::int32_t>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(2.0 * f)>, float>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(0.5 * i)>, double>);
  static_assert(std::is_same_v<fx::value_type_t<decltype(i < f)>, bool>);
  CHECK(fx::tensor<float>(i + f).to_vector() == std::vector<float>{1.5f, 2.5f, 3.5f});
  CHECK(fx::tensor<double>(f + d).to_vector() == std::vector<double>{0.75, 0.75, 0.75});
  CHECK(fx::tensor<int>(b + b).to_vector() == std::vector<int>{2, 0, 2});
  CHECK(fx::tensor<int>(fx::cast<int>(fx::tensor<float>{1.7f, -1.7f})).to_vector() == std::vector<int>{1, -1});
  CHECK(fx::tensor<float>(fx::cast<float>(b)).to_vector() == std::vector<float>{1, 0, 1});
  CHECK(fx::tensor<bool>(fx::cast<bool>(i - 2)).to_vector() == std::vector<bool>{true, false, true});
}

TEST_CASE("elementwise: shape errors are instant and name the op") {
  fx::tensor<float> a(fx::shape{2, 3}), b(fx::shape{4});
  test::check_throws_with<fx::shape_error>([&] { (void)(a + b); }, "add: shapes (2, 3) and (4,) cannot be broadcast");
  test::check_throws_with<fx::shape_error>([&] { (void)(a * b); }, "multiply: shapes (2, 3) and (4,)");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::maximum(a, b); }, "maximum: shapes");
  test::check_throws_with<fx::shape_error>([&] { (void)fx::where(a > 0.f, a, b); }, "where: shapes");
}

TEST_CASE("elementwise: large inputs split across threads give identical results") {
  auto a = test::random_tensor<float>({3, 100003}, 5);
  auto b = test::random_tensor<float>({100003}, 6);
  fx::set_num_threads(1);
  fx::tensor<float> r1 = fx::exp(a) * b - fx::sin(a);
  fx::set_num_threads(2);
  fx::tensor<float> r2 = fx::exp(a) * b - fx::sin(a);
  fx::set_num_threads(3);
  fx::tensor<float> r3 = fx::exp(a) * b - fx::sin(a);
  CHECK(r1.to_vector() == r2.to_vector());
  CHECK(r1.to_vector() == r3.to_vector());
  const auto av = a.to_vector(), bv = b.to_vector(), rv = r2.to_vector();
  for (std::size_t i = 0; i < rv.size(); i += 997) {
    const float want = std::exp(av[i]) * bv[i % 100003] - std::sin(av[i]);
    CHECK(rv[i] == doctest::Approx(want).epsilon(1e-5));
  }
}
