// fx::losses: values against naive loops in double, gradients against finite differences (both
// modes), stability at |logits| = 1e4, every error, and PyTorch's numbers
// (tests/fixtures/losses/make_fixtures.py) read through fx::io::load_npy. Label smoothing and
// Keras's other losses: tests/losses/keras.test.cpp.
#define FLUXION_FORWARD_MODE 1  // the gradient checks compare forward-mode tangents too
#include <fluxion/testing/check_gradients.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <fluxion/io/npy.hpp>
#include <fluxion/losses.hpp>
#include <fluxion/optim.hpp>
#include <fluxion/tensor/creation.hpp>

#include "losses_check.hpp"

using namespace losses_check;

TEST_CASE("losses: values against naive loops, every reduction") {
  const auto x = test::random_tensor<double>({4, 5}, 1, -3, 3);
  const auto xs = rows(x);

  SUBCASE("softmax_cross_entropy with soft labels") {
    const auto y = test::random_tensor<double>({4, 5}, 2, 0, 1);
    const auto ys = rows(y);
    std::vector<double> want;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      const double lse = naive_logsumexp(xs[i]);
      double s = 0;
      for (std::size_t j = 0; j < 5; ++j) s -= ys[i][j] * (xs[i][j] - lse);
      want.push_back(s);
    }
    check_reductions([&](reduction r) { return fx::losses::softmax_cross_entropy(x, y, r); }, want);
  }
  SUBCASE("sparse_softmax_cross_entropy, int32 and int64 labels, shape (batch,) and (batch, 1)") {
    const fx::tensor<std::int32_t> labels = {4, 0, 2, 2};
    std::vector<double> want;
    for (std::size_t i = 0; i < xs.size(); ++i)
      want.push_back(naive_logsumexp(xs[i]) - xs[i][static_cast<std::size_t>(labels(static_cast<int>(i)))]);
    check_reductions([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, r); }, want);
    const fx::tensor<std::int64_t> labels64 = {{4}, {0}, {2}, {2}};
    check_reductions([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels64, r); }, want);
    // The one-hot form gives the same numbers.
    check_reductions(
        [&](reduction r) { return fx::losses::softmax_cross_entropy(x, fx::one_hot<double>(labels, 5), r); }, want);
  }
  SUBCASE("sigmoid_binary_cross_entropy, averaged over the last axis") {
    const auto z = test::random_tensor<double>({4, 5}, 3, 0, 1);
    auto element = [](double l, double t) {
      const double p = 1 / (1 + std::exp(-l));
      return -(t * std::log(p) + (1 - t) * std::log(1 - p));
    };
    check_reductions([&](reduction r) { return fx::losses::sigmoid_binary_cross_entropy(x, z, r); },
                     per_row(xs, rows(z), element, true));
  }
  SUBCASE("mean_squared_error, averaged over the last axis") {
    const auto t = test::random_tensor<double>({4, 5}, 4);
    check_reductions([&](reduction r) { return fx::losses::mean_squared_error(x, t, r); },
                     per_row(xs, rows(t), [](double p, double y) { return (p - y) * (p - y); }, true));
  }
  SUBCASE("huber, both branches, delta 1 and 0.5") {
    const auto t = test::random_tensor<double>({4, 5}, 5);
    for (double delta : {1.0, 0.5}) {
      CAPTURE(delta);
      auto element = [delta](double p, double y) {
        const double e = std::abs(p - y);
        return e <= delta ? 0.5 * e * e : delta * e - 0.5 * delta * delta;
      };
      check_reductions([&](reduction r) { return fx::losses::huber(x, t, delta, r); },
                       per_row(xs, rows(t), element, true));
    }
    check_reductions([&](reduction r) { return fx::losses::huber(x, t, r); },
                     per_row(xs, rows(t), [](double p, double y) {
                       const double e = std::abs(p - y);
                       return e <= 1 ? 0.5 * e * e : e - 0.5;
                     }, true));
  }
}

TEST_CASE("losses: the elementwise losses treat each element of a rank-1 input as an example") {
  const fx::tensor<double> p = {0.5, -1.0, 2.0}, t = {1.0, 1.0, 0.0};
  const fx::tensor<double> mse = fx::losses::mean_squared_error(p, t, reduction::none);
  CHECK(mse.to_vector() == std::vector<double>{0.25, 4.0, 4.0});
  const fx::tensor<double> h = fx::losses::huber(p, t, reduction::none);
  CHECK(h.to_vector() == std::vector<double>{0.125, 1.5, 1.5});
  CHECK(fx::tensor<double>(fx::losses::sigmoid_binary_cross_entropy(p, t, reduction::none)).shape() == fx::shape{3});
}

TEST_CASE("losses: float inputs with int or bool labels and targets, and float results") {
  const fx::tensor<float> x = {{1.f, -2.f}, {0.5f, 3.f}};
  const fx::tensor<std::int32_t> one_hot = {{1, 0}, {0, 1}};
  const fx::tensor<float> a = fx::losses::softmax_cross_entropy(x, one_hot);
  const fx::tensor<float> b = fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int32_t>{0, 1});
  CHECK(a.item() == doctest::Approx(b.item()));
  const fx::tensor<bool> z = {{true, false}, {false, true}};
  const fx::tensor<float> c = fx::losses::sigmoid_binary_cross_entropy(x, z);
  const fx::tensor<float> d = fx::losses::sigmoid_binary_cross_entropy(x, fx::cast<float>(z));
  CHECK(c.item() == d.item());
  // Lazy expressions are accepted as logits: no separate materialization is needed.
  const fx::tensor<float> e = fx::losses::mean_squared_error(x * 2.f, x + x);
  CHECK(e.item() == 0.f);
}

TEST_CASE("losses: sparse_softmax_cross_entropy with labels of the other width (int64 with float, int32 with "
          "double): the same loss and gradient bitwise, and a label beyond int32 refused, not wrapped") {
  // Stop 88: on the cpu such labels are narrowed (or widened) to the logits' width after the range
  // check, so that the one-hot compare takes the SIMD loop.
  auto run = [](auto logits, const auto& labels) {
    using T = typename decltype(logits)::value_type;
    fx::variable<T> v(logits);
    fx::gradient_tape tape;
    const fx::tensor<T> loss = fx::losses::sparse_softmax_cross_entropy(v, labels);
    return std::pair{loss.to_vector(), tape.gradient(loss, v).to_vector()};
  };
  for (fx::index_t classes : {3, 10, 40}) {
    CAPTURE(classes);
    const auto xf = test::random_tensor<float>({37, classes}, 7);
    const auto xd = test::random_tensor<double>({37, classes}, 8);
    fx::tensor<std::int32_t> l32(fx::shape{37});
    fx::tensor<std::int64_t> l64(fx::shape{37});
    for (fx::index_t i = 0; i < 37; ++i) l32.mutable_data()[i] = static_cast<std::int32_t>(l64.mutable_data()[i] = (i * 7) % classes);
    CHECK(run(xf, l64) == run(xf, l32));
    CHECK(run(xd, l32) == run(xd, l64));
  }
  const fx::tensor<float> x = {{1.f, -2.f}, {0.5f, 3.f}};
  const std::int64_t wraps_to_1 = (std::int64_t{1} << 32) + 1;
  CHECK_THROWS_WITH_AS((void)fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int64_t>{0, wraps_to_1}),
                       "sparse_softmax_cross_entropy: labels[1] = 4294967297 is not in [0, 2)", fx::out_of_range);
  // More classes than int32 holds (an empty batch: no memory): refused with float logits and int64
  // labels, whose statements are not compiled on the cpu.
  const fx::index_t many = fx::index_t{1} << 31;
  CHECK_THROWS_WITH_AS((void)fx::losses::sparse_softmax_cross_entropy(fx::tensor<float>(fx::shape{0, many}),
                                                                      fx::tensor<std::int64_t>(fx::shape{0})),
                       "sparse_softmax_cross_entropy: 2147483648 classes are more than 2147483647, the most float "
                       "logits take on the cpu (the labels are read as int32)",
                       fx::invalid_argument);
}

TEST_CASE("losses: gradients against finite differences, both modes") {
  using fx::testing::check_gradients;
  const auto x = test::random_tensor<double>({3, 4}, 11, -3, 3);
  const auto soft = test::random_tensor<double>({3, 4}, 12, 0, 1);
  const fx::tensor<std::int64_t> labels = {3, 0, 1};
  const auto z = test::random_tensor<double>({3, 4}, 13, 0, 1);
  const auto t = test::random_tensor<double>({3, 4}, 14, -3, 3);
  for (reduction r : {reduction::mean, reduction::sum, reduction::none}) {
    CAPTURE(static_cast<int>(r));
    auto r1 = check_gradients([&](const auto& v) { return fx::losses::softmax_cross_entropy(v, soft, r); }, x);
    CHECK_MESSAGE(r1.ok, r1.report);
    auto r2 = check_gradients([&](const auto& v) { return fx::losses::sparse_softmax_cross_entropy(v, labels, r); }, x);
    CHECK_MESSAGE(r2.ok, r2.report);
    auto r3 = check_gradients([&](const auto& v) { return fx::losses::sigmoid_binary_cross_entropy(v, z, r); }, x);
    CHECK_MESSAGE(r3.ok, r3.report);
    auto r4 = check_gradients([&](const auto& v) { return fx::losses::mean_squared_error(v, t, r); }, x);
    CHECK_MESSAGE(r4.ok, r4.report);
    auto r5 = check_gradients([&](const auto& v) { return fx::losses::huber(v, t, 0.8, r); }, x);
    CHECK_MESSAGE(r5.ok, r5.report);
  }
  // With respect to the soft labels and the targets too.
  auto r6 = check_gradients([&](const auto& y) { return fx::losses::softmax_cross_entropy(x, y); }, soft);
  CHECK_MESSAGE(r6.ok, r6.report);
  auto r7 = check_gradients([&](const auto& y) { return fx::losses::huber(x, y, 0.8); }, t);
  CHECK_MESSAGE(r7.ok, r7.report);
}

TEST_CASE("losses: sigmoid_binary_cross_entropy's gradient at logit 0 is sigmoid(0) - z") {
  const fx::tensor<double> x = {0.0, 0.0};
  const fx::tensor<double> z = {0.0, 1.0};
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> loss = fx::losses::sigmoid_binary_cross_entropy(x, z, reduction::sum);
  const fx::tensor<double> g = tape.gradient(loss, x);
  CHECK(g.to_vector() == std::vector<double>{0.5, -0.5});
}

TEST_CASE("losses: finite losses and gradients at |logits| = 1e4, in float") {
  const fx::tensor<float> x = {{1e4f, -1e4f, 0.f}, {-1e4f, -1e4f, 1e4f}};
  const fx::tensor<float> soft = {{0.f, 1.f, 0.f}, {0.5f, 0.f, 0.5f}};
  const fx::tensor<std::int32_t> labels = {1, 2};
  const fx::tensor<float> z = {{0.f, 1.f, 1.f}, {1.f, 0.f, 0.f}};
  auto all_finite = [](const fx::tensor<float>& t) { return static_cast<bool>(fx::all(fx::is_finite(t))); };
  auto check = [&](const char* what, auto loss, float want_loss, const std::vector<float>& want_grad) {
    CAPTURE(what);
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<float> l = loss();
    const fx::tensor<float> g = tape.gradient(l, x);
    CHECK(all_finite(l));
    CHECK(all_finite(g));
    CHECK(l.item() == doctest::Approx(want_loss).epsilon(1e-6));
    test::check_close(g.to_vector(), want_grad, 1e-6, 1e-6);
  };
  // Row 0: -log softmax at -1e4 is 2e4; row 1: half of 2e4 at class 0, nothing at class 2.
  check("softmax_cross_entropy", [&] { return fx::losses::softmax_cross_entropy(x, soft, reduction::sum); },
        2e4f + 1e4f, {1.f, -1.f, 0.f, -0.5f, 0.f, 0.5f});
  check("sparse_softmax_cross_entropy",
        [&] { return fx::losses::sparse_softmax_cross_entropy(x, labels, reduction::sum); }, 2e4f,
        {1.f, -1.f, 0.f, 0.f, 0.f, 0.f});
  // Elementwise: a logit of 1e4 with z = 0, or -1e4 with z = 1, costs 1e4; a right one costs 0; a
  // logit of 0 costs log 2. Each example averages its three.
  check("sigmoid_binary_cross_entropy",
        [&] { return fx::losses::sigmoid_binary_cross_entropy(x, z, reduction::sum); },
        (1e4f + 1e4f + std::log(2.f)) / 3 + (1e4f + 0.f + 1e4f) / 3,
        {1.f / 3, -1.f / 3, -0.5f / 3, -1.f / 3, 0.f, 1.f / 3});
}

TEST_CASE("losses: bad shapes, labels and arguments throw, naming the loss and the values") {
  const fx::tensor<float> x = fx::zeros<float>({4, 5});
  const fx::tensor<float> other = fx::zeros<float>({4, 3});
  check_contains(message_of([&] { (void)fx::losses::softmax_cross_entropy(x, other); }),
                 {"softmax_cross_entropy: logits (4, 5) and labels (4, 3) must have the same shape"});
  check_contains(message_of([&] { (void)fx::losses::sigmoid_binary_cross_entropy(x, other); }),
                 {"sigmoid_binary_cross_entropy: logits (4, 5) and labels (4, 3)"});
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(x, other); }),
                 {"mean_squared_error: predictions (4, 5) and targets (4, 3)"});
  check_contains(message_of([&] { (void)fx::losses::huber(x, other); }), {"huber: predictions (4, 5) and targets (4, 3)"});
  check_contains(message_of([&] { (void)fx::losses::huber(x, x, -1.0); }), {"huber: delta = -1", "must be positive"});
  check_contains(message_of([&] { (void)fx::losses::softmax_cross_entropy(fx::tensor<float>(1.f), fx::tensor<float>(1.f)); }),
                 {"softmax_cross_entropy: logits of shape () have no class axis"});
  CHECK_THROWS_AS((void)fx::losses::softmax_cross_entropy(x, other), fx::shape_error);

  const std::string shape_message =
      message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int32_t>{0, 1, 2}); });
  check_contains(shape_message, {"sparse_softmax_cross_entropy: logits (4, 5) need labels of shape (4,) or (4, 1), not (3,)"});
  const std::string high = message_of(
      [&] { (void)fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int64_t>{0, 1, 5, 2}); });
  check_contains(high, {"sparse_softmax_cross_entropy: labels[2] = 5 is not in [0, 5)"});
  const std::string low = message_of(
      [&] { (void)fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int32_t>{{0}, {-1}, {1}, {2}}); });
  check_contains(low, {"labels[1] = -1 is not in [0, 5)"});
  CHECK_THROWS_AS((void)fx::losses::sparse_softmax_cross_entropy(x, fx::tensor<std::int32_t>{0, 7, 1, 2}),
                  fx::out_of_range);
}

TEST_CASE("losses: a NaN or infinite loss throws numeric_error naming the input element; a training step stops intact") {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  fx::tensor<float> x = fx::zeros<float>({3, 4});
  x.mutable_data()[6] = nan;  // logits[1, 2]
  const fx::tensor<float> soft = fx::full<float>({3, 4}, 0.25f);
  const fx::tensor<std::int32_t> labels{0, 1, 2};
  check_contains(message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, labels); }),
                 {"sparse_softmax_cross_entropy: the loss is nan; logits[1, 2] = nan"});
  check_contains(message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, labels, reduction::none); }),
                 {"sparse_softmax_cross_entropy: the loss is nan at example [1]; logits[1, 2] = nan"});
  check_contains(message_of([&] { (void)fx::losses::softmax_cross_entropy(x, soft, reduction::sum); }),
                 {"softmax_cross_entropy: the loss is nan; logits[1, 2] = nan"});
  check_contains(message_of([&] { (void)fx::losses::sigmoid_binary_cross_entropy(x, soft); }),
                 {"sigmoid_binary_cross_entropy: the loss is nan; logits[1, 2] = nan"});
  // A target, not a prediction, and an infinite one.
  fx::tensor<float> targets = fx::zeros<float>({3, 4});
  targets.mutable_data()[11] = -inf;  // targets[2, 3]
  const fx::tensor<float> zeros = fx::zeros<float>({3, 4});
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(zeros, targets, reduction::none); }),
                 {"mean_squared_error: the loss is inf at example [2]; targets[2, 3] = -inf"});
  check_contains(message_of([&] { (void)fx::losses::huber(zeros, targets); }),
                 {"huber: the loss is inf; targets[2, 3] = -inf"});
  // Finite inputs whose loss overflows float.
  const fx::tensor<float> big = fx::full<float>({3, 4}, 1e30f);
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(big, zeros); }),
                 {"mean_squared_error: the loss is inf; every input is finite: the loss overflowed float32"});
  CHECK_THROWS_AS((void)fx::losses::mean_squared_error(big, zeros), fx::numeric_error);
  // Expression inputs are not evaluated again for the message; tensor inputs still are.
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(zeros * 2.f, targets); }),
                 {"mean_squared_error: the loss is inf; targets[2, 3] = -inf"});
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(x * 2.f, soft); }),
                 {"mean_squared_error: the loss is nan; no NaN or infinity in the inputs that are tensors"});
  try {
    (void)fx::losses::sparse_softmax_cross_entropy(x, labels);
  } catch (const fx::numeric_error& e) {
    CHECK(std::isnan(e.value()));
  }
  // Finite losses pass, with the same values as before the check.
  CHECK(fx::losses::mean_squared_error(zeros, soft).item() == doctest::Approx(0.0625));

  // The manual training loop of the README: the step that meets a NaN throws before the gradient,
  // and the optimizer has not touched the variable.
  fx::variable<float> w{fx::ones<float>({4, 4}), "w"};
  fx::optim::sgd opt{0.1};
  const auto before = w.peek().to_vector();
  CHECK_THROWS_AS(
      [&] {
        fx::gradient_tape tape;
        const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(fx::matmul(x, w), labels);
        std::vector<fx::variable<float>*> vars{&w};
        opt.apply_gradients(tape.gradient(loss, vars), vars);
      }(),
      fx::numeric_error);
  CHECK(w.peek().to_vector() == before);
  CHECK(opt.iterations() == 0);
}


TEST_CASE("losses: PyTorch's values and gradients, in float") {
  const auto soft = peer("softmax_ce_labels");
  check_against_torch("softmax_ce", peer("softmax_ce_logits"),
                      [&](const auto& x, reduction r) { return fx::losses::softmax_cross_entropy(x, soft, r); });
  const auto labels = fx::io::load_npy<std::int64_t>(std::string(FLUXION_TEST_FIXTURES_DIR) +
                                                     "/losses/sparse_softmax_ce_labels.npy");
  check_against_torch("sparse_softmax_ce", peer("sparse_softmax_ce_logits"), [&](const auto& x, reduction r) {
    return fx::losses::sparse_softmax_cross_entropy(x, labels, r);
  });
  const auto z = peer("sigmoid_bce_labels");
  check_against_torch("sigmoid_bce", peer("sigmoid_bce_logits"),
                      [&](const auto& x, reduction r) { return fx::losses::sigmoid_binary_cross_entropy(x, z, r); });
  const auto mse_t = peer("mse_targets");
  check_against_torch("mse", peer("mse_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::mean_squared_error(p, mse_t, r); });
  const auto huber_t = peer("huber_targets");
  check_against_torch("huber", peer("huber_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::huber(p, huber_t, 0.7, r); });
}
