// fx::distributed::data_parallel under mpiexec (ctest runs two processes). The reference is the
// same model trained by one process on the union of the processes' batches, which every process
// computes for itself: with equal batches, the mean of the processes' gradients is the gradient of
// the union's mean loss, so the two runs must agree to rounding (double).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fluxion/data.hpp>
#include <fluxion/distributed.hpp>
#include <fluxion/fluxion.hpp>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

const fx::distributed::communicator& world() {
  static fx::distributed::communicator comm;
  return comm;
}

auto make_net(std::uint64_t seed) {
  fx::random::generator gen{seed};
  return nn::sequential(gen, nn::typed_input<double, 4>{}, nn::dense<8>{}, nn::tanh{}, nn::dense<3>{});
}

auto cross_entropy = [](const auto& logits, const auto& labels) {
  return fx::losses::sparse_softmax_cross_entropy(logits, labels);
};

/// n examples of 4 features and 3 classes, the same on every process.
std::pair<fx::tensor<double>, fx::tensor<std::int32_t>> examples(fx::index_t n) {
  fx::random::generator gen{7};
  const fx::tensor<double> x = fx::random::normal<double>({n, 4}, gen);
  const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({n}, gen, 0, 3);
  return {x, y};
}

/// The largest |got[i] - want[i]|.
template <class T>
double largest_difference(const std::vector<T>& got, const std::vector<T>& want) {
  REQUIRE(got.size() == want.size());
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
  return worst;
}

template <class A, class B>
void check_close_variables(A& a, B& b, double tolerance) {
  const auto vars = a.variables();
  const auto reference = b.variables();
  REQUIRE(vars.size() == reference.size());
  for (std::size_t i = 0; i < vars.size(); ++i) {
    INFO(vars[i]->name());
    CHECK(largest_difference(vars[i]->peek().to_vector(), reference[i]->peek().to_vector()) < tolerance);
  }
}

}  // namespace

TEST_CASE("data_parallel: each process's half batch, averaged, takes the whole batch's step") {
  const auto& comm = world();
  fx::set_num_threads(1);
  const fx::index_t k = 6;  // examples per process and call
  const fx::index_t global = k * comm.size();
  // With gradient accumulation over `cycle` calls, an update takes the cycle's examples of every
  // process, and the processes exchange gradients once a cycle (PyTorch's no_sync).
  for (const fx::index_t cycle : {1, 2, 3}) {
    CAPTURE(cycle);
    const auto [x, y] = examples(global * cycle * 5);
    auto net = make_net(1);
    auto reference = make_net(1);
    fx::optim::adam adam{{.learning_rate = 0.05, .gradient_accumulation_steps = cycle}};
    fx::optim::adam reference_adam{{.learning_rate = 0.05}};
    fx::distributed::data_parallel opt{comm, adam};
    for (fx::index_t step = 0; step < 5; ++step) {
      for (fx::index_t call = 0; call < cycle; ++call) {
        const fx::index_t begin = (step * cycle + call) * global + comm.rank() * k;
        const fx::tensor<double> xb = fx::slice(x, {begin, 0}, {k, 4});
        const fx::tensor<std::int32_t> yb = fx::slice(y, {begin}, {k});
        fx::gradient_tape tape;
        const fx::tensor<double> loss = cross_entropy(net(xb), yb);
        auto vars = net.trainable_variables();
        opt.apply_gradients(tape.gradient(loss, vars), vars);
      }
      const fx::tensor<double> xa = fx::slice(x, {step * cycle * global, 0}, {cycle * global, 4});
      const fx::tensor<std::int32_t> ya = fx::slice(y, {step * cycle * global}, {cycle * global});
      fx::gradient_tape tape;
      const fx::tensor<double> loss = cross_entropy(reference(xa), ya);
      auto vars = reference.trainable_variables();
      reference_adam.apply_gradients(tape.gradient(loss, vars), vars);
    }
    CHECK(opt.iterations() == 5 * cycle);
    CHECK(opt.updates() == 5);
    CHECK(adam.iterations() == 5 * cycle);
    CHECK(opt.gradient_exchanges() == 5);
    check_close_variables(net, reference, 1e-12);
  }
}

TEST_CASE("average_gradients: large gradients straight, small ones in one fused message, none kept") {
  const auto& comm = world();
  fx::optim::sgd sgd{0.1};
  fx::distributed::data_parallel opt{comm, sgd};
  const double scale = comm.rank() + 1.0;  // process r holds (r + 1) times the base values
  const double mean_scale = (comm.size() + 1) / 2.0;
  const fx::tensor<double> base = fx::cast<double>(fx::arange<std::int32_t>(0, 90000)) / 7.0;  // above the fusion threshold
  const fx::tensor<double> big = fx::reshape(base * scale, {300, 300});
  const fx::tensor<double> small = {scale, -2 * scale};
  const std::vector<fx::tensor<double>> kept{big, small, fx::tensor<double>::none(), small * 3.0};
  const auto means = opt.average_gradients(kept);
  REQUIRE(means.size() == 4);
  CHECK(means[0].shape() == fx::shape{300, 300});
  const auto got = means[0].to_vector();
  const auto expected_mean = fx::tensor<double>(base * mean_scale).to_vector();
  CHECK(largest_difference(got, expected_mean) < 1e-9);
  CHECK(means[1].to_vector() == std::vector<double>{mean_scale, -2 * mean_scale});
  CHECK(means[2].is_none());
  CHECK(means[3].to_vector() == std::vector<double>{3 * mean_scale, -6 * mean_scale});
  // The caller's list is unchanged: tensors are values.
  CHECK(kept[0].to_vector() == big.to_vector());
  CHECK(kept[1].to_vector() == std::vector<double>{scale, -2 * scale});
  // A list given away whose tensors nothing else holds is averaged in its own buffers.
  std::vector<fx::tensor<double>> given{fx::tensor<double>(big * 1.0), fx::tensor<double>(small * 1.0)};
  const void* storage = given[0].storage_id();
  const auto owned = opt.average_gradients(std::move(given));
  CHECK(owned[0].storage_id() == storage);
  CHECK(owned[0].to_vector() == got);
  CHECK(owned[1].to_vector() == means[1].to_vector());
}

TEST_CASE("data_parallel under fit: shards, the first process's variables, the epoch's logs over every process") {
  const auto& comm = world();
  fx::set_num_threads(1);
  const fx::index_t k = 4;
  const fx::index_t global = k * comm.size();
  const auto [x, y] = examples(global * 6);
  // Every process starts from its own seed: fit gives them all process 0's variables.
  auto net = make_net(20 + static_cast<std::uint64_t>(comm.rank()));
  auto reference = make_net(20);
  fx::optim::sgd sgd{{.learning_rate = 0.2, .momentum = 0.9}};
  fx::optim::sgd reference_sgd{{.learning_rate = 0.2, .momentum = 0.9}};
  fx::distributed::data_parallel opt{comm, sgd};
  fx::metrics::sparse_top_k_categorical_accuracy metric{2};
  fx::metrics::sparse_top_k_categorical_accuracy reference_metric{2};
  const auto all = fx::data::tensors(x, y);
  std::ostringstream log, reference_log;
  // A callback that decides on the (combined) training loss, given the wrapper for the optimizer.
  const fx::reduce_lr_on_plateau_options cut{.factor = 0.5, .patience = 0, .min_delta = 0.02, .monitor = fx::monitor::loss};
  fx::reduce_lr_on_plateau plateau{opt, cut};
  fx::reduce_lr_on_plateau reference_plateau{reference_sgd, cut};
  // Validation on a shard per process, combined, against the whole set.
  const auto history = fx::fit(net, opt, cross_entropy, all.shard(comm.size(), comm.rank()).batch(k, true),
                               {.epochs = 3, .out = &log, .callbacks = {&plateau}, .metrics = {&metric}},
                               all.shard(comm.size(), comm.rank()).batch(5));
  const auto expected = fx::fit(reference, reference_sgd, cross_entropy, all.batch(global, true),
                                {.epochs = 3, .out = &reference_log, .callbacks = {&reference_plateau}, .metrics = {&reference_metric}},
                                all.batch(5));
  REQUIRE(history.val_loss.size() == 3);
  for (int e = 0; e < 3; ++e) {
    CHECK(history.val_loss[e] == doctest::Approx(expected.val_loss[e]).epsilon(1e-12));
    CHECK(history.val_accuracy[e] == doctest::Approx(expected.val_accuracy[e]).epsilon(1e-12));
    const std::string val = "val_" + metric.name();
    CHECK(history.metric(val)[e] == doctest::Approx(expected.metric(val)[e]).epsilon(1e-12));
  }
  CHECK(history.learning_rate == expected.learning_rate);
  CHECK(sgd.learning_rate() == reference_sgd.learning_rate());
  CHECK(sgd.learning_rate() < 0.2);  // the plateau did cut the rate (so the check above compares decisions)
  CHECK(history.steps == 18);
  CHECK(sgd.iterations() == 18);
  check_close_variables(net, reference, 1e-12);
  REQUIRE(history.loss.size() == 3);
  REQUIRE(history.accuracy.size() == 3);
  for (int e = 0; e < 3; ++e) {
    CHECK(history.loss[e] == doctest::Approx(expected.loss[e]).epsilon(1e-12));
    CHECK(history.accuracy[e] == doctest::Approx(expected.accuracy[e]).epsilon(1e-12));
    // The mean of the processes' metrics: here the same as the whole's (equal halves of a mean).
    CHECK(history.metric(metric.name())[e] == doctest::Approx(expected.metric(metric.name())[e]).epsilon(1e-12));
  }
}

TEST_CASE("data_parallel under fit: process 0's optimizer state (steps, rate, Adam's moments) on every process") {
  const auto& comm = world();
  fx::set_num_threads(1);
  const fx::index_t k = 4;
  const fx::index_t global = k * comm.size();
  const auto [x, y] = examples(global * 4);
  // Process 0 alone has trained 3 steps and lowered its rate, as if it alone restored a checkpoint;
  // the others start afresh, from other weights.
  auto net = make_net(30 + static_cast<std::uint64_t>(comm.rank()));
  auto reference = make_net(30);
  fx::optim::adam adam{{.learning_rate = 0.05}};
  fx::optim::adam reference_adam{{.learning_rate = 0.05}};
  const fx::tensor<double> x0 = fx::slice(x, {0, 0}, {6, 4});
  const fx::tensor<std::int32_t> y0 = fx::slice(y, {0}, {6});
  auto pretrain = [&](auto& model, fx::optim::adam& opt) {
    for (int step = 0; step < 3; ++step) {
      fx::gradient_tape tape;
      const fx::tensor<double> loss = cross_entropy(model(x0), y0);
      auto vars = model.trainable_variables();
      opt.apply_gradients(tape.gradient(loss, vars), vars);
    }
    opt.set_learning_rate(0.02);
  };
  if (comm.rank() == 0) pretrain(net, adam);
  pretrain(reference, reference_adam);
  fx::distributed::data_parallel opt{comm, adam};
  std::ostringstream log;
  const auto all = fx::data::tensors(x, y);
  fx::fit(net, opt, cross_entropy, all.shard(comm.size(), comm.rank()).batch(k, true), {.epochs = 1, .out = &log});
  fx::fit(reference, reference_adam, cross_entropy, all.batch(global, true), {.epochs = 1, .out = &log});
  CHECK(adam.iterations() == 7);
  CHECK(adam.learning_rate() == 0.02);
  check_close_variables(net, reference, 1e-12);
  // The moments too.
  const auto vars = net.trainable_variables();
  const auto reference_vars = reference.trainable_variables();
  for (std::size_t i = 0; i < vars.size(); ++i)
    for (const char* slot : {"momentum", "velocity"}) {
      INFO(vars[i]->name() << " " << slot);
      CHECK(largest_difference(adam.get_slot(*vars[i], slot)->peek().to_vector(),
                               reference_adam.get_slot(*reference_vars[i], slot)->peek().to_vector()) < 1e-12);
    }
}

namespace {
/// Stops training on one process only: after step `step` (on_batch_end), or at epoch `epoch`'s end.
struct stop_on_one : fx::callback {
  int process;
  std::int64_t step;
  int epoch;
  int me;
  stop_on_one(int process, std::int64_t step, int epoch, int me) : process(process), step(step), epoch(epoch), me(me) {}
  void on_batch_end(const fx::fit_logs& l) override {
    if (me == process && l.global_step == step) stop_training = true;
  }
  void on_epoch_end(const fx::fit_logs& l) override {
    if (me == process && l.epoch == epoch) stop_training = true;
  }
};
}  // namespace

TEST_CASE("data_parallel under fit: a stop on one process stops every process at the same step") {
  const auto& comm = world();
  fx::set_num_threads(1);
  const auto [x, y] = examples(8 * 4 * comm.size());
  const auto mine = fx::data::tensors(x, y).shard(comm.size(), comm.rank()).batch(4, true);
  std::ostringstream log;
  {
    auto net = make_net(5);
    fx::optim::sgd sgd{0.1};
    fx::distributed::data_parallel opt{comm, sgd};
    stop_on_one stop{comm.size() - 1, /*step=*/3, /*epoch=*/-1, comm.rank()};  // the last process, after step 3
    const auto history = fx::fit(net, opt, cross_entropy, mine, {.epochs = 2, .out = &log, .callbacks = {&stop}});
    CHECK(history.stopped_early);
    CHECK(history.steps == 3);
    CHECK(sgd.iterations() == 3);
  }
  {
    auto net = make_net(5);
    fx::optim::sgd sgd{0.1};
    fx::distributed::data_parallel opt{comm, sgd};
    stop_on_one stop{0, /*step=*/-1, /*epoch=*/0, comm.rank()};  // process 0, at the first epoch's end
    const auto history = fx::fit(net, opt, cross_entropy, mine, {.epochs = 3, .out = &log, .callbacks = {&stop}});
    CHECK(history.stopped_early);
    CHECK(history.loss.size() == 1);
    CHECK(history.steps == 8);
  }
  CHECK(comm.all_reduce(1.0) == comm.size());  // still in step
}

TEST_CASE("data_parallel: processes out of step, or with different gradients, all throw") {
  const auto& comm = world();
  if (comm.size() < 2) return;
  fx::set_num_threads(1);
  auto net = make_net(3);
  fx::optim::sgd sgd{{.learning_rate = 0.1}};
  fx::distributed::data_parallel opt{comm, sgd};
  // Process 0 has three batches, the others two: process 0's third step meets the others' epoch end.
  const auto [x, y] = examples(12);
  const auto mine = fx::data::tensors(x, y).take(comm.rank() == 0 ? 12 : 8).batch(4);
  std::ostringstream log;
  try {
    fx::fit(net, opt, cross_entropy, mine, {.epochs = 1, .out = &log});
    FAIL("fit did not throw");
  } catch (const fx::invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("the processes disagree on what to exchange") != std::string::npos);
    CHECK(what.find("process 0: the gradients of step 3: 4 tensors") != std::string::npos);
    CHECK(what.find("process 1: the logs of epoch 1 (loss, accuracy)") != std::string::npos);
  }
  CHECK(sgd.iterations() == 2);  // process 0's third step was not taken
  // Gradient lists that differ: every process throws before anything changes.
  fx::variable<double> w{fx::zeros<double>({comm.rank() + 1})};
  const fx::tensor<double> g = fx::ones<double>({comm.rank() + 1});
  CHECK_THROWS_AS(opt.apply_gradients({g}, {w}), fx::invalid_argument);
  CHECK(w.peek().to_vector() == std::vector<double>(static_cast<std::size_t>(comm.rank() + 1), 0.0));
  CHECK_THROWS_WITH_AS(opt.apply_gradients(std::vector<fx::tensor<double>>{g, g}, std::vector<fx::variable<double>*>{&w}),
                       "distributed::data_parallel::apply_gradients: 2 gradients for 1 variables", fx::invalid_argument);
  // Still in step.
  CHECK(comm.all_reduce(1.0) == comm.size());
}

TEST_CASE("data_parallel with gradient accumulation: a bad update call leaves every accumulator as it was") {
  const auto& comm = world();
  fx::variable<double> w{fx::tensor<double>{1, 2}, "w"}, b{fx::tensor<double>{3}, "b"};
  fx::optim::sgd sgd{{.learning_rate = 0.1, .gradient_accumulation_steps = 2}};
  fx::distributed::data_parallel opt{comm, sgd};
  const double r = comm.rank() + 1.0;
  opt.apply_gradients({fx::tensor<double>{r, r}, fx::tensor<double>{r}}, {w, b});
  CHECK(opt.gradient_exchanges() == 0);
  // The update call: b's gradient has the wrong shape on every process.
  CHECK_THROWS_AS(opt.apply_gradients({fx::tensor<double>{1, 1}, fx::tensor<double>{1, 1}}, {w, b}), fx::shape_error);
  CHECK(sgd.get_slot(w, "gradient_accumulator")->peek().to_vector() == std::vector<double>{r, r});
  CHECK(sgd.get_slot(b, "gradient_accumulator")->peek().to_vector() == std::vector<double>{r});
  CHECK(w.peek().to_vector() == std::vector<double>{1, 2});
  // A learning rate the schedule makes negative at the update: refused after the sums were
  // exchanged, and the accumulators are put back.
  auto calls = std::make_shared<int>(0);  // the rate each call reads: 0.1, then -1
  fx::optim::sgd scheduled{{.learning_rate = fx::optim::schedule([calls](std::int64_t) { return ++*calls == 1 ? 0.1 : -1.0; }),
                            .gradient_accumulation_steps = 2}};
  fx::distributed::data_parallel opt2{comm, scheduled};
  opt2.apply_gradients({fx::tensor<double>{r, r}, fx::tensor<double>{r}}, {w, b});
  CHECK_THROWS_AS(opt2.apply_gradients({fx::tensor<double>{r, r}, fx::tensor<double>{r}}, {w, b}), fx::invalid_argument);
  CHECK(opt2.gradient_exchanges() == 1);
  CHECK(scheduled.get_slot(w, "gradient_accumulator")->peek().to_vector() == std::vector<double>{r, r});
  CHECK(scheduled.iterations() == 1);
  CHECK(w.peek().to_vector() == std::vector<double>{1, 2});
}
