// Label smoothing on the cross entropies, and Keras's other losses (mean_absolute_error, log_cosh,
// kl_divergence, cosine_similarity): values against naive loops in double, gradients against
// finite differences (both modes), large errors, every error message, and PyTorch's numbers
// (tests/fixtures/losses/make_fixtures.py).
#define FLUXION_FORWARD_MODE 1  // the gradient checks compare forward-mode tangents too
#include <fluxion/testing/check_gradients.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include <fluxion/tensor/creation.hpp>

#include "../losses_check.hpp"

using namespace losses_check;
using fx::losses::label_smoothing;

namespace {
/// softmax along the last axis: a distribution per row.
fx::tensor<double> distribution(const fx::tensor<double>& t) {
  const fx::tensor<double> e = fx::exp(t);
  return e / fx::reduce_sum(e, -1, fx::keepdims);
}
}  // namespace

TEST_CASE("losses: label smoothing against naive loops, every reduction") {
  const auto x = test::random_tensor<double>({4, 5}, 1, -3, 3);
  const auto xs = rows(x);
  const auto soft = test::random_tensor<double>({4, 5}, 2, 0, 1);
  const auto ys = rows(soft);
  const fx::tensor<std::int32_t> labels = {4, 0, 2, 2};
  for (double s : {0.0, 0.1, 1.0}) {
    CAPTURE(s);
    // Softmax: the labels become (1 - s) y + s / 5.
    std::vector<double> want_soft, want_sparse;
    for (std::size_t i = 0; i < 4; ++i) {
      const double lse = naive_logsumexp(xs[i]);
      double a = 0, b = 0;
      for (std::size_t j = 0; j < 5; ++j) {
        a -= ((1 - s) * ys[i][j] + s / 5) * (xs[i][j] - lse);
        const double hot = static_cast<int>(j) == labels(static_cast<int>(i)) ? 1.0 : 0.0;
        b -= ((1 - s) * hot + s / 5) * (xs[i][j] - lse);
      }
      want_soft.push_back(a);
      want_sparse.push_back(b);
    }
    check_reductions([&](reduction r) { return fx::losses::softmax_cross_entropy(x, soft, label_smoothing{s}, r); },
                     want_soft);
    check_reductions(
        [&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, label_smoothing{s}, r); },
        want_sparse);
    // The one-hot form with the same smoothing gives the same numbers.
    check_reductions(
        [&](reduction r) {
          return fx::losses::softmax_cross_entropy(x, fx::one_hot<double>(labels, 5), label_smoothing{s}, r);
        },
        want_sparse);
    // Sigmoid: the labels become (1 - s) z + s / 2.
    auto element = [s](double l, double t) {
      const double p = 1 / (1 + std::exp(-l)), z = (1 - s) * t + s / 2;
      return -(z * std::log(p) + (1 - z) * std::log(1 - p));
    };
    check_reductions(
        [&](reduction r) { return fx::losses::sigmoid_binary_cross_entropy(x, soft, label_smoothing{s}, r); },
        per_row(xs, ys, element, true));
  }
  // No smoothing is the loss without the argument, bit for bit.
  const fx::tensor<double> plain = fx::losses::sparse_softmax_cross_entropy(x, labels);
  const fx::tensor<double> zero = fx::losses::sparse_softmax_cross_entropy(x, labels, label_smoothing{0});
  CHECK(plain.item() == zero.item());
}

TEST_CASE("losses: Keras's regression and distribution losses against naive loops, every reduction") {
  const auto p = test::random_tensor<double>({4, 5}, 3, -3, 3);
  const auto t = test::random_tensor<double>({4, 5}, 4, -3, 3);
  const auto ps = rows(p), ts = rows(t);
  check_reductions([&](reduction r) { return fx::losses::mean_absolute_error(p, t, r); },
                   per_row(ps, ts, [](double a, double b) { return std::abs(a - b); }, true));
  check_reductions([&](reduction r) { return fx::losses::log_cosh(p, t, r); },
                   per_row(ps, ts, [](double a, double b) { return std::log(std::cosh(a - b)); }, true));
  std::vector<double> want_cos;
  for (std::size_t i = 0; i < 4; ++i) {
    double dot = 0, pp = 0, tt = 0;
    for (std::size_t j = 0; j < 5; ++j) dot += ps[i][j] * ts[i][j], pp += ps[i][j] * ps[i][j], tt += ts[i][j] * ts[i][j];
    want_cos.push_back(-dot / std::sqrt(pp * tt));
  }
  check_reductions([&](reduction r) { return fx::losses::cosine_similarity(p, t, r); }, want_cos);
  // Distributions for the divergence, one target with a zero (clipped to 1e-7, as in Keras).
  const fx::tensor<double> q = distribution(p);
  std::vector<double> tv = distribution(t).to_vector();
  tv[2] += tv[3];
  tv[3] = 0;
  const fx::tensor<double> target = fx::from_vector(tv, {4, 5});
  check_reductions([&](reduction r) { return fx::losses::kl_divergence(q, target, r); },
                   per_row(rows(q), rows(target), [](double a, double b) {
                     const double c = std::max(b, 1e-7);
                     return c * std::log(c / std::max(a, 1e-7));
                   }, false));
  // Rank 1: each element is an example for the elementwise losses.
  const fx::tensor<double> a = {0.5, -1.0, 2.0}, b = {1.0, 1.0, 0.0};
  CHECK(fx::tensor<double>(fx::losses::mean_absolute_error(a, b, reduction::none)).to_vector() ==
        std::vector<double>{0.5, 2.0, 2.0});
  // Parallel and opposite vectors, and a zero vector (0, not NaN).
  const fx::tensor<double> u = {{1.0, 2.0}, {1.0, 2.0}, {0.0, 0.0}}, v = {{2.0, 4.0}, {-3.0, -6.0}, {1.0, 1.0}};
  test::check_close(fx::tensor<double>(fx::losses::cosine_similarity(u, v, reduction::none)).to_vector(),
                    {-1.0, 1.0, 0.0}, 1e-12, 1e-12);
}

TEST_CASE("losses: label smoothing and Keras's other losses, gradients against finite differences, both modes") {
  using fx::testing::check_gradients;
  const auto x = test::random_tensor<double>({3, 4}, 11, -3, 3);
  const auto soft = test::random_tensor<double>({3, 4}, 12, 0, 1);
  const fx::tensor<std::int64_t> labels = {3, 0, 1};
  const auto t = test::random_tensor<double>({3, 4}, 14, -3, 3);
  const fx::tensor<double> dist = distribution(test::random_tensor<double>({3, 4}, 15, -2, 2));
  const fx::tensor<double> target = distribution(t);
  const label_smoothing s{0.3};
  for (reduction r : {reduction::mean, reduction::sum, reduction::none}) {
    CAPTURE(static_cast<int>(r));
    auto r1 = check_gradients([&](const auto& v) { return fx::losses::softmax_cross_entropy(v, soft, s, r); }, x);
    CHECK_MESSAGE(r1.ok, r1.report);
    auto r2 = check_gradients([&](const auto& v) { return fx::losses::sparse_softmax_cross_entropy(v, labels, s, r); }, x);
    CHECK_MESSAGE(r2.ok, r2.report);
    auto r3 = check_gradients([&](const auto& v) { return fx::losses::sigmoid_binary_cross_entropy(v, soft, s, r); }, x);
    CHECK_MESSAGE(r3.ok, r3.report);
    auto r4 = check_gradients([&](const auto& v) { return fx::losses::mean_absolute_error(v, t, r); }, x);
    CHECK_MESSAGE(r4.ok, r4.report);
    auto r5 = check_gradients([&](const auto& v) { return fx::losses::log_cosh(v, t, r); }, x);
    CHECK_MESSAGE(r5.ok, r5.report);
    auto r6 = check_gradients([&](const auto& v) { return fx::losses::kl_divergence(v, target, r); }, dist);
    CHECK_MESSAGE(r6.ok, r6.report);
    auto r7 = check_gradients([&](const auto& v) { return fx::losses::cosine_similarity(v, t, r); }, x);
    CHECK_MESSAGE(r7.ok, r7.report);
  }
  // With respect to the targets too.
  auto r8 = check_gradients([&](const auto& y) { return fx::losses::cosine_similarity(x, y); }, t);
  CHECK_MESSAGE(r8.ok, r8.report);
  auto r9 = check_gradients([&](const auto& y) { return fx::losses::kl_divergence(dist, y); }, target);
  CHECK_MESSAGE(r9.ok, r9.report);
}

TEST_CASE("losses: log_cosh stays finite for large errors; kl_divergence's gradient is 0 where a prediction is clipped") {
  const fx::tensor<float> p = {1e4f, -1e4f, 0.f}, t = {0.f, 0.f, 0.f};
  fx::gradient_tape tape;
  tape.watch(p);
  const fx::tensor<float> l = fx::losses::log_cosh(p, t, reduction::none);
  const fx::tensor<float> g = tape.gradient(fx::tensor<float>(fx::reduce_sum(l)), p);
  // log cosh e = |e| - log 2 for large |e|; its derivative tanh(e).
  test::check_close(l.to_vector(), {1e4f - std::log(2.f), 1e4f - std::log(2.f), 0.f}, 1e-6, 1e-6);
  test::check_close(g.to_vector(), {1.f, -1.f, 0.f}, 1e-6, 1e-6);

  const fx::tensor<double> q = {{0.0, 1.0}}, y = {{0.5, 0.5}};
  fx::gradient_tape tape2;
  tape2.watch(q);
  const fx::tensor<double> kl = fx::losses::kl_divergence(q, y);
  CHECK(kl.item() == doctest::Approx(0.5 * std::log(0.5 / 1e-7) + 0.5 * std::log(0.5)).epsilon(1e-12));
  const auto dq = tape2.gradient(kl, q).to_vector();
  CHECK(dq[0] == 0.0);  // clipped
  CHECK(dq[1] == doctest::Approx(-0.5).epsilon(1e-12));
}

TEST_CASE("losses: bad label smoothing and shapes throw, naming the loss and the values") {
  const fx::tensor<float> x = fx::zeros<float>({4, 5}), other = fx::zeros<float>({4, 3});
  const fx::tensor<std::int32_t> labels = {0, 1, 2, 3};
  check_contains(message_of([&] { (void)fx::losses::softmax_cross_entropy(x, x, label_smoothing{1.5}); }),
                 {"softmax_cross_entropy: label_smoothing = 1.5 must be in [0, 1]"});
  check_contains(message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, labels, label_smoothing{-0.1}); }),
                 {"sparse_softmax_cross_entropy: label_smoothing = -0.1 must be in [0, 1]"});
  check_contains(message_of([&] {
                   (void)fx::losses::sigmoid_binary_cross_entropy(x, x, label_smoothing{std::nan("")});
                 }),
                 {"sigmoid_binary_cross_entropy: label_smoothing = nan must be in [0, 1]"});
  CHECK_THROWS_AS((void)fx::losses::softmax_cross_entropy(x, x, label_smoothing{2}), fx::invalid_argument);
  check_contains(message_of([&] { (void)fx::losses::mean_absolute_error(x, other); }),
                 {"mean_absolute_error: predictions (4, 5) and targets (4, 3) must have the same shape"});
  check_contains(message_of([&] { (void)fx::losses::log_cosh(x, other); }), {"log_cosh: predictions (4, 5)"});
  check_contains(message_of([&] { (void)fx::losses::kl_divergence(x, other); }), {"kl_divergence: predictions (4, 5)"});
  check_contains(message_of([&] { (void)fx::losses::cosine_similarity(x, other); }),
                 {"cosine_similarity: predictions (4, 5)"});
  check_contains(message_of([&] { (void)fx::losses::cosine_similarity(fx::tensor<float>(1.f), fx::tensor<float>(1.f)); }),
                 {"cosine_similarity: logits of shape () have no class axis"});
  // A NaN prediction: numeric_error naming the element.
  fx::tensor<float> bad = fx::zeros<float>({2, 2});
  bad.mutable_data()[3] = std::nanf("");
  check_contains(message_of([&] { (void)fx::losses::mean_absolute_error(bad, fx::zeros<float>({2, 2})); }),
                 {"mean_absolute_error: the loss is nan", "predictions[1, 1] = nan"});
}

TEST_CASE("losses: label smoothing and Keras's other losses equal PyTorch's, in float") {
  const auto soft = peer("softmax_ce_ls_labels");
  const label_smoothing s{0.2};
  check_against_torch("softmax_ce_ls", peer("softmax_ce_ls_logits"),
                      [&](const auto& x, reduction r) { return fx::losses::softmax_cross_entropy(x, soft, s, r); });
  const auto labels = fx::io::load_npy<std::int64_t>(std::string(FLUXION_TEST_FIXTURES_DIR) +
                                                     "/losses/sparse_softmax_ce_ls_labels.npy");
  check_against_torch("sparse_softmax_ce_ls", peer("sparse_softmax_ce_ls_logits"), [&](const auto& x, reduction r) {
    return fx::losses::sparse_softmax_cross_entropy(x, labels, s, r);
  });
  const auto mae_t = peer("mae_targets");
  check_against_torch("mae", peer("mae_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::mean_absolute_error(p, mae_t, r); });
  const auto lc_t = peer("log_cosh_targets");
  check_against_torch("log_cosh", peer("log_cosh_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::log_cosh(p, lc_t, r); });
  const auto kld_t = peer("kld_targets");
  check_against_torch("kld", peer("kld_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::kl_divergence(p, kld_t, r); });
  const auto cos_t = peer("cosine_targets");
  check_against_torch("cosine", peer("cosine_predictions"),
                      [&](const auto& p, reduction r) { return fx::losses::cosine_similarity(p, cos_t, r); });
}
