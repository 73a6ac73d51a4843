// fx::losses and fx::metrics on fx::cuda tensors: every loss, with every reduction, and its gradient
// through the tape on the device, and the metrics' running values, agree with the cpu.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "fluxion/losses.hpp"
#include "fluxion/metrics.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
namespace losses = fluxion::losses;
using fluxion_test::check_values;
using fluxion_test::filled;
using fluxion_test::same_on_both_devices;

/// d loss(x, y) / dx on the device, copied back, and on the cpu.
template <class T, class Loss, class Y>
void same_gradient(const Loss& loss, const fx::tensor<T>& x, const Y& y, double rtol) {
  auto grad = [&](const auto& xd, const auto& yd) {
    fx::gradient_tape tape;
    tape.watch(xd);
    auto l = loss(xd, yd);
    return tape.gradient(l, xd);
  };
  const fx::tensor<T> want = grad(x, y);
  // Until stop 54 this suite was built without autodiff, and both sides were empty tensors.
  REQUIRE(want.shape() == x.shape());
  const fx::tensor<T> got = fx::to<fx::cpu>(grad(fx::to<fx::cuda>(x), fx::to<fx::cuda>(y)));
  REQUIRE(got.shape() == want.shape());
  check_values(got.to_vector(), want.to_vector(), rtol);
}

}  // namespace

TEST_CASE_TEMPLATE("cuda losses: every loss and reduction, values and gradients", T, float, double) {
  const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const auto logits = filled<T>({6, 5}, 1, -4, 4);
  const auto soft = filled<T>({6, 5}, 2, 0, 1);
  const auto targets = filled<T>({6, 5}, 3, -2, 2);
  fx::tensor<std::int32_t> labels(fx::shape{6});
  for (int i = 0; i < 6; ++i) labels.mutable_data()[i] = (i * 3) % 5;
  for (auto r : {losses::reduction::mean, losses::reduction::sum, losses::reduction::none}) {
    CAPTURE(static_cast<int>(r));
    same_on_both_devices(rtol, [r](const auto& x, const auto& y) { return losses::softmax_cross_entropy(x, y, r); },
                         logits, soft);
    same_on_both_devices(rtol, [r](const auto& x, const auto& y) { return losses::sparse_softmax_cross_entropy(x, y, r); },
                         logits, labels);
    same_on_both_devices(rtol, [r](const auto& x, const auto& y) { return losses::sigmoid_binary_cross_entropy(x, y, r); },
                         logits, soft);
    same_on_both_devices(rtol, [r](const auto& x, const auto& y) { return losses::mean_squared_error(x, y, r); },
                         logits, targets);
    same_on_both_devices(rtol, [r](const auto& x, const auto& y) { return losses::huber(x, y, 1.5, r); }, logits,
                         targets);
  }
  same_gradient<T>([](const auto& x, const auto& y) { return losses::sparse_softmax_cross_entropy(x, y); }, logits,
                   labels, rtol);
  same_gradient<T>([](const auto& x, const auto& y) { return losses::sigmoid_binary_cross_entropy(x, y); }, logits,
                   soft, rtol);
  same_gradient<T>([](const auto& x, const auto& y) { return losses::huber(x, y); }, logits, targets, rtol);
}

TEST_CASE_TEMPLATE("cuda losses: sample weights and masks (a tagger's padded steps), values and gradients", T, float, double) {
  const double rtol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const auto logits = filled<T>({3, 4, 5}, 7, -4, 4);
  const auto targets = filled<T>({3, 4, 5}, 8, -2, 2);
  const auto weights = filled<T>({3, 4}, 9, 0, 2);
  fx::tensor<std::int32_t> labels(fx::shape{3, 4});
  fx::tensor<bool> mask(fx::shape{3, 4});
  for (int i = 0; i < 12; ++i) {
    labels.mutable_data()[i] = (i * 3) % 5;
    mask.mutable_data()[i] = i % 4 < 3 - i / 4;  // rows of 3, 2 and 1 real steps
  }
  for (auto r : {losses::reduction::mean, losses::reduction::sum, losses::reduction::none}) {
    CAPTURE(static_cast<int>(r));
    same_on_both_devices(
        rtol, [r](const auto& x, const auto& y, const auto& m) { return losses::sparse_softmax_cross_entropy(x, y, m, r); },
        logits, labels, mask);
    same_on_both_devices(
        rtol, [r](const auto& x, const auto& y, const auto& w) { return losses::sparse_softmax_cross_entropy(x, y, w, r); },
        logits, labels, weights);
    same_on_both_devices(
        rtol, [r](const auto& x, const auto& y, const auto& m) { return losses::mean_squared_error(x, y, m, r); }, logits,
        targets, mask);
  }
  const fx::tensor<bool, fx::cuda> device_mask = fx::to<fx::cuda>(mask);
  auto grad = [&](const auto& x, const auto& y, const auto& m) {
    fx::gradient_tape tape;
    tape.watch(x);
    auto l = losses::sparse_softmax_cross_entropy(x, y, m);
    return tape.gradient(l, x);
  };
  const fx::tensor<T> want = grad(logits, labels, mask);
  REQUIRE(want.shape() == logits.shape());
  const fx::tensor<T> got = fx::to<fx::cpu>(grad(fx::to<fx::cuda>(logits), fx::to<fx::cuda>(labels), device_mask));
  REQUIRE(got.shape() == want.shape());
  check_values(got.to_vector(), want.to_vector(), rtol);
}

TEST_CASE("cuda losses: a label out of range names its position, on the device too") {
  auto x = fx::to<fx::cuda>(filled<float>({3, 4}, 1));
  fx::tensor<std::int64_t, fx::cuda> labels = {std::int64_t{1}, std::int64_t{4}, std::int64_t{0}};
  // Checked on the device and reported by the next read (checks.test.cpp has the rest).
  CHECK_THROWS_WITH_AS(losses::sparse_softmax_cross_entropy(x, labels).item(),
                       doctest::Contains("sparse_softmax_cross_entropy: labels[1] = 4 is not in [0, 4)"), fx::out_of_range);
}

TEST_CASE("cuda metrics: accuracies and means read device tensors") {
  const auto scores = filled<float>({8, 3}, 4);
  fx::tensor<std::int32_t> labels(fx::shape{8});
  for (int i = 0; i < 8; ++i) labels.mutable_data()[i] = i % 3;
  fx::metrics::sparse_categorical_accuracy on_cpu, on_device;
  on_cpu.update(labels, scores);
  on_device.update(fx::to<fx::cuda>(labels), fx::to<fx::cuda>(scores));
  CHECK(on_device.result() == on_cpu.result());
  fx::metrics::categorical_accuracy c_cpu, c_dev;
  const auto other = filled<float>({8, 3}, 5);
  c_cpu.update(other, scores);
  c_dev.update(fx::to<fx::cuda>(other), fx::to<fx::cuda>(scores));
  CHECK(c_dev.result() == c_cpu.result());
  fx::metrics::mean m;
  m.update(fx::to<fx::cuda>(filled<float>({4}, 6)));
  CHECK(m.result() == doctest::Approx(fx::reduce_mean(filled<float>({4}, 6)).eval().item()).epsilon(1e-6));
}

/// Copies to the host so far (each waits for the device's queue).
std::int64_t host_reads() { return fx::memory::stats<fx::cuda>().host_reads; }

TEST_CASE("cuda metrics: updates keep their sums on the device until a result is read") {
  // Three batches of (batch, time, classes) logits, labels (batch, time) and both kinds of weight:
  // a mask (bool, false at padding) and float weights per example ((batch,), Keras's leading axes).
  fx::metrics::sparse_categorical_accuracy plain_cpu, plain_dev, masked_cpu, masked_dev, weighted_cpu, weighted_dev;
  fx::metrics::categorical_accuracy onehot_cpu, onehot_dev;
  fx::metrics::mean mean_cpu, mean_dev, wmean_cpu, wmean_dev;
  std::vector<fx::tensor<float>> logits;
  std::vector<fx::tensor<std::int32_t>> labels;
  for (std::uint64_t b = 0; b < 3; ++b) {
    const fx::index_t batch = 4 + static_cast<fx::index_t>(b);
    logits.push_back(filled<float>({batch, 5, 3}, 20 + b));
    fx::tensor<std::int32_t> y(fx::shape{batch, 5});
    for (fx::index_t i = 0; i < y.size(); ++i) y.mutable_data()[i] = static_cast<std::int32_t>((i * 7 + b) % 3);
    labels.push_back(y);
  }
  const std::int64_t before = host_reads();
  for (std::size_t b = 0; b < logits.size(); ++b) {
    const auto& x = logits[b];
    const auto& y = labels[b];
    const fx::tensor<bool> mask = filled<bool>(y.shape(), 30 + b);
    const fx::tensor<float> w = filled<float>({y.shape()[0]}, 40 + b, 0.0, 3.0);
    const fx::tensor<float> other = filled<float>(x.shape(), 50 + b);
    const auto xd = fx::to<fx::cuda>(x);
    const auto yd = fx::to<fx::cuda>(y);
    plain_cpu.update(y, x);
    plain_dev.update(yd, xd);
    masked_cpu.update(y, x, mask);
    masked_dev.update(yd, xd, fx::to<fx::cuda>(mask));
    weighted_cpu.update(y, x, w);
    weighted_dev.update(yd, xd, fx::to<fx::cuda>(w));
    onehot_cpu.update(other, x);
    onehot_dev.update(fx::to<fx::cuda>(other), xd);
    mean_cpu.update(x);
    mean_dev.update(xd * 1.f);  // an expression, evaluated on the device
    wmean_cpu.update(y, w);
    wmean_dev.update(yd, fx::to<fx::cuda>(w));
  }
  // The uploads above read nothing back; neither did the updates.
  CHECK(host_reads() == before);
  CHECK(plain_dev.result() == plain_cpu.result());
  CHECK(host_reads() == before + 2);  // the total and the weights' sum, once for three batches
  CHECK(plain_dev.count() == plain_cpu.count());
  CHECK(host_reads() == before + 2);  // already folded in
  CHECK(masked_dev.result() == masked_cpu.result());
  CHECK(masked_dev.count() == masked_cpu.count());
  CHECK(weighted_dev.result() == doctest::Approx(weighted_cpu.result()).epsilon(1e-12));
  CHECK(weighted_dev.count() == doctest::Approx(weighted_cpu.count()).epsilon(1e-12));
  CHECK(onehot_dev.result() == onehot_cpu.result());
  CHECK(mean_dev.result() == doctest::Approx(mean_cpu.result()).epsilon(1e-12));
  CHECK(wmean_dev.result() == doctest::Approx(wmean_cpu.result()).epsilon(1e-12));
  CHECK(plain_cpu.result() > 0.1);
  CHECK(plain_cpu.result() < 0.9);
  CHECK(masked_cpu.count() < plain_cpu.count());

  // A copy keeps the sums so far; later updates of either are its own.
  fx::metrics::sparse_categorical_accuracy copy_dev = plain_dev;
  plain_dev.update(fx::to<fx::cuda>(labels[0]), fx::to<fx::cuda>(logits[0]));
  plain_cpu.update(labels[0], logits[0]);
  fx::metrics::sparse_categorical_accuracy pending_copy = plain_dev;  // copied with a batch still on the device
  CHECK(copy_dev.count() == plain_cpu.count() - 20);
  CHECK(plain_dev.result() == plain_cpu.result());
  CHECK(pending_copy.result() == plain_cpu.result());
  CHECK(pending_copy.count() == plain_cpu.count());
  plain_dev.reset();
  CHECK(plain_dev.result() == 0);
  CHECK(plain_dev.count() == 0);
  plain_dev.update(fx::to<fx::cuda>(labels[1]), fx::to<fx::cuda>(logits[1]));
  plain_dev.reset();  // drops a batch still on the device
  CHECK(plain_dev.count() == 0);

  // Labels on the cpu with logits on the device: compared on the device.
  fx::metrics::sparse_categorical_accuracy mixed;
  mixed.update(labels[2], fx::to<fx::cuda>(logits[2]));
  fx::metrics::sparse_categorical_accuracy alone;
  alone.update(labels[2], logits[2]);
  CHECK(mixed.result() == alone.result());

  // Shape errors name the metric and the shapes, as on the cpu, before anything is queued.
  CHECK_THROWS_WITH_AS(plain_dev.update(fx::to<fx::cuda>(labels[0]), fx::to<fx::cuda>(logits[1])),
                       "sparse_categorical_accuracy.update: y_true of shape (4, 5) does not fit y_pred of shape "
                       "(5, 5, 3): expected (5, 5) or (5, 5, 1)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(weighted_dev.update(fx::to<fx::cuda>(labels[0]), fx::to<fx::cuda>(logits[0]),
                                           fx::to<fx::cuda>(filled<float>({3}, 1))),
                       "sparse_categorical_accuracy.update: sample_weight of shape (3,) does not broadcast to the "
                       "values' shape (4, 5)",
                       fx::shape_error);
}

TEST_CASE("cuda metrics: Keras's regression, binary, top-k, precision and recall metrics read nothing back until a result") {
  namespace metrics = fx::metrics;
  const auto p = filled<float>({6, 4}, 60, 0.0, 1.0);
  const auto y = filled<float>({6, 4}, 61, 0.0, 1.0);
  const fx::tensor<float> binary(fx::cast<float>(y > 0.5f));
  fx::tensor<std::int32_t> labels(fx::shape{6});
  for (int i = 0; i < 6; ++i) labels.mutable_data()[i] = (i * 5) % 4;
  const auto w = filled<float>({6}, 62, 0.0, 2.0);
  struct all_metrics {
    metrics::mean_squared_error mse;
    metrics::mean_absolute_error mae;
    metrics::mean_absolute_percentage_error mape;
    metrics::root_mean_squared_error rmse;
    metrics::binary_accuracy accuracy;
    metrics::precision precision;
    metrics::recall recall;
    metrics::sparse_top_k_categorical_accuracy top{2};
    metrics::top_k_categorical_accuracy dense_top{2};
    std::vector<double> results() const {
      return {mse.result(),      mae.result(),    mape.result(), rmse.result(),    accuracy.result(),
              precision.result(), recall.result(), top.result(),  dense_top.result()};
    }
  } on_cpu, on_device;
  // Two batches of each, with weights for some.
  auto feed = [](all_metrics& m, const auto& y, const auto& p, const auto& binary, const auto& labels, const auto& w) {
    for (int b = 0; b < 2; ++b) {
      m.mse.update(y, p);
      m.mae.update(y, p, w);
      m.mape.update(y, p);
      m.rmse.update(y, p, w);
      m.accuracy.update(binary, p);
      m.precision.update(binary, p, w);
      m.recall.update(binary, p);
      m.top.update(labels, p, w);
      m.dense_top.update(y, p);
    }
  };
  const auto pd = fx::to<fx::cuda>(p);
  const auto yd = fx::to<fx::cuda>(y);
  const auto bd = fx::to<fx::cuda>(binary);
  const auto ld = fx::to<fx::cuda>(labels);
  const auto wd = fx::to<fx::cuda>(w);
  const std::int64_t before = host_reads();
  feed(on_device, yd, pd, bd, ld, wd);
  CHECK(host_reads() == before);
  feed(on_cpu, y, p, binary, labels, w);
  const auto want = on_cpu.results();
  check_values(on_device.results(), want, 1e-12);
  CHECK(want[5] > 0);  // precision
  CHECK(want[7] > 0);  // top-2
}

TEST_CASE("cuda metrics: auc and the IoU metrics count on the device and read nothing back until a result") {
  namespace metrics = fx::metrics;
  const auto p = filled<float>({8, 3}, 70, 0.0, 1.0);
  const auto u = filled<float>({8, 3}, 71, 0.0, 1.0);
  const fx::tensor<float> y(fx::cast<float>(u < p));  // labels that follow the scores
  const auto w = filled<float>({8}, 72, 0.0, 2.0);
  fx::tensor<std::int32_t> classes(fx::shape{8});
  for (int i = 0; i < 8; ++i) classes.mutable_data()[i] = i == 5 ? 9 : (i * 2) % 3;  // 9: ignored
  struct all_metrics {
    metrics::auc roc;
    metrics::auc pr{{.curve = metrics::auc_curve::pr, .multi_label = true}};
    metrics::auc logits{{.num_thresholds = 50, .label_weights = {1, 2, 0.5}, .from_logits = true}};
    metrics::mean_iou segments{3, {.ignore_class = 9, .sparse_y_pred = false}};
    metrics::binary_iou binary;
    std::vector<double> results() const {
      return {roc.result(), pr.result(), logits.result(), segments.result(), binary.result()};
    }
  } on_cpu, on_device;
  auto feed = [](all_metrics& m, const auto& y, const auto& p, const auto& classes, const auto& w) {
    for (int b = 0; b < 2; ++b) {
      m.roc.update(y, p, w);
      m.pr.update(y, p);
      m.logits.update(y, p * 4.0f - 2.0f);
      m.segments.update(classes, p, w);
      m.binary.update(y, p, w);
    }
  };
  const auto pd = fx::to<fx::cuda>(p);
  const auto yd = fx::to<fx::cuda>(y);
  const auto cd = fx::to<fx::cuda>(classes);
  const auto wd = fx::to<fx::cuda>(w);
  const std::int64_t before = host_reads();
  feed(on_device, yd, pd, cd, wd);
  CHECK(host_reads() == before);
  feed(on_cpu, y, p, classes, w);
  const auto want = on_cpu.results();
  check_values(on_device.results(), want, 1e-12);
  for (double r : want) CHECK(r > 0.2);
  const auto cm_dev = on_device.segments.confusion_matrix().to_vector(), cm_cpu = on_cpu.segments.confusion_matrix().to_vector();
  check_values(cm_dev, cm_cpu, 1e-12);

  // What a device's update cannot check without waiting is refused at the next read, naming the metric.
  metrics::auc bad_auc;
  const auto tripled = fx::to<fx::cuda>(fx::tensor<float>(p * 3.0f));
  const std::int64_t before_bad = host_reads();
  bad_auc.update(yd, tripled);
  CHECK(host_reads() == before_bad);
  CHECK_THROWS_WITH_AS(bad_auc.result(),
                       doctest::Contains("values of y_pred given since the last reset were not probabilities in [0, 1]"),
                       fx::invalid_argument);
  bad_auc.reset();
  bad_auc.update(yd, pd);
  CHECK(bad_auc.result() == doctest::Approx(want[0]).epsilon(0.2));
  metrics::mean_iou bad_iou(2);
  bad_iou.update(cd, cd);  // class 2 (and 9) is not among 2 classes
  CHECK_THROWS_WITH_AS(bad_iou.result(), doctest::Contains("class ids given since the last reset were not integers in [0, 2)"),
                       fx::invalid_argument);
}
