// Index checks on fx::cuda that do not wait for the device (backend/cuda/checks.hpp): the sparse
// losses, gather, take_along_axis, unsorted_segment_sum and nn::embedding queue a check kernel
// instead of reading their indices back. A bad index is reported, with the cpu's message, by the
// thread's next read from the device; until then no optimizer step changes a variable, and fit
// still stops at the step before anything is updated.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fluxion/fit.hpp"
#include "fluxion/losses.hpp"
#include "fluxion/nn.hpp"
#include "fluxion/optim.hpp"
#include "same_on_both_devices.hpp"

namespace {

namespace fx = fluxion;
using fluxion_test::check_values;
using fluxion_test::filled;

std::int64_t device_reads_so_far() { return fx::memory::stats<fx::cuda>().host_reads; }

const std::string queued_check_suffix = " (found by a check queued on the device, and reported at this thread's next read from it)";

template <class T>
fx::tensor<T, fx::cuda> checked_ids(std::vector<T> v, fx::shape dims) {
  return fx::to<fx::cuda>(fx::from_vector(std::move(v), dims));
}

}  // namespace

TEST_CASE("cuda checks: a sparse loss checks its labels without reading them, and the next read reports a bad one") {
  const auto x = fx::to<fx::cuda>(filled<float>({3, 4}, 1));
  const auto good = checked_ids<std::int64_t>({1, 3, 0}, {3});
  const std::int64_t before = device_reads_so_far();
  const fx::tensor<float, fx::cuda> loss = fx::losses::sparse_softmax_cross_entropy(x, good);
  CHECK(device_reads_so_far() == before);  // until stop 60: one read, the labels
  CHECK(loss.item() == doctest::Approx(fx::losses::sparse_softmax_cross_entropy(fx::to<fx::cpu>(x), fx::to<fx::cpu>(good)).item()));

  const auto bad = checked_ids<std::int64_t>({1, 4, 0}, {3});
  fx::tensor<float, fx::cuda> bad_loss;
  CHECK_NOTHROW(bad_loss = fx::losses::sparse_softmax_cross_entropy(x, bad));
  CHECK_THROWS_WITH_AS(bad_loss.item(), ("sparse_softmax_cross_entropy: labels[1] = 4 is not in [0, 4)" + queued_check_suffix).c_str(),
                       fx::out_of_range);
  // Reported once: the next reads see nothing pending, and a good loss reads as before.
  CHECK_NOTHROW(bad_loss.item());
  CHECK(fx::losses::sparse_softmax_cross_entropy(x, good).item() == doctest::Approx(loss.item()));
  // (batch, 1) labels, int32, and with sample weights: the same check.
  const auto bad_column = checked_ids<std::int32_t>({0, 2, -1}, {3, 1});
  const auto weights = fx::to<fx::cuda>(fx::tensor<float>{1.f, 2.f, 0.5f});
  fx::tensor<float, fx::cuda> weighted = fx::losses::sparse_softmax_cross_entropy(x, bad_column, weights);
  CHECK_THROWS_WITH_AS(fx::synchronize<fx::cuda>(), ("sparse_softmax_cross_entropy: labels[2] = -1 is not in [0, 4)" + queued_check_suffix).c_str(),
                       fx::out_of_range);
}

TEST_CASE("cuda checks: gather, take_along_axis, unsorted_segment_sum and embedding report a bad index at the next read") {
  const fx::tensor<float> host = filled<float>({4, 3}, 2);
  const auto params = fx::to<fx::cuda>(host);
  const std::int64_t before = device_reads_so_far();
  // Good indices: the cpu's values, and no read until the result is copied back.
  const fx::tensor<float, fx::cuda> rows = fx::gather(params, checked_ids<std::int32_t>({3, 0, 3}, {3}), 0);
  const fx::tensor<float, fx::cuda> along = fx::take_along_axis(params, checked_ids<std::int64_t>({2, 1, 0, 0}, {4, 1}), 1);
  const fx::tensor<float, fx::cuda> sums = fx::unsorted_segment_sum(params, checked_ids<std::int32_t>({1, 1, 0, 2}, {4}), 3);
  CHECK(device_reads_so_far() == before);
  const fx::tensor<float> want_rows = fx::gather(host, fx::from_vector(std::vector<std::int32_t>{3, 0, 3}, {3}), 0);
  const fx::tensor<float> want_along = fx::take_along_axis(host, fx::from_vector(std::vector<std::int64_t>{2, 1, 0, 0}, {4, 1}), 1);
  const fx::tensor<float> want_sums = fx::unsorted_segment_sum(host, fx::from_vector(std::vector<std::int32_t>{1, 1, 0, 2}, {4}), 3);
  check_values(fx::to<fx::cpu>(rows).to_vector(), want_rows.to_vector(), 0);
  check_values(fx::to<fx::cpu>(along).to_vector(), want_along.to_vector(), 0);
  check_values(fx::to<fx::cpu>(sums).to_vector(), want_sums.to_vector(), 0);

  // Bad ones: the op returns (reading clamped indices), and the next read throws the cpu's message.
  fx::tensor<float, fx::cuda> r = fx::gather(params, checked_ids<std::int32_t>({3, 7, 0}, {3}), 0);
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(r), ("gather: indices = 7 is not in [0, 4)" + queued_check_suffix).c_str(), fx::out_of_range);
  r = fx::take_along_axis(params, checked_ids<std::int64_t>({2, 1, 3, 0}, {4, 1}), 1);
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(r),
                       ("take_along_axis: indices[2, 0] = 3 is not in [0, 3) (axis 1 of shape (4, 3))" + queued_check_suffix).c_str(),
                       fx::out_of_range);
  r = fx::unsorted_segment_sum(params, checked_ids<std::int32_t>({1, 1, -2, 2}, {4}), 3);
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(r), ("unsorted_segment_sum: segment_ids[2] = -2 is not in [0, 3)" + queued_check_suffix).c_str(),
                       fx::out_of_range);
  // Two bad ops before one read: the first is reported, and both are cleared.
  r = fx::gather(params, checked_ids<std::int32_t>({5}, {1}), 0);
  r = fx::gather(params, checked_ids<std::int32_t>({6}, {1}), 0);
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(r), ("gather: indices = 5 is not in [0, 4)" + queued_check_suffix).c_str(), fx::out_of_range);
  CHECK_NOTHROW(fx::to<fx::cpu>(r));

  // nn::embedding: one check, and no read (until stop 60 it read its indices twice, its own check and gather's).
  fx::random::generator gen{3};
  auto embed = fluxion::nn::sequential(gen, fluxion::nn::typed_input<std::int32_t, 2>::on<fx::cuda>{},
                                       fluxion::nn::embedding<5, 3>{});
  const std::int64_t at = device_reads_so_far();
  fx::tensor<float, fx::cuda> e = embed(checked_ids<std::int32_t>({4, 0}, {1, 2}));
  CHECK(device_reads_so_far() == at);
  e = embed(checked_ids<std::int32_t>({1, 5}, {1, 2}));
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(e), doctest::Contains(("indices[0, 1] = 5 is not in [0, 5) (indices of shape (1, 2))" + queued_check_suffix).c_str()),
                       fx::out_of_range);
}

TEST_CASE("cuda checks: unread checks do not pile up") {
  const auto params = fx::to<fx::cuda>(filled<float>({4, 3}, 2));
  const auto ids = checked_ids<std::int32_t>({3, 0}, {2});
  fx::synchronize<fx::cuda>();
  for (std::size_t i = 0; i < 3 * fx::detail::pending_checks::max_pending; ++i) {
    fx::tensor<float, fx::cuda> r = fx::gather(params, ids, 0);
    CHECK(fx::detail::pending_checks::mine().size() <= fx::detail::pending_checks::max_pending);
  }
  // A bad index among them is still reported, by the wait that drains them.
  const std::size_t room = fx::detail::pending_checks::max_pending - fx::detail::pending_checks::mine().size();
  for (std::size_t i = 0; i < room; ++i) fx::tensor<float, fx::cuda> r = fx::gather(params, ids, 0);
  CHECK_THROWS_AS(fx::gather(params, checked_ids<std::int32_t>({4}, {1}), 0), fx::out_of_range);
  CHECK(fx::detail::pending_checks::mine().size() == 0);
}

TEST_CASE("cuda checks: after a failed check, no optimizer step changes a variable until the read reports it") {
  const fx::tensor<float> w0 = filled<float>({4, 3}, 5);
  fx::variable<float, fx::cuda> w{fx::to<fx::cuda>(w0), "w"};
  const auto x = fx::to<fx::cuda>(filled<float>({2, 4}, 6));
  fx::optim::adam opt{0.1};
  auto step = [&](const fx::tensor<std::int32_t, fx::cuda>& labels) {
    fx::gradient_tape tape;
    fx::tensor<float, fx::cuda> loss = fx::losses::sparse_softmax_cross_entropy(fx::matmul(x, w), labels);
    opt.apply_gradients(tape.gradient(loss, {std::cref(w)}), {&w});
  };
  const auto bad = checked_ids<std::int32_t>({1, 3}, {2});
  const std::int64_t before = device_reads_so_far();
  step(bad);
  step(checked_ids<std::int32_t>({1, 2}, {2}));  // a good step after it is held back too
  CHECK(device_reads_so_far() == before);
  CHECK_THROWS_WITH_AS(fx::to<fx::cpu>(w.peek()), ("sparse_softmax_cross_entropy: labels[1] = 3 is not in [0, 3)" + queued_check_suffix).c_str(),
                       fx::out_of_range);
  check_values(fx::to<fx::cpu>(w.peek()).to_vector(), w0.to_vector(), 0);
  // Once reported, steps update again.
  step(checked_ids<std::int32_t>({1, 2}, {2}));
  CHECK(fx::to<fx::cpu>(w.peek()).to_vector() != w0.to_vector());
}

TEST_CASE("cuda checks: fit reads one value a step, and stops at a bad label before the update, naming the step") {
  const fx::tensor<float> x = filled<float>({16, 4}, 7);
  const auto y = fx::from_vector(std::vector<std::int32_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {16});
  auto model = [](auto device) {
    fx::random::generator gen{4};
    return fluxion::nn::sequential(gen, typename fluxion::nn::input<4>::template on<decltype(device)>{}, fluxion::nn::dense<3>{});
  };
  auto loss = [](const auto& logits, const auto& l) { return fx::losses::sparse_softmax_cross_entropy(logits, l); };
  const fx::fit_options options{.epochs = 1, .verbose = 0, .handle_interrupt = false};
  auto batches = [&](const fx::tensor<std::int32_t>& labels) {
    std::vector<std::pair<fx::tensor<float, fx::cuda>, fx::tensor<std::int32_t, fx::cuda>>> out;
    for (fx::index_t b = 0; b < 4; ++b)
      out.emplace_back(fx::to<fx::cuda>(fx::slice(x, {4 * b, 0}, {4, 4})), fx::to<fx::cuda>(fx::slice(labels, {4 * b}, {4})));
    return out;
  };
  // Good labels: one read a step, the loss (its check for NaN), as many as the steps.
  auto dev = model(fx::cuda{});
  fx::optim::sgd dev_opt{0.1};
  const auto good = batches(y);
  const std::int64_t before = device_reads_so_far();
  fx::fit(dev, dev_opt, loss, good, options);
  CHECK(device_reads_so_far() - before == 4 + 2);  // and the epoch's end: the loss mean has none; the accuracy's two sums

  // A bad label in the third batch: fit throws there, before that step's update, with the cpu's
  // message and the step; the weights are those after two steps.
  std::vector<std::int32_t> labels = y.to_vector();
  labels[9] = 3;
  auto failing = model(fx::cuda{});
  fx::optim::sgd failing_opt{0.1};
  CHECK_THROWS_WITH_AS(fx::fit(failing, failing_opt, loss, batches(fx::from_vector(labels, {16})), options),
                       ("fit: epoch 1, step 3 (global step 3): sparse_softmax_cross_entropy: labels[1] = 3 is not in [0, 3)" +
                        queued_check_suffix).c_str(),
                       fx::out_of_range);
  auto two_steps = model(fx::cuda{});
  fx::optim::sgd two_opt{0.1};
  fx::fit_options two = options;
  two.steps_per_epoch = 2;
  fx::fit(two_steps, two_opt, loss, good, two);
  const auto got = failing.variables(), want = two_steps.variables();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    check_values(fx::to<fx::cpu>(got[i]->peek()).to_vector(), fx::to<fx::cpu>(want[i]->peek()).to_vector(), 0);
}
