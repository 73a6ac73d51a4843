#include "../test_util.hpp"

#include <thread>

TEST_CASE("tape: the gradient of sin(x) * x") {
  fx::tensor<double> x = {0.5, 1.0, 3.0};
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> y = fx::sin(x) * x;
  CHECK(tape.entries() == 1);  // one fused statement, one entry
  auto dx = tape.gradient(y, x);
  for (int i = 0; i < 3; ++i) CHECK(dx(i) == doctest::Approx(std::cos(x(i)) * x(i) + std::sin(x(i))));
}

TEST_CASE("tape: one entry per materialization, control flow decides what runs") {
  fx::tensor<double> x = {2.0};
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> y = x;
  int steps = 0;
  for (int i = 0; i < 5; ++i) {
    if (fx::all(y < 20.0)) {
      y = y * x;  // multiply while small
      ++steps;
    } else {
      y = y + 1.0;
    }
  }
  CHECK(steps == 4);                   // x^5 = 32 after four multiplications, then +1
  CHECK(tape.entries() == 5);
  CHECK(y.item() == doctest::Approx(33.0));
  CHECK(tape.gradient(y, x).item() == doctest::Approx(5 * 16.0));  // d/dx (x^5 + 1)
}

TEST_CASE("tape: one-shot and persistent tapes") {
  fx::tensor<double> x = {3.0};
  {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = x * x;
    CHECK(tape.gradient(y, x).item() == 6.0);
    test::check_throws_with<fx::error>([&] { (void)tape.gradient(y, x); },
                                       "gradient_tape: gradient() was already called on this non-persistent tape");
  }
  {
    fx::gradient_tape tape(fx::persistent);
    tape.watch(x);
    fx::tensor<double> y = x * x;
    fx::tensor<double> z = y * y;
    CHECK(tape.gradient(y, x).item() == 6.0);
    CHECK(tape.gradient(z, x).item() == doctest::Approx(4 * 27.0));
    CHECK(tape.gradient(z, y).item() == doctest::Approx(18.0));
  }
}

TEST_CASE("tape: a one-shot tape releases its saved tensors after gradient()") {
  fx::tensor<double> x = test::random_tensor<double>({1 << 16}, 1);
  const auto before = fx::memory::stats().bytes_in_use;
  // What one tensor like x costs the allocator (sizes are rounded up to size classes).
  const auto one = [&] { fx::tensor<double> probe(x.shape()); return fx::memory::stats().bytes_in_use - before; }();
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> y = fx::sin(x);
  fx::tensor<double> z = fx::reduce_sum(fx::exp(y));
  y = fx::tensor<double>();  // only the tape holds y now
  CHECK(fx::memory::stats().bytes_in_use >= before + one);  // the tape keeps y alive
  auto g = tape.gradient(z, x);
  z = fx::tensor<double>();
  const auto after = fx::memory::stats().bytes_in_use;
  CHECK(after <= before + one + 256);  // only the gradient is left
  CHECK(g.size() == (1 << 16));
}

TEST_CASE("tape: sources, unconnected gradients and output gradients") {
  fx::tensor<double> a = {1.0, 2.0}, b = {3.0, 4.0}, c = {5.0, 6.0};
  fx::gradient_tape tape(fx::persistent);
  tape.watch(a);
  tape.watch(b);
  tape.watch(c);
  fx::tensor<double> y = a * b;
  auto g = tape.gradient(y, {std::cref(a), std::cref(b), std::cref(c)});
  CHECK(g[0].to_vector() == std::vector<double>{3, 4});
  CHECK(g[1].to_vector() == std::vector<double>{1, 2});
  CHECK(g[2].size() == 0);  // unconnected: none, TensorFlow's None
  CHECK(g[2].is_none());
  CHECK(!g[0].is_none());
  CHECK(tape.gradient(y, c, fx::unconnected_gradients::zero).to_vector() == std::vector<double>{0, 0});
  CHECK(!tape.gradient(y, c, fx::unconnected_gradients::zero).is_none());
  fx::tensor<double> w = {10.0, 100.0};
  CHECK(tape.gradient(y, a, w).to_vector() == std::vector<double>{30, 400});
  test::check_throws_with<fx::shape_error>([&] { (void)tape.gradient(y, a, fx::tensor<double>{1.0}); },
                                           "gradient: output_gradients of shape (1,) do not match the target's shape (2,)");
}

TEST_CASE("tape: trainable variables are watched automatically") {
  fx::variable<double> w{fx::tensor<double>{2.0}, "w"};
  fx::variable<double> frozen{fx::tensor<double>{5.0}, "f", false};
  {
    fx::gradient_tape tape;
    fx::tensor<double> y = w * w * frozen;
    CHECK(tape.gradient(y, w).item() == 20.0);
  }
  {
    fx::gradient_tape tape(false);  // watch_accessed_variables = false
    fx::tensor<double> y = w * w;
    CHECK(tape.gradient(y, w).size() == 0);
  }
  {
    fx::gradient_tape tape(fx::persistent);
    fx::tensor<double> y = w * w * frozen;
    CHECK(tape.gradient(y, frozen).size() == 0);
    tape.watch(frozen);
    fx::tensor<double> z = w * frozen;
    CHECK(tape.gradient(z, frozen).item() == 2.0);
  }
}

TEST_CASE("tape: stop_recording") {
  fx::tensor<double> x = {3.0};
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> y = x * x;
  fx::tensor<double> c;
  {
    auto pause = tape.stop_recording();
    c = x * 10.0;  // treated as a constant
  }
  fx::tensor<double> z = y + c;
  CHECK(tape.entries() == 2);
  CHECK(tape.gradient(z, x).item() == 6.0);
}

TEST_CASE("tape: jacobian and batch_jacobian") {
  fx::tensor<double> x = {1.0, 2.0, 3.0};
  {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = fx::expand_dims(x, 1) * fx::expand_dims(x, 0);  // y_ij = x_i x_j
    fx::tensor<double> j = tape.jacobian(y, x);
    CHECK(j.shape() == fx::shape{3, 3, 3});
    for (int i = 0; i < 3; ++i)
      for (int k = 0; k < 3; ++k)
        for (int m = 0; m < 3; ++m)
          CHECK(j(i, k, m) == doctest::Approx((i == m ? x(k) : 0.0) + (k == m ? x(i) : 0.0)));
  }
  {
    fx::tensor<double> xb = {{1.0, 2.0}, {3.0, 4.0}};  // batch of 2
    fx::gradient_tape tape;
    tape.watch(xb);
    fx::tensor<double> y = xb * xb;
    fx::tensor<double> bj = tape.batch_jacobian(y, xb);
    CHECK(bj.shape() == fx::shape{2, 2, 2});
    CHECK(bj.to_vector() == std::vector<double>{2, 0, 0, 4, 6, 0, 0, 8});
  }
}

TEST_CASE("tape: tapes are thread-local") {
  fx::tensor<double> x = {2.0};
  fx::gradient_tape tape;
  tape.watch(x);
  double other = 0;
  std::thread th([&] {
    fx::tensor<double> y = x * x;  // not recorded: no tape on this thread
    other = y.item();
  });
  th.join();
  CHECK(other == 4.0);
  CHECK(tape.entries() == 0);
}

TEST_CASE("tape: broadcasting gradients are reduced to each operand's shape") {
  fx::tensor<double> w = {{1.0, 2.0, 3.0}};  // (1, 3)
  fx::tensor<double> x = {{1.0}, {2.0}};     // (2, 1)
  fx::gradient_tape tape(fx::persistent);
  tape.watch(w);
  tape.watch(x);
  fx::tensor<double> y = fx::reduce_sum(w * x);
  CHECK(tape.gradient(y, w).to_vector() == std::vector<double>{3, 3, 3});
  CHECK(tape.gradient(y, x).to_vector() == std::vector<double>{6, 6});
  CHECK(tape.gradient(y, w).shape() == fx::shape{1, 3});
}

TEST_CASE("tape: the backward pass of a fused statement is fused") {
  // y = sin(x) * x + x reads x three times. Its backward pass allocates exactly 3 buffers: the
  // seed d sum(y) / dy (ones), then one fused kernel per read of x that computes something:
  // x * cos(x) and sin(x), each times the seed; the third read (+ x) passes the seed itself, not
  // a copy. The terms are added in place (no other tape or accumulator is alive to record the
  // sum), and the result is returned without a copy.
  for (int n : {1, 1000, 1 << 16}) {
    CAPTURE(n);
    auto x = test::random_tensor<double>({n}, 1);
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = fx::sin(x) * x + x;
    CHECK(tape.entries() == 1);
    const auto before = fx::memory::stats().allocations;
    auto dx = tape.gradient(y, x);
    CHECK(fx::memory::stats().allocations - before == 3);
    const auto xv = x.to_vector(), dv = dx.to_vector();
    for (std::size_t i = 0; i < xv.size(); i += 1 + xv.size() / 50)
      CHECK(dv[i] == doctest::Approx(std::cos(xv[i]) * xv[i] + std::sin(xv[i]) + 1));
  }
}

TEST_CASE("tape: several sources with output gradients") {
  fx::tensor<double> a = {1.0, 2.0}, b = {3.0, 4.0}, c = {5.0, 6.0};
  fx::gradient_tape tape(fx::persistent);
  tape.watch(a);
  tape.watch(b);
  tape.watch(c);
  fx::tensor<double> y = a * b + a;  // a is read twice: its gradient is accumulated
  const fx::tensor<double> w = {10.0, 100.0};
  auto g = tape.gradient(y, {std::cref(a), std::cref(b), std::cref(c)}, w);
  REQUIRE(g.size() == 3);
  CHECK(g[0].to_vector() == std::vector<double>{40, 500});  // w * (b + 1)
  CHECK(g[1].to_vector() == std::vector<double>{10, 200});  // w * a
  CHECK(g[2].size() == 0);                                  // unconnected: empty
  auto gz = tape.gradient(y, {std::cref(a), std::cref(c)}, w, fx::unconnected_gradients::zero);
  CHECK(gz[0].to_vector() == std::vector<double>{40, 500});
  CHECK(gz[1].to_vector() == std::vector<double>{0, 0});
  std::vector<const fx::tensor<double>*> ptrs{&b, &a};
  auto gp = tape.gradient(y, ptrs, w);
  CHECK(gp[0].to_vector() == std::vector<double>{10, 200});
  CHECK(gp[1].to_vector() == std::vector<double>{40, 500});
  std::vector<std::reference_wrapper<const fx::tensor<double>>> refs{std::cref(a)};
  CHECK(tape.gradient(y, refs, w)[0].to_vector() == std::vector<double>{40, 500});
  CHECK(w.to_vector() == std::vector<double>{10, 100});  // the seed is not accumulated into
  test::check_throws_with<fx::shape_error>([&] { (void)tape.gradient(y, {std::cref(a), std::cref(b)}, fx::tensor<double>{1.0}); },
                                           "gradient: output_gradients of shape (1,) do not match the target's shape (2,)");
}

TEST_CASE("tape: variable::value() is recorded as read_value() is; peek() is not") {
  fx::variable<double> w{fx::tensor<double>{1.0, 2.0}, "w"};
  {
    fx::gradient_tape tape;
    fx::tensor<double> y = fx::reduce_sum(w.value() * 3.0);
    CHECK(tape.gradient(y, w).to_vector() == std::vector<double>{3, 3});
  }
  {
    fx::gradient_tape tape{fx::persistent};
    fx::tensor<double> y = fx::reduce_sum(w.peek() * 3.0);
    CHECK(tape.gradient(y, w).shape() == fx::shape{0});  // unconnected: an empty tensor, as TF's None
    CHECK(tape.gradient(y, w, fx::unconnected_gradients::zero).to_vector() == std::vector<double>{0, 0});
  }
}

TEST_CASE("tape: a variable's assign, assign_add and assign_sub are not recorded (TensorFlow's assign)") {
  // Assignment is a write, not an operation: the new value starts no path back to what it was
  // computed from, and the write costs the tape no entry, whatever the tape watches.
  fx::tensor<double> x = {1.0, 2.0};
  fx::variable<double> v{fx::tensor<double>{0.0, 0.0}, "v"};
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  fx::tensor<double> before = v.value();  // the tape now watches v's value
  v.assign(x * 2.0);
  v.assign_add(x);
  v.assign_sub(fx::broadcast_to(x, {2}) * 0.5);
  v.assign(fx::tensor<double>(x * 4.0));  // a tensor of the variable's shape: swapped in
  v.assign(fx::reduce_mean(x) * 0.0 + 1.0);  // a scalar broadcast to the variable's shape
  CHECK(tape.entries() == 1);                 // only x * 4.0, a statement of its own
  CHECK(v.value().to_vector() == std::vector<double>{1, 1});
  fx::tensor<double> y = fx::reduce_sum(v.value() * 3.0);
  CHECK(tape.gradient(y, x).shape() == fx::shape{0});  // unconnected, as TF's None
  CHECK(tape.gradient(y, v).to_vector() == std::vector<double>{3, 3});
  CHECK(before.to_vector() == std::vector<double>{0, 0});
}

TEST_CASE("tape: the gradients of many slices of one tensor add into their regions") {
  // Each row a slice of its own (weighted by its index), plus a strided slice over all of x: the
  // tape adds each slice's gradient into its region of x's gradient, in place after the first.
  const fx::tensor<double> x = test::random_tensor<double>({6, 4}, 17);
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<double> y = fx::reduce_sum(fx::strided_slice(x, {0, 1}, {fx::end, fx::end}, {2, 2}) * 3.0);
  for (fx::index_t i = 0; i < 6; ++i)
    y = y + static_cast<double>(i + 1) * fx::reduce_sum(fx::square(fx::slice(x, {i, 0}, {1, 4})));
  const auto g = tape.gradient(y, x);
  for (fx::index_t i = 0; i < 6; ++i)
    for (fx::index_t j = 0; j < 4; ++j) {
      const double want = 2.0 * static_cast<double>(i + 1) * x(i, j) + ((i % 2 == 0 && j % 2 == 1) ? 3.0 : 0.0);
      CHECK(g(i, j) == doctest::Approx(want));
    }
}

TEST_CASE("tape: sources in braces, as tape.gradient(loss, [w, b])") {
  fx::variable<double> w{fx::tensor<double>{{1.0, 2.0}, {3.0, 4.0}}, "w"};
  fx::variable<double> b{fx::tensor<double>{0.5, -0.5}, "b"};
  fx::variable<double> unused{fx::tensor<double>{1.0}, "unused"};
  const fx::tensor<double> x = {{1.0, -2.0}};
  {
    fx::gradient_tape tape(fx::persistent);
    fx::tensor<double> y = fx::reduce_sum(fx::square(fx::matmul(x, w) + b));
    auto g = tape.gradient(y, {w, b, unused});
    REQUIRE(g.size() == 3);
    // y = sum((x w + b)^2): x w + b = (-4.5, -6.5); dy/dw = x^T 2 (x w + b), dy/db = 2 (x w + b).
    CHECK(g[0].to_vector() == std::vector<double>{-9.0, -13.0, 18.0, 26.0});
    CHECK(g[1].to_vector() == std::vector<double>{-9.0, -13.0});
    CHECK(g[2].is_none());
    // The same as one source at a time, and as std::cref.
    CHECK(tape.gradient(y, w).to_vector() == g[0].to_vector());
    CHECK(tape.gradient(y, {std::cref(w), std::cref(b)})[1].to_vector() == g[1].to_vector());
    CHECK(tape.gradient(y, {w, unused}, fx::unconnected_gradients::zero)[1].to_vector() == std::vector<double>{0.0});
  }
  {
    // A target left as an expression (`auto loss = ...`) takes braces too.
    fx::gradient_tape tape;
    auto y = fx::reduce_sum(fx::square(fx::matmul(x, w) + b));
    auto g = tape.gradient(y, {w, b});
    CHECK(g[0].to_vector() == std::vector<double>{-9.0, -13.0, 18.0, 26.0});
    CHECK(g[1].to_vector() == std::vector<double>{-9.0, -13.0});
  }
  {
    fx::tensor<double> p = {2.0, 3.0}, q = {5.0, 7.0};
    fx::gradient_tape tape(fx::persistent);
    tape.watch(p);
    tape.watch(q);
    fx::tensor<double> y = p * q;
    auto g = tape.gradient(y, {p, q});
    CHECK(g[0].to_vector() == std::vector<double>{5.0, 7.0});
    CHECK(g[1].to_vector() == std::vector<double>{2.0, 3.0});
    auto gw = tape.gradient(y, {p, q}, fx::tensor<double>{10.0, 100.0});
    CHECK(gw[0].to_vector() == std::vector<double>{50.0, 700.0});
    CHECK(gw[1].to_vector() == std::vector<double>{20.0, 300.0});
    CHECK(tape.gradient(p * q + q, {p, q})[1].to_vector() == std::vector<double>{3.0, 4.0});  // an expression target
    // DESIGN.md's `auto y = ...; tape.gradient(y, {x1, x2}, dy); tape.jacobian(y, x)`.
    auto e = p * q;
    const fx::tensor<double> dy = {10.0, 100.0};
    CHECK(tape.gradient(e, {p, q}, dy)[0].to_vector() == std::vector<double>{50.0, 700.0});
    CHECK(tape.gradient(e, p, dy).to_vector() == std::vector<double>{50.0, 700.0});
    CHECK(tape.jacobian(e, p).to_vector() == std::vector<double>{5.0, 0.0, 0.0, 7.0});
    CHECK(tape.batch_jacobian(fx::reshape(e, {2, 1}), q).to_vector() == std::vector<double>{2.0, 3.0});
  }
  {
    // A source of another element type than the target's still takes std::cref.
    fx::tensor<float> p = {2.f};
    fx::gradient_tape tape;
    tape.watch(p);
    fx::tensor<double> y = fx::cast<double>(p) * 3.0;
    CHECK(tape.gradient(y, {std::cref(p)})[0].item() == 3.f);
  }
}


TEST_CASE("tape: braces unpack with structured bindings, as dw, db = tape.gradient(loss, [w, b])") {
  fx::variable<double> w{fx::tensor<double>{{1.0, 2.0}, {3.0, 4.0}}, "w"};
  fx::variable<double> b{fx::tensor<double>{0.5, -0.5}, "b"};
  const fx::tensor<double> x = {{1.0, -2.0}};
  fx::gradient_tape tape(fx::persistent);
  fx::tensor<double> y = fx::reduce_sum(fx::square(fx::matmul(x, w) + b));
  auto [dw, db] = tape.gradient(y, {w, b});
  static_assert(std::is_same_v<decltype(dw), fx::tensor<double>>);
  CHECK(dw.to_vector() == std::vector<double>{-9.0, -13.0, 18.0, 26.0});
  CHECK(db.to_vector() == std::vector<double>{-9.0, -13.0});
  // With output_gradients, from tensors, and from an expression target.
  fx::tensor<double> p = {2.0, 3.0}, q = {5.0, 7.0}, r = {1.0};  // r is not watched
  tape.watch(p);
  tape.watch(q);
  fx::tensor<double> pq = p * q;
  const auto& [dp, dq] = tape.gradient(pq, {p, q}, fx::tensor<double>{10.0, 100.0});
  CHECK(dp.to_vector() == std::vector<double>{50.0, 700.0});
  CHECK(dq.to_vector() == std::vector<double>{20.0, 300.0});
  auto [ep, eq, er] = tape.gradient(p * q + q, {p, q, r});
  CHECK(ep.to_vector() == std::vector<double>{5.0, 7.0});
  CHECK(eq.to_vector() == std::vector<double>{3.0, 4.0});
  CHECK(er.is_none());
  // The result is still a std::vector: it converts, indexes, and goes to apply_gradients.
  auto g = tape.gradient(y, {w, b});
  const std::vector<fx::tensor<double>>& as_vector = g;
  CHECK(as_vector.size() == 2);
  std::vector<fx::tensor<double>> copied = tape.gradient(y, {w, b});
  CHECK(copied[1].to_vector() == db.to_vector());
  static_assert(std::tuple_size_v<decltype(g)> == 2);
}

TEST_CASE("tape: sixteen sources in braces, with and without output_gradients (clang's longest list)") {
  // g++ deduces any count; under clang the braces take one overload per count, 1 to 16 (docs/building.md,
  // "Compilers"), and this is the longest.
  std::vector<fx::tensor<double>> x;
  for (int i = 0; i < 16; ++i) x.push_back(fx::tensor<double>{double(i + 1)});
  fx::gradient_tape tape(fx::persistent);
  for (const auto& t : x) tape.watch(t);
  fx::tensor<double> y = x[0];
  for (int i = 1; i < 16; ++i) y = y * x[static_cast<std::size_t>(i)];  // y = 16!, dy/dx_i = 16! / (i + 1)
  const auto g = tape.gradient(y, {x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12],
                                   x[13], x[14], x[15]});
  static_assert(std::tuple_size_v<std::remove_cvref_t<decltype(g)>> == 16);
  const auto h = tape.gradient(y * 1.0, {x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11],
                                         x[12], x[13], x[14], x[15]},
                               fx::tensor<double>{2.0});
  const double factorial = y.item();
  CHECK(factorial == doctest::Approx(20922789888000.0));
  for (std::size_t i = 0; i < 16; ++i) {
    CHECK(g[i].item() == doctest::Approx(factorial / double(i + 1)));
    CHECK(h[i].item() == doctest::Approx(2 * factorial / double(i + 1)));
  }
}

TEST_CASE("tape: braces mix variables and tensors, as tape.gradient(loss, [w, x])") {
  fx::variable<double> w{fx::tensor<double>{2.0, -1.0}, "w"};
  fx::tensor<double> x = {3.0, 5.0}, unwatched = {1.0};
  auto check = [&](fx::gradient_tape& tape) {  // a one-shot tape frees what no source asked for
    tape.watch(x);
    fx::tensor<double> y = fx::reduce_sum(w * x * x);  // dy/dw = x^2, dy/dx = 2 w x
    auto [dx, dw, du] = tape.gradient(y, {x, w, unwatched});
    CHECK(dw.to_vector() == std::vector<double>{9.0, 25.0});
    CHECK(dx.to_vector() == std::vector<double>{12.0, -10.0});
    CHECK(du.is_none());
  };
  fx::gradient_tape one_shot;
  check(one_shot);
  fx::gradient_tape kept(fx::persistent);
  check(kept);
  {
    // std::cref of either kind, and an expression target with output_gradients.
    fx::gradient_tape tape(fx::persistent);
    tape.watch(x);
    auto e = w * x;
    const auto g = tape.gradient(e, {std::cref(w), std::cref(x)}, fx::tensor<double>{1.0, 10.0});
    CHECK(g[0].to_vector() == std::vector<double>{3.0, 50.0});
    CHECK(g[1].to_vector() == std::vector<double>{2.0, -10.0});
  }
}
TEST_CASE("tape: an unconnected gradient is none, and none as an operand throws naming the op") {
  fx::tensor<float> a = 3.f, w = {1.f, 2.f};
  fx::gradient_tape tape;
  fx::tensor<float> y = a * a;  // a is not watched
  const fx::tensor<float> g = tape.gradient(y, a);
  CHECK(g.is_none());
  CHECK(g.shape() == fx::shape{0});
  CHECK(g.size() == 0);
  const fx::tensor<float> copy = g;
  CHECK(copy.is_none());
  // An empty tensor that is not none stays an ordinary empty array, as in NumPy.
  CHECK(!fx::tensor<float>().is_none());
  const fx::tensor<float> empty(fx::shape{0});
  CHECK(!empty.is_none());
  CHECK(fx::tensor<float>(a - 0.1f * empty).shape() == fx::shape{0});
  // Where a scalar parameter is updated by hand, `a - lr * g` would broadcast to an empty tensor.
  const std::string none = "an operand is none, the gradient that gradient_tape::gradient returns for a source the "
                           "target does not depend on (TensorFlow's None)";
  test::check_throws_with<fx::invalid_argument>([&] { (void)(a - 0.1f * g); }, "multiply: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)(w - g); }, "subtract: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::exp(g); }, "exp: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::reduce_sum(g); }, "reduce_sum: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::matmul(g, g); }, "matmul: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::where(w > 1.f, g, w); }, "where: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::transpose(g); }, "an operation: " + none);
  test::check_throws_with<fx::invalid_argument>([&] { (void)fx::stop_gradient(g); }, "stop_gradient: ");
}
