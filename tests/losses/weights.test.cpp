// Keras's sample_weight and masks on every loss: values against naive loops in double (weights of
// the losses' shape, with a unit axis, per example over per-step losses, scalar; bool masks with
// the mean over kept entries), gradients against finite differences (both modes), the error
// messages, and PyTorch's cross_entropy(ignore_index) on a padded batch of sequences
// (tests/fixtures/losses/make_fixtures_masked.py).
#define FLUXION_FORWARD_MODE 1  // the gradient checks compare forward-mode tangents too
#include <fluxion/testing/check_gradients.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include <fluxion/tensor/creation.hpp>

#include "../losses_check.hpp"

using namespace losses_check;
using fx::losses::label_smoothing;

namespace {

/// The weighted reductions of per-example losses `l` with weights `w` (already broadcast to l):
/// Keras's sum_over_batch_size for float weights, the mean over kept entries for a mask.
struct reference {
  std::vector<double> none;
  double sum = 0, mean = 0;
};
reference weighted(const std::vector<double>& l, const std::vector<double>& w, bool mask) {
  reference r;
  double kept = 0;
  for (std::size_t i = 0; i < l.size(); ++i) {
    r.none.push_back(mask ? (w[i] != 0 ? l[i] : 0.0) : l[i] * w[i]);
    r.sum += r.none.back();
    kept += w[i];
  }
  r.mean = mask ? (kept > 0 ? r.sum / kept : 0.0) : r.sum / static_cast<double>(l.size());
  return r;
}

template <class F>
void check_weighted(F loss, const reference& want) {
  const fx::tensor<double> none = loss(reduction::none);
  test::check_close(none.to_vector(), want.none, 1e-12, 1e-12);
  const fx::tensor<double> total = loss(reduction::sum), mean = loss(reduction::mean);
  CHECK(total.rank() == 0);
  CHECK(mean.rank() == 0);
  CHECK(total.item() == doctest::Approx(want.sum).epsilon(1e-12));
  CHECK(mean.item() == doctest::Approx(want.mean).epsilon(1e-12));
}

/// true for the first lengths[i] steps of row i: a right-padded batch's mask.
fx::tensor<bool> lengths_mask(const std::vector<std::int64_t>& lengths, fx::index_t time) {
  std::vector<bool> kept;
  for (std::int64_t n : lengths)
    for (fx::index_t t = 0; t < time; ++t) kept.push_back(t < n);
  fx::tensor<bool> m(fx::shape{static_cast<fx::index_t>(lengths.size()), time});
  auto* p = m.mutable_data();
  for (std::size_t i = 0; i < kept.size(); ++i) p[i] = kept[i];
  return m;
}

std::vector<double> as_doubles(const fx::tensor<bool>& m) {
  std::vector<double> v;
  for (bool b : m.to_vector()) v.push_back(b ? 1.0 : 0.0);
  return v;
}

}  // namespace

TEST_CASE("losses: sample_weight of the losses' shape, with a unit axis, and scalar, against naive loops") {
  const auto x = test::random_tensor<double>({4, 5}, 1, -3, 3);
  const auto t = test::random_tensor<double>({4, 5}, 2, -3, 3);
  const fx::tensor<std::int32_t> labels = {4, 0, 2, 1};
  const fx::tensor<double> w = {0.5, 2.0, 0.0, 1.5};
  const std::vector<double> wv = w.to_vector();
  const fx::tensor<double> ce_none = fx::losses::sparse_softmax_cross_entropy(x, labels, reduction::none);
  const fx::tensor<double> mse_none = fx::losses::mean_squared_error(x, t, reduction::none);
  const reference ce = weighted(ce_none.to_vector(), wv, false), mse = weighted(mse_none.to_vector(), wv, false);
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, w, r); }, ce);
  check_weighted([&](reduction r) { return fx::losses::mean_squared_error(x, t, w, r); }, mse);
  // Keras's (batch, 1) weights, and integer weights converted to the losses' type.
  const fx::tensor<double> w_column = fx::reshape(w, {4, 1});
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, w_column, r); }, ce);
  const fx::tensor<std::int32_t> counts = {1, 0, 3, 2};
  check_weighted([&](reduction r) { return fx::losses::mean_squared_error(x, t, counts, r); },
                 weighted(mse_none.to_vector(), {1, 0, 3, 2}, false));
  // A scalar weight scales every loss.
  const fx::tensor<double> half = fx::full<double>({}, 0.5);
  check_weighted([&](reduction r) { return fx::losses::mean_squared_error(x, t, half, r); },
                 weighted(mse_none.to_vector(), {0.5, 0.5, 0.5, 0.5}, false));
  // Label smoothing with weights: the smoothed per-example losses, weighted.
  const fx::tensor<double> ls_none =
      fx::losses::sparse_softmax_cross_entropy(x, labels, label_smoothing{0.2}, reduction::none);
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, label_smoothing{0.2}, w, r); },
                 weighted(ls_none.to_vector(), wv, false));
}

TEST_CASE("losses: every loss takes sample_weight; weights of ones give the unweighted loss") {
  const auto x = test::random_tensor<double>({3, 4}, 3, -2, 2);
  const auto p = test::random_tensor<double>({3, 4}, 4, 0.05, 1);
  const auto soft = test::random_tensor<double>({3, 4}, 5, 0, 1);
  const fx::tensor<double> ones = fx::ones<double>({3});
  const auto same = [](const fx::tensor<double>& a, const fx::tensor<double>& b) {
    CHECK(a.item() == doctest::Approx(b.item()).epsilon(1e-12));
  };
  same(fx::losses::softmax_cross_entropy(x, soft, ones), fx::losses::softmax_cross_entropy(x, soft));
  same(fx::losses::softmax_cross_entropy(x, soft, label_smoothing{0.1}, ones),
       fx::losses::softmax_cross_entropy(x, soft, label_smoothing{0.1}));
  same(fx::losses::sigmoid_binary_cross_entropy(x, soft, ones), fx::losses::sigmoid_binary_cross_entropy(x, soft));
  same(fx::losses::sigmoid_binary_cross_entropy(x, soft, label_smoothing{0.1}, ones),
       fx::losses::sigmoid_binary_cross_entropy(x, soft, label_smoothing{0.1}));
  same(fx::losses::mean_absolute_error(x, soft, ones), fx::losses::mean_absolute_error(x, soft));
  same(fx::losses::log_cosh(x, soft, ones), fx::losses::log_cosh(x, soft));
  same(fx::losses::kl_divergence(p, soft, ones), fx::losses::kl_divergence(p, soft));
  same(fx::losses::cosine_similarity(x, soft, ones), fx::losses::cosine_similarity(x, soft));
  same(fx::losses::huber(x, soft, ones), fx::losses::huber(x, soft));
  same(fx::losses::huber(x, soft, 0.3, ones), fx::losses::huber(x, soft, 0.3));
}

TEST_CASE("losses: a bool mask on per-step losses keeps the real steps and averages over them") {
  // A tagger's logits (batch, time, classes): rows of 4, 1 and 0 real steps out of 4.
  const auto x = test::random_tensor<double>({3, 4, 5}, 6, -3, 3);
  const fx::tensor<std::int64_t> labels = {{1, 4, 0, 2}, {3, 0, 0, 0}, {0, 0, 0, 0}};
  const fx::tensor<bool> m = lengths_mask({4, 1, 0}, 4);
  const fx::tensor<double> per_step = fx::losses::sparse_softmax_cross_entropy(x, labels, reduction::none);
  REQUIRE(per_step.shape() == fx::shape{3, 4});
  const reference want = weighted(per_step.to_vector(), as_doubles(m), true);
  CHECK(want.mean == doctest::Approx(want.sum / 5));
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, m, r); }, want);
  // A mask per example over per-step losses weighs whole rows: (batch,) broadcast over time.
  const fx::tensor<bool> rows_kept = {true, false, true};
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, rows_kept, r); },
                 weighted(per_step.to_vector(), {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1}, true));
  // Float weights per example over per-step losses: Keras's sum over all steps / their number.
  const fx::tensor<double> w = {2.0, 0.5, 1.0};
  check_weighted([&](reduction r) { return fx::losses::sparse_softmax_cross_entropy(x, labels, w, r); },
                 weighted(per_step.to_vector(), {2, 2, 2, 2, .5, .5, .5, .5, 1, 1, 1, 1}, false));
  // The elementwise losses on (batch, time, features) give per-step losses too.
  const auto target = test::random_tensor<double>({3, 4, 5}, 7, -3, 3);
  const fx::tensor<double> mse_steps = fx::losses::mean_squared_error(x, target, reduction::none);
  check_weighted([&](reduction r) { return fx::losses::mean_squared_error(x, target, m, r); },
                 weighted(mse_steps.to_vector(), as_doubles(m), true));
  // Nothing kept: a mean of 0 (not 0 / 0), and a zero gradient.
  const fx::tensor<bool> none_kept = lengths_mask({0, 0, 0}, 4);
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> empty = fx::losses::sparse_softmax_cross_entropy(x, labels, none_kept);
  CHECK(empty.item() == 0.0);
  for (double g : tape.gradient(empty, x).to_vector()) CHECK(g == 0.0);
}

TEST_CASE("losses: weighted and masked losses, gradients against finite differences, both modes") {
  using fx::testing::check_gradients;
  const auto x = test::random_tensor<double>({3, 4, 5}, 8, -3, 3);
  const fx::tensor<std::int64_t> labels = {{1, 4, 0, 2}, {3, 0, 0, 0}, {0, 2, 0, 1}};
  const fx::tensor<bool> m = lengths_mask({4, 1, 3}, 4);
  const auto w = test::random_tensor<double>({3, 4}, 9, 0, 2);
  const fx::tensor<double> per_row = {0.5, 1.0, 3.0};
  const auto target = test::random_tensor<double>({3, 4, 5}, 10, -3, 3);
  const auto soft = test::random_tensor<double>({3, 4, 5}, 11, 0, 1);
  for (reduction r : {reduction::mean, reduction::sum, reduction::none}) {
    CAPTURE(static_cast<int>(r));
    auto r1 = check_gradients([&](const auto& v) { return fx::losses::sparse_softmax_cross_entropy(v, labels, m, r); }, x);
    CHECK_MESSAGE(r1.ok, r1.report);
    auto r2 = check_gradients([&](const auto& v) { return fx::losses::sparse_softmax_cross_entropy(v, labels, w, r); }, x);
    CHECK_MESSAGE(r2.ok, r2.report);
    auto r3 = check_gradients(
        [&](const auto& v) { return fx::losses::softmax_cross_entropy(v, soft, label_smoothing{0.2}, per_row, r); }, x);
    CHECK_MESSAGE(r3.ok, r3.report);
    auto r4 = check_gradients([&](const auto& v) { return fx::losses::mean_squared_error(v, target, m, r); }, x);
    CHECK_MESSAGE(r4.ok, r4.report);
    auto r5 = check_gradients([&](const auto& v) { return fx::losses::huber(v, target, 0.5, w, r); }, x);
    CHECK_MESSAGE(r5.ok, r5.report);
    auto r6 = check_gradients([&](const auto& v) { return fx::losses::sigmoid_binary_cross_entropy(v, soft, m, r); }, x);
    CHECK_MESSAGE(r6.ok, r6.report);
  }
}

TEST_CASE("losses: sample_weight of the wrong shape, and a NaN weight, throw naming the loss and the values") {
  const auto x = test::random_tensor<double>({3, 4, 5}, 12, -3, 3);
  const fx::tensor<std::int64_t> labels = fx::zeros<std::int64_t>({3, 4});
  check_contains(message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, labels, fx::ones<double>({4})); }),
                 {"sparse_softmax_cross_entropy: sample_weight of shape (4,)", "per-example losses of shape (3, 4)",
                  "(3, 4, 1)"});
  check_contains(message_of([&] { (void)fx::losses::mean_squared_error(x, x, fx::ones<bool>({3, 5})); }),
                 {"mean_squared_error: sample_weight of shape (3, 5)", "(3, 4)"});
  fx::tensor<double> w = fx::ones<double>({3, 4});
  w.mutable_data()[6] = std::numeric_limits<double>::quiet_NaN();
  check_contains(message_of([&] { (void)fx::losses::sparse_softmax_cross_entropy(x, labels, w); }),
                 {"sparse_softmax_cross_entropy: the loss is nan", "sample_weight[1, 2] = nan"});
}

TEST_CASE("losses: a masked sequence loss equals PyTorch's cross_entropy with ignore_index, in float") {
  const auto dir = std::string(FLUXION_TEST_FIXTURES_DIR) + "/losses/";
  const auto logits = peer("masked_ce_logits");
  const auto labels = fx::io::load_npy<std::int64_t>(dir + "masked_ce_labels.npy");
  const auto lengths = fx::io::load_npy<std::int64_t>(dir + "masked_ce_lengths.npy");
  const fx::tensor<bool> m = lengths_mask(lengths.to_vector(), logits.shape()[1]);
  for (const char* suffix : {"", "_ls"}) {
    CAPTURE(suffix);
    const label_smoothing s{std::string(suffix).empty() ? 0.0 : 0.2};
    fx::gradient_tape tape;
    tape.watch(logits);
    const fx::tensor<float> mean = fx::losses::sparse_softmax_cross_entropy(logits, labels, s, m);
    check_peer(mean, peer(std::string("masked_ce") + suffix + "_mean"), "mean over kept steps");
    check_peer(tape.gradient(mean, logits), peer(std::string("masked_ce") + suffix + "_grad"), "gradient");
  }
}
