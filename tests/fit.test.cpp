// fx::fit: training lowers the loss, reports per epoch, calls callbacks in order, stops early, and
// stops cleanly on SIGINT with the previous handler restored; a NaN loss is an error that names the
// step and leaves the variables unchanged, and so does any fluxion error inside a step (its type
// kept); validation data and fx::evaluate.
#include <fluxion/checkpoint.hpp>
#include <fluxion/data.hpp>
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>
#include <fluxion/tensorboard.hpp>

#include <doctest/doctest.h>

#include "scratch_dir.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <sstream>
#include <utility>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
using batch = std::pair<fx::tensor<float>, fx::tensor<std::int32_t>>;

/// Two Gaussian blobs in 4 dimensions, class 0 around -1 and class 1 around +1: separable.
std::vector<batch> blobs(int batches, fx::index_t size, std::uint64_t seed) {
  fx::random::generator gen{seed};
  std::vector<batch> out;
  for (int b = 0; b < batches; ++b) {
    const fx::tensor<std::int32_t> y = fx::random::uniform<std::int32_t>({size}, gen, 0, 2);
    const fx::tensor<float> noise = fx::random::normal<float>({size, 4}, gen, 0.f, 0.5f);
    const fx::tensor<float> centre = fx::reshape(fx::cast<float>(y) * 2.f - 1.f, {size, 1});
    out.emplace_back(fx::tensor<float>(noise + centre), y);
  }
  return out;
}

/// Every variable of `a` holds exactly (bitwise) the values of b's.
template <class A, class B>
void check_same_variables(A& a, B& b) {
  auto vars = a.variables();
  auto reference_vars = b.variables();
  REQUIRE(vars.size() == reference_vars.size());
  for (std::size_t i = 0; i < vars.size(); ++i) {
    INFO(vars[i]->name());
    CHECK(vars[i]->peek().to_vector() == reference_vars[i]->peek().to_vector());
  }
}

/// The optimizer's learning rate at each step's end.
struct rate_recorder : fx::callback {
  fx::optim::optimizer* o;
  std::vector<double> seen;
  explicit rate_recorder(fx::optim::optimizer& opt) : o(&opt) {}
  void on_batch_end(const fx::fit_logs&) override { seen.push_back(o->learning_rate()); }
};

auto cross_entropy = [](const auto& logits, const auto& labels) {
  return fx::losses::sparse_softmax_cross_entropy(logits, labels);
};

struct recorder : fx::callback {
  std::vector<std::string> events;
  void on_train_begin() override { events.push_back("train_begin"); }
  void on_epoch_begin(int e) override { events.push_back("epoch_begin " + std::to_string(e)); }
  void on_batch_end(const fx::fit_logs& l) override { events.push_back("batch " + std::to_string(l.global_step)); }
  void on_epoch_end(const fx::fit_logs& l) override { events.push_back("epoch_end " + std::to_string(l.epoch)); }
  void on_train_end(const fx::fit_logs&) override { events.push_back("train_end"); }
};
}  // namespace

TEST_CASE("fit: the loss falls, one line per epoch off a terminal, accuracy for integer labels") {
  fx::random::generator gen{1};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
  fx::optim::adam opt{0.05};
  const auto data = blobs(8, 16, 2);
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, data, {.epochs = 3, .out = &log});
  REQUIRE(history.loss.size() == 3);
  CHECK(history.loss[2] < history.loss[0]);
  REQUIRE(history.accuracy.size() == 3);
  CHECK(history.accuracy[2] > 0.9);
  CHECK(history.steps == 24);
  CHECK(opt.iterations() == 24);
  const std::string text = log.str();
  CHECK(text.find("epoch 1/3: 8 steps") != std::string::npos);
  CHECK(text.find("epoch 3/3: 8 steps") != std::string::npos);
  CHECK(text.find("accuracy: ") != std::string::npos);
  CHECK(text.find("samples/s") != std::string::npos);
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
}

TEST_CASE("fit: callbacks in order, steps_per_epoch, early stopping") {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.0};  // a learning rate of 0: the loss never improves
  const auto data = blobs(5, 8, 4);
  recorder rec;
  fx::early_stopping stop{{.patience = 1}};
  std::ostringstream log;
  const auto history =
      fx::fit(net, opt, cross_entropy, data, {.epochs = 10, .steps_per_epoch = 2, .verbose = 0, .out = &log, .callbacks = {&rec, &stop}});
  CHECK(history.stopped_early);
  // Keras's count: epoch 0 sets the best, and epoch 1, the first without improvement, uses up a
  // patience of 1 (until stop 56 fluxion trained one epoch more).
  CHECK(stop.stopped_epoch() == 1);
  CHECK(history.loss.size() == 2);
  CHECK(log.str().empty());
  const std::vector<std::string> want = {"train_begin", "epoch_begin 0", "batch 1", "batch 2", "epoch_end 0",
                                         "epoch_begin 1", "batch 3", "batch 4", "epoch_end 1", "train_end"};
  CHECK(rec.events == want);
}

TEST_CASE("early_stopping: Keras's EarlyStopping on a given sequence of losses") {
  // Keras 3's on_epoch_end (min mode): wait += 1 unless the loss beats the best by more than
  // min_delta (then wait = 0); stop once wait >= patience. Patience 0 stops at the first epoch
  // without improvement.
  auto stopped_at = [](int patience, double min_delta, const std::vector<double>& losses) {
    fx::early_stopping stop{{.patience = patience, .min_delta = min_delta}};
    stop.on_train_begin();
    for (std::size_t e = 0; e < losses.size() && !stop.stop_training; ++e) {
      fx::fit_logs logs;
      logs.epoch = static_cast<int>(e);
      logs.loss = losses[e];
      stop.on_epoch_end(logs);
    }
    return stop.stopped_epoch();
  };
  const std::vector<double> losses{1.0, 0.9, 0.95, 0.85, 0.86, 0.87, 0.849, 0.8};
  CHECK(stopped_at(0, 0, losses) == 2);
  CHECK(stopped_at(1, 0, losses) == 2);
  CHECK(stopped_at(2, 0, losses) == 5);
  CHECK(stopped_at(3, 0, losses) == -1);  // 0.849 at epoch 6 improves on 0.85
  CHECK(stopped_at(3, 0.01, losses) == 6);  // ... but not by more than 0.01
}

TEST_CASE("early_stopping: Keras 3's accuracy mode, baseline and start_from_epoch on given sequences") {
  // Expected (stopped epoch, best epoch) from Keras 3's EarlyStopping.on_epoch_end transcribed to
  // Python and run on the same sequences.
  auto run = [](fx::early_stopping::options o, const std::vector<double>& values) {
    fx::early_stopping stop{o};
    stop.on_train_begin();
    for (std::size_t e = 0; e < values.size() && !stop.stop_training; ++e) {
      fx::fit_logs logs;
      logs.epoch = static_cast<int>(e);
      logs.loss = 100;  // not watched with validation data
      logs.accuracy = 0.01;
      logs.has_validation = true;
      logs.val_loss = values[e];
      logs.val_accuracy = values[e];
      stop.on_epoch_end(logs);
    }
    return std::pair{stop.stopped_epoch(), stop.best_epoch()};
  };
  using p = std::pair<int, int>;
  const auto acc = fx::monitor::val_accuracy;
  const std::vector<double> accuracies{0.5, 0.6, 0.58, 0.65, 0.651, 0.64, 0.66, 0.7};
  CHECK(run({.patience = 0, .monitor = acc}, accuracies) == p{2, 1});
  CHECK(run({.patience = 2, .min_delta = 0.005, .monitor = acc}, accuracies) == p{5, 3});  // 0.651 is not 0.005 better
  CHECK(run({.patience = 2, .monitor = acc}, accuracies) == p{-1, 7});
  // A baseline not yet beaten: improvements do not restart the wait, and the first epoch without
  // one stops it.
  const std::vector<double> losses{1.0, 0.95, 0.9, 0.92, 0.85};
  CHECK(run({.patience = 2}, losses) == p{-1, 4});
  CHECK(run({.patience = 2, .baseline = 0.5}, losses) == p{3, 2});
  CHECK(run({.patience = 2, .baseline = 0.93}, losses) == p{-1, 4});
  CHECK(run({.patience = 2, .monitor = acc, .baseline = 0.9}, {0.5, 0.55, 0.6, 0.58, 0.65}) == p{3, 2});
  CHECK(run({.patience = 2, .monitor = acc}, {0.5, 0.55, 0.6, 0.58, 0.65}) == p{-1, 4});
  // Epochs before start_from_epoch are not watched.
  const std::vector<double> bumpy{1.0, 0.9, 0.95, 0.85, 0.86, 0.87, 0.849, 0.8};
  CHECK(run({.patience = 0}, bumpy) == p{2, 1});
  CHECK(run({.patience = 0, .start_from_epoch = 3}, bumpy) == p{4, 3});
  CHECK(run({.patience = 0, .start_from_epoch = 5}, bumpy) == p{-1, 7});
  {
    fx::early_stopping stop{{.monitor = acc}};
    stop.on_train_begin();
    CHECK(stop.best() == -std::numeric_limits<double>::infinity());
  }
  // The best is reported in the monitored quantity's units.
  fx::early_stopping on_accuracy{{.patience = 5, .monitor = fx::monitor::accuracy}};
  on_accuracy.on_train_begin();
  fx::fit_logs logs;
  logs.accuracy = 0.75;
  on_accuracy.on_epoch_end(logs);
  CHECK(on_accuracy.best() == 0.75);
  // What is wrong is named.
  logs.accuracy = -1;  // fit computed none: a regression
  CHECK_THROWS_WITH_AS(on_accuracy.on_epoch_end(logs),
                       doctest::Contains("early_stopping: monitor = accuracy, but fit computed no accuracy"),
                       fx::invalid_argument);
  fx::early_stopping on_val{{.monitor = acc}};
  CHECK_THROWS_WITH_AS(on_val.on_epoch_end(logs),
                       "early_stopping: monitor = val_accuracy, but fit was given no validation data (pass it as "
                       "fit's last argument, or monitor the training accuracy)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::early_stopping({.restore_best_weights = true}),
                       "early_stopping: restore_best_weights needs the model whose weights it restores: "
                       "fx::early_stopping stop{net, {.restore_best_weights = true}}",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::early_stopping({.start_from_epoch = -1}), "early_stopping: start_from_epoch = -1 is negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::early_stopping({.baseline = std::numeric_limits<double>::quiet_NaN()}),
                       "early_stopping: baseline = nan must be finite", fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::early_stopping({.min_delta = -0.1}), doctest::Contains("early_stopping: min_delta = -0.1"),
                       fx::invalid_argument);
}

TEST_CASE("early_stopping: restore_best_weights gives the model its best epoch's variables when fit ends") {
  fx::random::generator gen{51};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
  // By hand: each epoch gives every variable a value of its own, then reports a loss.
  fx::early_stopping stop{net, {.patience = 1, .restore_best_weights = true}};
  std::ostringstream said;
  fx::early_stopping verbose{net, {.patience = 1, .restore_best_weights = true, .out = &said}};
  auto fill = [&](float x) {
    for (auto* v : net.variables()) v->assign(fx::full<float>(v->shape(), x));
  };
  const std::vector<double> losses{1.0, 0.5, 0.7, 0.6};  // best: epoch 1; stops after epoch 2
  for (fx::early_stopping* s : {&stop, &verbose}) {
    s->on_train_begin();
    for (std::size_t e = 0; e < losses.size() && !s->stop_training; ++e) {
      fill(static_cast<float>(e) + 10);
      fx::fit_logs logs;
      logs.epoch = static_cast<int>(e);
      logs.loss = losses[e];
      s->on_epoch_end(logs);
    }
    CHECK(s->stopped_epoch() == 2);
    CHECK(s->best_epoch() == 1);
    s->on_train_end(fx::fit_logs{});
    for (auto* v : net.variables()) CHECK(v->peek().to_vector() == std::vector<float>(v->size(), 11.f));
  }
  CHECK(said.str() == "epoch 3: early_stopping stopped training\n"
                      "early_stopping: restoring the model's weights from the end of the best epoch, 2\n");
  // Without it, the model keeps its last values.
  fx::early_stopping keep{net, {.patience = 1}};
  keep.on_train_begin();
  for (std::size_t e = 0; e < losses.size() && !keep.stop_training; ++e) {
    fill(static_cast<float>(e) + 10);
    fx::fit_logs logs;
    logs.epoch = static_cast<int>(e);
    logs.loss = losses[e];
    keep.on_epoch_end(logs);
  }
  keep.on_train_end(fx::fit_logs{});
  CHECK(net.variables()[0]->peek().to_vector()[0] == 12.f);

  // Through fit: the variables at the end equal those a callback saw at the end of the best epoch
  // (the optimizer updates buffers in place only where no one else holds them).
  fx::random::generator init{52};
  auto model = nn::sequential(init, nn::input<4>{}, nn::dense<16>{}, nn::relu{}, nn::dense<2>{});
  struct recorder : fx::callback {
    decltype(model)* m;
    std::vector<std::vector<std::vector<float>>> at_end;
    explicit recorder(decltype(model)& net) : m(&net) {}
    void on_epoch_end(const fx::fit_logs&) override {
      std::vector<std::vector<float>> values;
      for (auto* v : m->variables()) values.push_back(v->peek().to_vector());
      at_end.push_back(values);
    }
  } record{model};
  // Validation labels flipped: the better the model learns, the worse its validation loss, so the
  // best epoch is the first and the last is not.
  auto flipped = blobs(2, 8, 54);
  for (auto& [x, y] : flipped) y = fx::tensor<std::int32_t>(std::int32_t{1} - y);
  fx::optim::sgd opt{0.5};
  fx::early_stopping best{model, {.patience = 2, .restore_best_weights = true}};
  const auto history = fx::fit(model, opt, cross_entropy, blobs(4, 8, 53),
                               {.epochs = 12, .verbose = 0, .callbacks = {&record, &best}}, flipped);
  CHECK(best.best_epoch() == 0);
  CHECK(best.stopped_epoch() == 2);
  REQUIRE(history.val_loss.size() == 3);
  CHECK(history.val_loss[2] > history.val_loss[0]);
  CHECK(best.best() == *std::min_element(history.val_loss.begin(), history.val_loss.end()));
  const auto& want = record.at_end[static_cast<std::size_t>(best.best_epoch())];
  auto vars = model.variables();
  for (std::size_t i = 0; i < vars.size(); ++i) CHECK(vars[i]->peek().to_vector() == want[i]);
  CHECK(record.at_end[2][0] != want[0]);  // training moved them after the best epoch
}

TEST_CASE("reduce_lr_on_plateau: Keras's ReduceLROnPlateau, by hand and inside fit") {
  const std::vector<double> losses{1.0, 0.9, 0.9, 0.95, 0.9, 0.9, 0.9, 0.8, 0.8, 0.8, 0.8, 0.8, 0.79995, 0.8, 0.8, 0.8};
  auto trace = [&](fx::reduce_lr_on_plateau::options o, bool validation) {
    fx::optim::sgd opt{0.1};
    fx::reduce_lr_on_plateau plateau{opt, o};
    plateau.on_train_begin();
    std::vector<double> lrs;
    for (std::size_t e = 0; e < losses.size(); ++e) {
      fx::fit_logs logs;
      logs.epoch = static_cast<int>(e);
      logs.loss = validation ? 5.0 : losses[e];  // with validation data the training loss is not watched
      logs.has_validation = validation;
      logs.val_loss = losses[e];
      logs.val_accuracy = 1 - losses[e];  // watched with .monitor = val_accuracy: the same plateaus upward
      plateau.on_epoch_end(logs);
      lrs.push_back(opt.learning_rate());
    }
    return std::pair{lrs, plateau.reductions()};
  };
  // Expected: Keras 3's on_epoch_end run on the same losses (mode min). With patience 2 and
  // cooldown 1: reductions after epochs 3 and 5 (the wait restarts after each, and the cooldown
  // epoch counts no wait), and at 9 to min_lr, below which nothing goes; 0.79995 is not an
  // improvement of more than min_delta 1e-4.
  const std::vector<double> want{0.1, 0.1, 0.1, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 0.02};
  for (bool validation : {false, true}) {
    CAPTURE(validation);
    const auto [lrs, reductions] = trace({.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = 0.02}, validation);
    REQUIRE(lrs.size() == want.size());
    for (std::size_t e = 0; e < want.size(); ++e) CHECK(lrs[e] == doctest::Approx(want[e]).epsilon(1e-15));
    CHECK(reductions == 3);
  }
  {  // Keras's mode "max" on val_accuracy: the same reductions.
    const auto [lrs, reductions] =
        trace({.factor = 0.5, .patience = 2, .cooldown = 1, .min_lr = 0.02, .monitor = fx::monitor::val_accuracy}, true);
    for (std::size_t e = 0; e < want.size(); ++e) CHECK(lrs[e] == doctest::Approx(want[e]).epsilon(1e-15));
    CHECK(reductions == 3);
  }
  // Patience 1, no cooldown, no floor: a reduction at every epoch without improvement.
  const auto [lrs, reductions] = trace({.patience = 1, .min_delta = 0}, false);
  CHECK(reductions == 12);
  CHECK(lrs[1] == doctest::Approx(0.1));
  CHECK(lrs[2] == doctest::Approx(0.01));
  CHECK(lrs[7] == doctest::Approx(1e-6));  // epoch 7 improves
  CHECK(lrs[15] == doctest::Approx(1e-13));

  // Inside fit: a learning rate too small to move the loss by min_delta is halved each epoch.
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{1e-9};
  std::ostringstream said;
  fx::reduce_lr_on_plateau plateau{opt, {.factor = 0.5, .patience = 1, .min_delta = 1e-3, .out = &said}};
  CHECK_FALSE(plateau.reads_batch_metrics(fx::fit_logs{}));
  const auto history = fx::fit(net, opt, cross_entropy, blobs(2, 8, 4), {.epochs = 3, .verbose = 0, .callbacks = {&plateau}});
  CHECK(plateau.reductions() == 2);
  // The history's rate is the one each epoch trained with, before its callbacks reduced it (Keras's
  // logs["learning_rate"]).
  REQUIRE(history.learning_rate.size() == 3);
  CHECK(history.learning_rate[0] == 1e-9);
  CHECK(history.learning_rate[1] == 1e-9);
  CHECK(history.learning_rate[2] == doctest::Approx(5e-10).epsilon(1e-12));
  CHECK(opt.learning_rate() == doctest::Approx(2.5e-10).epsilon(1e-12));
  CHECK(said.str() == "epoch 2: reduce_lr_on_plateau reducing the learning rate to 5e-10\n"
                      "epoch 3: reduce_lr_on_plateau reducing the learning rate to 2.5e-10\n");

  // Bad options, and an optimizer whose schedule sets the rate, are refused with the reason.
  CHECK_THROWS_WITH_AS((fx::reduce_lr_on_plateau{opt, {.factor = 1.0}}),
                       "reduce_lr_on_plateau: factor = 1 must be in (0, 1): it multiplies the learning rate to reduce it",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((fx::reduce_lr_on_plateau{opt, {.patience = -1}}), "reduce_lr_on_plateau: patience = -1 is negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS((fx::reduce_lr_on_plateau{opt, {.min_lr = -1}}),
                       "reduce_lr_on_plateau: min_lr = -1 must be finite and non-negative", fx::invalid_argument);
  fx::optim::sgd scheduled{fx::optim::exponential_decay(0.1, 10, 0.5)};
  fx::reduce_lr_on_plateau on_schedule{scheduled};
  CHECK_THROWS_WITH_AS(fx::fit(net, scheduled, cross_entropy, blobs(2, 8, 4), {.epochs = 2, .verbose = 0, .callbacks = {&on_schedule}}),
                       doctest::Contains("reduce_lr_on_plateau: the sgd optimizer's learning rate is a schedule"),
                       fx::invalid_argument);
  CHECK(scheduled.iterations() == 0);
}

TEST_CASE("fit: validation data after each epoch, and fx::evaluate") {
  fx::random::generator gen{5};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
  fx::optim::adam opt{0.05};
  const auto train = blobs(8, 16, 6);
  auto test = blobs(3, 10, 7);
  test.push_back(blobs(1, 3, 8)[0]);  // a smaller last batch: 33 examples in 4 batches

  // evaluate: the mean over examples, against one batch of every example (the same model).
  const fx::evaluation before = fx::evaluate(net, cross_entropy, test);
  CHECK(before.steps == 4);
  CHECK(before.samples == 33);
  std::vector<fx::tensor<float>> xs;
  std::vector<fx::tensor<std::int32_t>> ys;
  for (const auto& [x, y] : test) {
    xs.push_back(x);
    ys.push_back(y);
  }
  const fx::tensor<float> all_x = fx::concat(xs, 0);
  const fx::tensor<std::int32_t> all_y = fx::concat(ys, 0);
  const fx::tensor<float> all_logits = net(all_x);
  const double whole = fx::tensor<float>(fx::losses::sparse_softmax_cross_entropy(all_logits, all_y)).item();
  CHECK(before.loss == doctest::Approx(whole).epsilon(1e-5));
  fx::metrics::sparse_categorical_accuracy all_accuracy;
  all_accuracy.update(all_y, all_logits);
  CHECK(before.accuracy == all_accuracy.result());
  {  // no tape records an evaluation
    fx::gradient_tape tape;
    fx::evaluate(net, cross_entropy, test);
    CHECK(tape.entries() == 0);
  }

  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, train, {.epochs = 3, .out = &log}, test);
  REQUIRE(history.val_loss.size() == 3);
  REQUIRE(history.val_accuracy.size() == 3);
  CHECK(history.val_loss[2] < before.loss);
  CHECK(history.val_accuracy[2] > 0.9);
  const fx::evaluation after = fx::evaluate(net, cross_entropy, test);
  CHECK(after.loss == history.val_loss[2]);  // the same model on the same batches
  CHECK(after.accuracy == history.val_accuracy[2]);
  const std::string text = log.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 3);
  for (const char* line : {"epoch 1/3: ", "epoch 3/3: "}) {
    const std::string l = text.substr(text.find(line), text.find('\n', text.find(line)) - text.find(line));
    CAPTURE(l);
    CHECK(l.find(" - val_loss: ") != std::string::npos);
    CHECK(l.find(" - val_accuracy: ") != std::string::npos);
  }
}

TEST_CASE("fit: early stopping watches val_loss when there is validation data") {
  fx::random::generator gen{9};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.0};  // the validation loss never improves
  const auto train = blobs(2, 8, 10), test = blobs(2, 8, 11);
  fx::early_stopping stop{{.patience = 1}};
  std::ostringstream log;
  auto history = fx::fit(net, opt, cross_entropy, train, {.epochs = 10, .verbose = 0, .out = &log, .callbacks = {&stop}}, test);
  CHECK(history.stopped_early);
  CHECK(stop.stopped_epoch() == 1);
  CHECK(history.val_loss.size() == 2);
  CHECK(history.val_loss[0] == history.val_loss[1]);
  // The training loss is a mean over examples too: with a learning rate of 0 and a smaller last
  // batch, an epoch's loss is evaluate's over the same batches.
  auto uneven = blobs(2, 8, 15);
  uneven.push_back(blobs(1, 3, 16)[0]);
  const auto once = fx::fit(net, opt, cross_entropy, uneven, {.epochs = 1, .verbose = 0});
  CHECK(once.loss[0] == doctest::Approx(fx::evaluate(net, cross_entropy, uneven).loss).epsilon(1e-12));
  // val_loss without validation data is an error, not a silent watch of nothing.
  fx::early_stopping on_val{{.patience = 1, .monitor = fx::monitor::val_loss}};
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, train, {.epochs = 2, .verbose = 0, .callbacks = {&on_val}}),
                       doctest::Contains("early_stopping: monitor = val_loss, but fit was given no validation data"),
                       fx::invalid_argument);
}

TEST_CASE("fit: a NaN in the validation data names the epoch and the batch; an empty validation set") {
  fx::random::generator gen{12};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  const auto train = blobs(2, 8, 13);
  auto test = blobs(3, 4, 14);
  std::vector<float> bad = test[1].first.to_vector();
  bad[5] = std::nanf("");
  test[1].first = fx::from_vector(bad, test[1].first.shape());
  try {
    fx::fit(net, opt, cross_entropy, train, {.epochs = 2, .verbose = 0}, test);
    FAIL("no exception");
  } catch (const fx::numeric_error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.find("fit: validation after epoch 1: evaluate: the loss is nan at batch 2") == 0);
    CHECK(m.find("sparse_softmax_cross_entropy: the loss is nan; logits[1, ") != std::string::npos);
  }
  CHECK(opt.iterations() == 2);  // epoch 1 trained; the error came before epoch 2
  CHECK_THROWS_WITH_AS(fx::evaluate(net, cross_entropy, std::vector<batch>{}),
                       "evaluate: the dataset gave no batch", fx::invalid_argument);
}

namespace {
/// Batches whose reader fails on the way to the third: ++ throws an io_error, as a corrupt record does.
struct failing_reader {
  std::vector<batch> data;
  struct iterator {
    const std::vector<batch>* d;
    std::size_t i;
    const batch& operator*() const { return (*d)[i]; }
    iterator& operator++() {
      if (++i == 2) throw fx::io_error("reader: 'x.bin': record 3 is truncated");
      return *this;
    }
    bool operator==(const iterator& o) const { return i == o.i; }
  };
  iterator begin() const { return {&data, 0}; }
  iterator end() const { return {&data, data.size()}; }
};
}  // namespace

TEST_CASE("fit and evaluate: an error inside a step names the step, keeps its type, and leaves the variables unchanged") {
  fx::random::generator gen{21};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  std::ostringstream log;
  const auto values = [&] {
    std::vector<std::vector<float>> v;
    for (auto* var : net.trainable_variables()) v.push_back(var->value().to_vector());
    return v;
  };
  // A label out of range in the first batch: nothing changes.
  auto first_bad = blobs(2, 4, 26);
  first_bad[0].second = fx::tensor<std::int32_t>{0, -1, 1, 0};
  const auto before = values();
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, first_bad, {.epochs = 1, .out = &log}),
                       "fit: epoch 1, step 1 (global step 1): sparse_softmax_cross_entropy: labels[1] = -1 is not in [0, 2)",
                       fx::out_of_range);
  CHECK(opt.iterations() == 0);
  CHECK(values() == before);
  // A label out of range in the second batch: the loss's own message, after the step.
  auto data = blobs(3, 4, 22);
  data[1].second = fx::tensor<std::int32_t>{0, 1, 7, 0};
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log}),
                       "fit: epoch 1, step 2 (global step 2): sparse_softmax_cross_entropy: labels[2] = 7 is not in [0, 2)",
                       fx::out_of_range);
  CHECK(opt.iterations() == 1);
  // An input of the wrong shape in the third batch (the global step counts the optimizer's steps).
  auto shapes = blobs(3, 4, 23);
  shapes[2].first = fx::zeros<float>({4, 5});
  try {
    fx::fit(net, opt, cross_entropy, shapes, {.epochs = 2, .out = &log});
    FAIL("no exception");
  } catch (const fx::shape_error& e) {
    const std::string m = e.what();
    CAPTURE(m);
    CHECK(m.find("fit: epoch 1, step 3 (global step 4): sequential: 'sequential' expects input of shape (batch, 4), got (4, 5)") == 0);
  }
  CHECK(opt.iterations() == 3);
  // A reader that fails on the way to the third batch: an io_error still, naming the step it was reading.
  const auto before_reader = values();
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, failing_reader{blobs(4, 4, 24)}, {.epochs = 1, .out = &log}),
                       "fit: epoch 1, step 3 (global step 6): reader: 'x.bin': record 3 is truncated", fx::io_error);
  CHECK(opt.iterations() == 5);
  CHECK(values() != before_reader);
  // evaluate names the batch the same way.
  CHECK_THROWS_WITH_AS(fx::evaluate(net, cross_entropy, data),
                       "evaluate: batch 2: sparse_softmax_cross_entropy: labels[2] = 7 is not in [0, 2)", fx::out_of_range);
  CHECK_THROWS_WITH_AS(fx::evaluate(net, cross_entropy, failing_reader{blobs(4, 4, 25)}),
                       "evaluate: batch 3: reader: 'x.bin': record 3 is truncated", fx::io_error);
}

TEST_CASE("fit: SIGINT stops after the current step, and the previous handler comes back") {
  static std::atomic<int> outer_calls{0};
  auto previous = std::signal(SIGINT, [](int) { ++outer_calls; });
  fx::random::generator gen{5};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  const auto data = blobs(6, 8, 6);
  struct interrupter : fx::callback {
    void on_batch_end(const fx::fit_logs& l) override {
      if (l.global_step == 3) std::raise(SIGINT);
    }
  } ctrl_c;
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, data, {.epochs = 4, .out = &log, .callbacks = {&ctrl_c}});
  CHECK(history.interrupted);
  CHECK(history.steps == 3);
  CHECK(log.str().find("interrupted (SIGINT) at global step 3") != std::string::npos);
  CHECK(outer_calls == 0);  // fit's handler took it
  std::raise(SIGINT);       // the test's own handler is back
  CHECK(outer_calls == 1);
  std::signal(SIGINT, previous);
}

TEST_CASE("fit: a NaN loss names the step and leaves the variables unchanged; bad options") {
  fx::random::generator gen{7};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  auto data = blobs(3, 4, 8);
  data[1].first = fx::tensor<float>(data[1].first * std::numeric_limits<float>::quiet_NaN());
  std::ostringstream log;
  std::vector<float> before;
  CHECK_THROWS_WITH_AS(
      [&] {
        fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log, .callbacks = {}});
      }(),
      doctest::Contains("fit: the loss is nan at epoch 1, step 2"), fx::error);
  CHECK(opt.iterations() == 1);  // the first step only
  // The loss names the input element; fit adds the step.
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, data, {.epochs = 1, .out = &log, .callbacks = {}}),
                       doctest::Contains("the variables were not updated with this step's gradients "
                                         "(sparse_softmax_cross_entropy: the loss is nan; logits[0, 0] = nan)"),
                       fx::numeric_error);
  CHECK(opt.iterations() == 2);
  // A loss of the user's own that is not finite is caught by fit itself.
  auto own = [](const auto& logits, const auto&) { return fx::tensor<float>(fx::reduce_sum(logits) * 0.f + std::log(0.f)); };
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, own, data, {.epochs = 1, .out = &log, .callbacks = {}}),
                       doctest::Contains("fit: the loss is -inf at epoch 1, step 1"), fx::numeric_error);
  CHECK(opt.iterations() == 2);
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, data, {.epochs = -1}), "fit: epochs = -1 is negative",
                       fx::invalid_argument);
  CHECK_THROWS_AS(fx::fit(net, opt, cross_entropy, std::vector<batch>{}, {.epochs = 1, .out = &log}), fx::invalid_argument);
}

TEST_CASE("fit: the progress line of a terminal") {
  fx::fit_logs l;
  l.step = 10;
  l.loss = 0.5;
  l.accuracy = 0.75;
  l.seconds = 2;
  l.samples_per_second = 320;
  const std::string line = fx::detail::progress_line(l, 40);
  CHECK(line.find("10/40 [=====>") == 0);
  CHECK(line.find("loss: 0.5000 - accuracy: 0.7500 - 320 samples/s - ETA: 6.0s") != std::string::npos);
  // Times: milliseconds under a second, tenths under ten seconds, then seconds, minutes, hours.
  CHECK(fx::detail::format_seconds(0.045) == "45ms");
  CHECK(fx::detail::format_seconds(0.0) == "0ms");
  CHECK(fx::detail::format_seconds(0.9999) == "1.0s");
  CHECK(fx::detail::format_seconds(4.52) == "4.5s");
  CHECK(fx::detail::format_seconds(12.4) == "12s");
  CHECK(fx::detail::format_seconds(185) == "3m05s");
  CHECK(fx::detail::format_seconds(3720) == "1h02m");
}

TEST_CASE("fit: the TensorBoard callback writes loss and accuracy every N steps, and the epoch's validation") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fluxion_fit_tb_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    fx::random::generator gen{9};
    auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
    fx::optim::adam opt{0.01};
    fx::summary_writer writer{dir.string()};
    fx::tensorboard_callback tb{writer, 2, &opt};
    std::ostringstream log;
    fx::metrics::sparse_top_k_categorical_accuracy top{1, "top1"};
    fx::fit(net, opt, cross_entropy, blobs(4, 8, 10), {.epochs = 1, .out = &log, .callbacks = {&tb}, .metrics = {&top}},
            blobs(2, 8, 11));
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  REQUIRE(files.size() == 1);
  fx::io::tfrecord_reader reader{files[0].string()};
  int records = 0;
  std::string all;
  while (auto record = reader.next()) {
    ++records;
    all += *record;
  }
  // The file version, then steps 2 and 4: loss, accuracy, learning rate and the metric each; then
  // the epoch's seven (with the validation loss and accuracy, and the metric's two).
  CHECK(records == 1 + 2 * 4 + 7);
  for (const char* tag : {"loss", "accuracy", "learning_rate", "epoch_loss", "samples_per_second", "epoch_val_loss",
                          "epoch_val_accuracy", "top1", "epoch_top1", "epoch_val_top1"})
    CHECK(all.find(tag) != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("fit: the checkpoint callback saves every N steps, each epoch, and when Ctrl-C stops training") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fluxion_fit_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fx::random::generator gen{11};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::adam opt{0.01};
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
  fx::checkpoint_manager manager{ckpt, dir.string(), {.max_to_keep = 0}};
  fx::checkpoint_callback saver{manager, 3};
  struct interrupter : fx::callback {
    void on_batch_end(const fx::fit_logs& l) override {
      if (l.global_step == 7) std::raise(SIGINT);
    }
  } ctrl_c;
  std::ostringstream log;
  const auto history = fx::fit(net, opt, cross_entropy, blobs(4, 8, 12), {.epochs = 3, .out = &log, .callbacks = {&saver, &ctrl_c}});
  CHECK(history.interrupted);
  std::vector<std::int64_t> steps;
  for (const auto& [step, path] : manager.checkpoints()) steps.push_back(step);
  CHECK(steps == std::vector<std::int64_t>{3, 4, 6, 7});  // every 3 steps, the first epoch's end, Ctrl-C
  // The last checkpoint restores the state fit stopped in.
  const auto kernel = net.layer<0>().kernel().peek().to_vector();
  net.layer<0>().kernel().assign(fx::zeros<float>({4, 2}));
  opt.set_iterations(0);
  manager.restore_latest();
  CHECK(net.layer<0>().kernel().peek().to_vector() == kernel);
  CHECK(opt.iterations() == 7);
  fs::remove_all(dir);
}

TEST_CASE("fit: the best checkpoint keeps the epoch with the lowest validation loss, and restores it") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fluxion_fit_best_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = (dir / "best.safetensors").string();
  fx::random::generator gen{17};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  net(fx::zeros<float>({1, 4}));
  fx::checkpoint ckpt{{"model", net}};
  auto& kernel = net.layer<0>().kernel();
  {  // The callback alone, on epochs whose validation loss is 1.0, 0.5, 0.7, 0.6: epoch 1 is kept.
    fx::best_checkpoint_callback best{ckpt, path};
    best.on_train_begin();
    const std::vector<double> val = {1.0, 0.5, 0.7, 0.6};
    for (int epoch = 0; epoch < 4; ++epoch) {
      kernel.assign(fx::full<float>({4, 2}, static_cast<float>(epoch)));  // the model as each epoch left it
      fx::fit_logs logs;
      logs.epoch = epoch;
      logs.loss = 2.0 - epoch;  // the training loss keeps falling; the validation loss decides
      logs.has_validation = true;
      logs.val_loss = val[static_cast<std::size_t>(epoch)];
      best.on_epoch_end(logs);
    }
    CHECK(best.best_epoch() == 1);
    CHECK(best.best() == 0.5);
    ckpt.restore(best.path());
    CHECK(kernel.peek().to_vector() == std::vector<float>(8, 1.f));
    // Watching the training loss instead keeps the last epoch.
    fx::best_checkpoint_callback on_loss{ckpt, path, {.monitor = fx::monitor::loss}};
    on_loss.on_train_begin();
    for (int epoch = 0; epoch < 4; ++epoch) {
      fx::fit_logs logs;
      logs.epoch = epoch;
      logs.loss = 2.0 - epoch;
      logs.has_validation = true;
      logs.val_loss = val[static_cast<std::size_t>(epoch)];
      on_loss.on_epoch_end(logs);
    }
    CHECK(on_loss.best_epoch() == 3);
    // Keras's monitor="val_accuracy": the highest wins, and best() is that accuracy.
    fx::best_checkpoint_callback on_accuracy{ckpt, path, {.monitor = fx::monitor::val_accuracy}};
    on_accuracy.on_train_begin();
    CHECK(on_accuracy.best() == -std::numeric_limits<double>::infinity());
    const std::vector<double> accuracies{0.6, 0.8, 0.7, 0.8};
    for (int epoch = 0; epoch < 4; ++epoch) {
      fx::fit_logs logs;
      logs.epoch = epoch;
      logs.has_validation = true;
      logs.val_accuracy = accuracies[static_cast<std::size_t>(epoch)];
      on_accuracy.on_epoch_end(logs);
    }
    CHECK(on_accuracy.best_epoch() == 1);
    CHECK(on_accuracy.best() == 0.8);
  }
  // In fit, with validation data: the file holds the best epoch's model.
  fx::optim::adam opt{0.05};
  fx::best_checkpoint_callback best{ckpt, path};
  std::vector<std::vector<float>> kernels;
  struct keep : fx::callback {
    std::vector<std::vector<float>>* out;
    fx::variable<float>* v;
    void on_epoch_end(const fx::fit_logs&) override { out->push_back(v->peek().to_vector()); }
  } keeper;
  keeper.out = &kernels;
  keeper.v = &kernel;
  const auto history = fx::fit(net, opt, cross_entropy, blobs(4, 8, 18), {.epochs = 4, .verbose = 0, .callbacks = {&keeper, &best}},
                               blobs(2, 8, 19));
  const auto lowest = std::min_element(history.val_loss.begin(), history.val_loss.end()) - history.val_loss.begin();
  CHECK(best.best_epoch() == lowest);
  ckpt.restore(best.path());
  CHECK(kernel.peek().to_vector() == kernels[static_cast<std::size_t>(lowest)]);
  CHECK_THROWS_WITH_AS(fx::best_checkpoint_callback(ckpt, ""), "best_checkpoint_callback: the path is empty",
                       fx::invalid_argument);
  fs::remove_all(dir);
}

TEST_CASE("fit: resume continues the interrupted run bit for bit: same step, data order, optimizer and dropout state") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fluxion_fit_resume_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  // 40 samples shuffled and batched by 8: 5 steps an epoch, a new order each epoch (pass).
  fx::tensor<float> xs = fx::zeros<float>({0, 4});
  fx::tensor<std::int32_t> ys = fx::zeros<std::int32_t>({0});
  {
    std::vector<float> xv;
    std::vector<std::int32_t> yv;
    for (const auto& [x, y] : blobs(5, 8, 21)) {
      const auto a = x.to_vector();
      const auto b = y.to_vector();
      xv.insert(xv.end(), a.begin(), a.end());
      yv.insert(yv.end(), b.begin(), b.end());
    }
    xs = fx::from_vector(xv, {40, 4});
    ys = fx::from_vector(yv, {40});
  }
  const auto data = fx::data::tensors(xs, ys).shuffle(40, 5).batch(8).prefetch(2);
  auto make = [](std::uint64_t seed) {
    fx::random::generator gen{seed};
    return nn::sequential(gen, nn::input<4>{}, nn::dense<16>{}, nn::relu{}, nn::dropout{0.25, 3}, nn::dense<2>{});
  };
  std::ostringstream log;

  // The reference: 3 epochs without a stop.
  auto reference = make(1);
  fx::optim::adam reference_opt{0.01};
  fx::fit(reference, reference_opt, cross_entropy, data, {.epochs = 3, .out = &log});
  CHECK(reference_opt.iterations() == 15);

  // The same run stopped by Ctrl-C at global step 7 (epoch 2, step 2), saved on the way out...
  {
    auto net = make(1);
    fx::optim::adam opt{0.01};
    fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"dropout", net.layer<2>().generator()}};
    fx::checkpoint_manager manager{ckpt, dir.string()};
    fx::checkpoint_callback saver{manager};
    struct interrupter : fx::callback {
      void on_batch_end(const fx::fit_logs& l) override {
        if (l.global_step == 7) std::raise(SIGINT);
      }
    } ctrl_c;
    CHECK(fx::fit(net, opt, cross_entropy, data, {.epochs = 3, .out = &log, .callbacks = {&saver, &ctrl_c}}).interrupted);
  }
  // ... and resumed in a fresh model (other initial weights) from the checkpoint, with a fresh
  // dataset object (a new process opens it for the first time).
  auto net = make(99);
  fx::optim::adam opt{0.01};
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"dropout", net.layer<2>().generator()}};
  fx::checkpoint_manager manager{ckpt, dir.string()};
  REQUIRE(manager.restore_latest());
  CHECK(opt.iterations() == 7);
  std::ostringstream resumed_log;
  const auto data_again = fx::data::tensors(xs, ys).shuffle(40, 5).batch(8).prefetch(2);
  const auto history = fx::fit(net, opt, cross_entropy, data_again, {.epochs = 3, .out = &resumed_log, .resume = true});
  CHECK(resumed_log.str().find("resuming at epoch 2/3, step 3 (global step 8)") != std::string::npos);
  CHECK(history.steps == 8);  // 3 left in epoch 2, 5 in epoch 3
  CHECK(history.loss.size() == 2);
  CHECK(opt.iterations() == 15);
  check_same_variables(net, reference);  // bitwise
  // A finished run resumes to nothing; an unknown epoch length is an error.
  CHECK(fx::fit(net, opt, cross_entropy, data_again, {.epochs = 3, .out = &resumed_log, .resume = true}).steps == 0);
  const auto endless = fx::data::tensors(xs, ys).batch(8).repeat();
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, endless, {.epochs = 4, .out = &resumed_log, .resume = true}),
                       doctest::Contains("resume needs the number of steps in an epoch"), fx::invalid_argument);
  fs::remove_all(dir);
}

TEST_CASE("fit: a callback's on_batch_end sees the running accuracy at the steps it reads it, -1 at the others") {
  struct every_other : fx::callback {
    std::vector<double> seen;
    bool reads_batch_metrics(const fx::fit_logs& l) const override { return l.global_step % 2 == 0; }
    void on_batch_end(const fx::fit_logs& l) override { seen.push_back(l.accuracy); }
  };
  struct every_step : fx::callback {  // the default: reads every step
    std::vector<double> seen;
    void on_batch_end(const fx::fit_logs& l) override { seen.push_back(l.accuracy); }
  };
  const auto data = blobs(4, 8, 6);
  auto train = [&](fx::callback& c, fx::callback* also = nullptr) {
    fx::random::generator gen{5};
    auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
    fx::optim::adam opt{0.05};
    fx::fit_options o{.epochs = 2, .verbose = 0, .callbacks = {&c}, .handle_interrupt = false};
    if (also) o.callbacks.push_back(also);
    return fx::fit(net, opt, cross_entropy, data, o);
  };
  every_step all;
  const auto reference = train(all);
  every_other some;
  const auto history = train(some);
  REQUIRE(all.seen.size() == 8);
  REQUIRE(some.seen.size() == 8);
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK(all.seen[i] >= 0);
    CHECK(some.seen[i] == ((i + 1) % 2 == 0 ? all.seen[i] : -1.0));
  }
  CHECK(history.accuracy == reference.accuracy);  // every epoch's accuracy, whatever the callbacks read
  CHECK(history.loss == reference.loss);
  // With a second callback that reads every step, both see it every step.
  every_other again;
  every_step beside;
  train(again, &beside);
  CHECK(again.seen == all.seen);
  // The library's callbacks that never read it per step.
  fx::early_stopping stop;
  fx::fit_logs logs;
  logs.global_step = 10;
  CHECK_FALSE(stop.reads_batch_metrics(logs));
}

TEST_CASE("predict: Keras's Model.predict over a dataset's batches and over a tensor in batches") {
  fx::random::generator gen{21};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dropout{0.5}, nn::dense<3>{});
  const auto data = blobs(3, 5, 22);
  // Every batch's inference output (dropout off), in order, along the batch axis; the labels are
  // not read; no tape records it.
  fx::gradient_tape tape;
  const fx::tensor<float> got = fx::predict(net, data);
  CHECK(got.shape() == fx::shape{15, 3});
  std::vector<float> want;
  for (const auto& [x, y] : data)
    for (float v : fx::tensor<float>(net(x, /*training=*/false)).to_vector()) want.push_back(v);
  CHECK(got.to_vector() == want);
  CHECK(tape.gradient(fx::reduce_sum(got), *net.trainable_variables()[0]).is_none());
  // A dataset of inputs alone, and an fx::data pipeline.
  std::vector<fx::tensor<float>> inputs;
  for (const auto& [x, y] : data) inputs.push_back(x);
  CHECK(fx::predict(net, inputs).to_vector() == want);
  const fx::tensor<float> all = fx::concat({data[0].first, data[1].first, data[2].first}, 0);
  CHECK(fx::predict(net, fx::data::tensors(all).batch(4)).shape() == fx::shape{15, 3});
  // A tensor, batch_size examples at a time (the last batch smaller), and in one batch: the values
  // of one call.
  const std::vector<float> whole = fx::tensor<float>(net(all, false)).to_vector();
  for (fx::index_t batch_size : {1, 4, 15, 32}) {
    CAPTURE(batch_size);
    const fx::tensor<float> p = fx::predict(net, all, batch_size);
    CHECK(p.shape() == fx::shape{15, 3});
    const auto v = p.to_vector();
    for (std::size_t i = 0; i < v.size(); ++i) CHECK(v[i] == doctest::Approx(whole[i]).epsilon(1e-6));
  }
  // An expression is materialized first.
  CHECK(fx::predict(net, all * 1.f, 4).to_vector() == fx::predict(net, all, 4).to_vector());
  // Errors name the batch, or say what is wrong.
  std::vector<fx::tensor<float>> wrong = inputs;
  wrong[1] = fx::zeros<float>({5, 3});
  CHECK_THROWS_WITH_AS(fx::predict(net, wrong), doctest::Contains("predict: batch 2: sequential:"), fx::shape_error);
  CHECK_THROWS_WITH_AS(fx::predict(net, std::vector<fx::tensor<float>>{}), "predict: the dataset gave no batch",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::predict(net, all, 0), "predict: batch_size = 0 must be positive", fx::invalid_argument);
}

TEST_CASE("learning_rate_scheduler: Keras's LearningRateScheduler sets the rate at each epoch's beginning") {
  fx::random::generator gen{31};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  rate_recorder record{opt};
  std::ostringstream said;
  std::vector<std::pair<int, double>> calls;
  fx::learning_rate_scheduler halve{opt, [&](int epoch, double lr) {
                                      calls.emplace_back(epoch, lr);
                                      return epoch == 0 ? lr : lr * 0.5;
                                    }, &said};
  CHECK_FALSE(halve.reads_batch_metrics(fx::fit_logs{}));
  const auto history = fx::fit(net, opt, cross_entropy, blobs(2, 8, 32), {.epochs = 3, .verbose = 0, .callbacks = {&halve, &record}});
  CHECK(history.learning_rate == std::vector<double>{0.1, 0.05, 0.025});  // each epoch's rate
  // With a schedule, the rate of each epoch's last step: iterations 1 and 3 of 0.1 * 0.5^(i / 2).
  fx::optim::sgd decaying{fx::optim::exponential_decay(0.1, 2, 0.5)};
  const auto decayed = fx::fit(net, decaying, cross_entropy, blobs(2, 8, 32), {.epochs = 2, .verbose = 0});
  REQUIRE(decayed.learning_rate.size() == 2);
  CHECK(decayed.learning_rate[0] == doctest::Approx(0.1 * std::pow(0.5, 0.5)).epsilon(1e-12));
  CHECK(decayed.learning_rate[1] == doctest::Approx(0.1 * std::pow(0.5, 1.5)).epsilon(1e-12));
  CHECK(calls == std::vector<std::pair<int, double>>{{0, 0.1}, {1, 0.1}, {2, 0.05}});
  CHECK(record.seen == std::vector<double>{0.1, 0.1, 0.05, 0.05, 0.025, 0.025});  // each epoch's two steps
  CHECK(said.str() == "epoch 1: learning_rate_scheduler setting the learning rate to 0.1\n"
                      "epoch 2: learning_rate_scheduler setting the learning rate to 0.05\n"
                      "epoch 3: learning_rate_scheduler setting the learning rate to 0.025\n");
  // A rate that is not finite and non-negative stops fit before the epoch's first step.
  fx::learning_rate_scheduler bad{opt, [](int epoch, double lr) { return epoch == 1 ? -1.0 : lr; }};
  const auto before = opt.iterations();
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, blobs(2, 8, 32), {.epochs = 3, .verbose = 0, .callbacks = {&bad}}),
                       "learning_rate_scheduler: at epoch 1: the schedule's learning rate = -1 must be finite and non-negative",
                       fx::invalid_argument);
  CHECK(opt.iterations() == before + 2);
  CHECK_THROWS_WITH_AS(fx::learning_rate_scheduler(opt, nullptr), "learning_rate_scheduler: the schedule is empty",
                       fx::invalid_argument);
  fx::optim::sgd scheduled{fx::optim::exponential_decay(0.1, 10, 0.5)};
  fx::learning_rate_scheduler on_schedule{scheduled, [](int, double lr) { return lr; }};
  CHECK_THROWS_WITH_AS(fx::fit(net, scheduled, cross_entropy, blobs(2, 8, 4), {.epochs = 1, .verbose = 0, .callbacks = {&on_schedule}}),
                       doctest::Contains("learning_rate_scheduler: the sgd optimizer's learning rate is a schedule"),
                       fx::invalid_argument);
}

TEST_CASE("learning_rate_scheduler: resumed mid-epoch from a checkpoint, fit gets the uninterrupted run's rates and weights") {
  scratch_dir dir;
  const auto data = blobs(5, 8, 41);  // 5 steps an epoch
  auto make = [](std::uint64_t seed) {
    fx::random::generator gen{seed};
    return nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
  };
  // Scales the current rate: applied again on the resumed epoch, it would halve that epoch's rate.
  const auto halve = [](int epoch, double lr) { return epoch == 0 ? lr : lr * 0.5; };
  auto reference = make(3);
  fx::optim::sgd reference_opt{0.1};
  fx::learning_rate_scheduler reference_decay{reference_opt, halve};
  const auto full = fx::fit(reference, reference_opt, cross_entropy, data, {.epochs = 3, .verbose = 0, .callbacks = {&reference_decay}});
  REQUIRE(full.learning_rate == std::vector<double>{0.1, 0.05, 0.025});
  {  // Interrupted at global step 7 (epoch 2, step 2) and saved on the way out.
    auto net = make(3);
    fx::optim::sgd opt{0.1};
    fx::learning_rate_scheduler decay{opt, halve};
    fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
    fx::checkpoint_manager manager{ckpt, dir.file("ckpts")};
    fx::checkpoint_callback saver{manager};
    struct interrupter : fx::callback {
      void on_batch_end(const fx::fit_logs& l) override {
        if (l.global_step == 7) std::raise(SIGINT);
      }
    } ctrl_c;
    CHECK(fx::fit(net, opt, cross_entropy, data, {.epochs = 3, .verbose = 0, .callbacks = {&decay, &saver, &ctrl_c}}).interrupted);
  }
  // A fresh program: other weights, the constructed rate 0.1; the checkpoint restores 0.05.
  auto net = make(77);
  fx::optim::sgd opt{0.1};
  fx::learning_rate_scheduler decay{opt, halve};
  rate_recorder record{opt};
  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
  fx::checkpoint_manager manager{ckpt, dir.file("ckpts")};
  REQUIRE(manager.restore_latest());
  CHECK(opt.iterations() == 7);
  CHECK(opt.learning_rate() == 0.05);
  const auto resumed = fx::fit(net, opt, cross_entropy, data, {.epochs = 3, .verbose = 0, .callbacks = {&decay, &record}, .resume = true});
  CHECK(resumed.learning_rate == std::vector<double>{0.05, 0.025});
  CHECK(record.seen == std::vector<double>{0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.025});
  check_same_variables(net, reference);  // bitwise
  // Other callbacks see on_epoch_begin for the resumed epoch, as before.
  struct events : fx::callback {
    std::vector<int> begun;
    void on_epoch_begin(int epoch) override { begun.push_back(epoch); }
  } seen;
  opt.set_iterations(12);  // epoch 3, step 3
  fx::fit(net, opt, cross_entropy, data, {.epochs = 3, .verbose = 0, .callbacks = {&seen}, .resume = true});
  CHECK(seen.begun == std::vector<int>{2});
}

TEST_CASE("csv_logger: Keras's CSVLogger, a row per epoch that reads back as the history") {
  scratch_dir dir;
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  auto fields = [](const std::string& line) {
    std::vector<std::string> out{""};
    for (char c : line) {
      if (c == ',') out.emplace_back();
      else out.back() += c;
    }
    return out;
  };
  fx::random::generator gen{41};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<8>{}, nn::relu{}, nn::dense<2>{});
  fx::optim::adam opt{0.05};
  const std::string path = dir.file("log.csv");
  fx::csv_logger log{path};
  auto history = fx::fit(net, opt, cross_entropy, blobs(3, 8, 42), {.epochs = 3, .verbose = 0, .callbacks = {&log}},
                         blobs(2, 8, 43));
  auto lines = read(path);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0] == "epoch,accuracy,loss,val_accuracy,val_loss");  // Keras's: epoch, then the names sorted
  for (int e = 0; e < 3; ++e) {
    CAPTURE(e);
    const auto f = fields(lines[static_cast<std::size_t>(e) + 1]);
    REQUIRE(f.size() == 5);
    CHECK(f[0] == std::to_string(e));
    CHECK(std::stod(f[1]) == history.accuracy[static_cast<std::size_t>(e)]);  // the same doubles, exactly
    CHECK(std::stod(f[2]) == history.loss[static_cast<std::size_t>(e)]);
    CHECK(std::stod(f[3]) == history.val_accuracy[static_cast<std::size_t>(e)]);
    CHECK(std::stod(f[4]) == history.val_loss[static_cast<std::size_t>(e)]);
  }
  // Appending: the rows follow, the header is not repeated; without validation data or integer
  // labels the columns are fewer.
  fx::csv_logger more{path, /*append=*/true};
  fx::fit(net, opt, cross_entropy, blobs(3, 8, 42), {.epochs = 1, .verbose = 0, .callbacks = {&more}}, blobs(2, 8, 43));
  lines = read(path);
  CHECK(lines.size() == 5);
  CHECK(fields(lines[4]).size() == 5);
  fx::csv_logger fresh{dir.file("plain.csv"), false, ';'};
  fx::fit(net, opt, cross_entropy, blobs(3, 8, 42), {.epochs = 2, .verbose = 0, .callbacks = {&fresh}});
  lines = read(dir.file("plain.csv"));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "epoch;accuracy;loss");
  CHECK(lines[2].rfind("1;", 0) == 0);
  // A file that cannot be opened stops fit before its first step, naming it.
  fx::csv_logger nowhere{dir.file("missing/dir/log.csv")};
  const auto before = opt.iterations();
  const std::string want = "csv_logger: '" + dir.file("missing/dir/log.csv") + "': cannot open the file: No such file or directory";
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, cross_entropy, blobs(3, 8, 42), {.epochs = 1, .verbose = 0, .callbacks = {&nowhere}}),
                       want.c_str(), fx::io_error);
  CHECK(opt.iterations() == before);

  // Resumed (the rows of the resumed epoch and later dropped, a line cut short too), and refused
  // when the file is not such a log: its first line no header, or a row without an epoch number.
  std::ofstream(dir.file("resumed.csv"), std::ios::trunc) << "epoch;loss\n0;0.5\n1;0.25\n2;0.125\n3;0.0";
  fx::csv_logger resumed{dir.file("resumed.csv"), false, ';'};
  resumed.on_train_resume(2, 40);
  fx::fit_logs at2;
  at2.epoch = 2;
  at2.loss = 0.1;
  resumed.on_epoch_end(at2);
  resumed.on_train_end(at2);
  CHECK(read(dir.file("resumed.csv")) == std::vector<std::string>{"epoch;loss", "0;0.5", "1;0.25", "2;0.1"});
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"loss,epoch\n", "its first line is not a header that begins with 'epoch': 'loss,epoch'"},
           {"epoch,loss\n0,1\nx,2\n", "line 3 does not begin with an epoch number: 'x,2'"},
           {"epoch,loss", "its first line, the header, is incomplete"}}) {
    std::ofstream(dir.file("bad.csv"), std::ios::trunc) << text;
    fx::csv_logger bad{dir.file("bad.csv")};
    CHECK_THROWS_WITH_AS(bad.on_train_resume(1, 5), ("csv_logger: '" + dir.file("bad.csv") + "': cannot resume its rows: " + why).c_str(),
                         fx::io_error);
  }
}

namespace {
/// A composite model of two outputs, as the README's two_heads.
struct two_outputs : nn::model<two_outputs> {
  nn::dense<5> trunk;
  nn::dense<3> classes;
  nn::dense<1> score;
  FLUXION_LAYERS(trunk, classes, score)
  auto call(const fx::tensor<float>& x, bool) {
    fx::tensor<float> h = fx::relu(trunk(x));
    return std::pair{classes(h), score(h)};
  }
};
}  // namespace

TEST_CASE("predict: a model of several outputs gives each output concatenated, as Keras's list") {
  two_outputs net;
  const auto data = blobs(3, 4, 51);
  auto [classes, score] = fx::predict(net, data);
  CHECK(classes.shape() == fx::shape{12, 3});
  CHECK(score.shape() == fx::shape{12, 1});
  std::vector<float> want_classes, want_score;
  for (const auto& [x, y] : data) {
    auto [c, s] = net(x, false);
    for (float v : fx::tensor<float>(c).to_vector()) want_classes.push_back(v);
    for (float v : fx::tensor<float>(s).to_vector()) want_score.push_back(v);
  }
  CHECK(classes.to_vector() == want_classes);
  CHECK(score.to_vector() == want_score);
  const fx::tensor<float> all = fx::concat({data[0].first, data[1].first, data[2].first}, 0);
  auto [c5, s5] = fx::predict(net, all, 5);
  CHECK(c5.shape() == fx::shape{12, 3});
  CHECK(s5.shape() == fx::shape{12, 1});
}

TEST_CASE("fit: a resumed run goes on with its callbacks' state: plateau, early stopping, CSV rows, best checkpoint") {
  scratch_dir dir;
  const auto data = blobs(5, 8, 21);  // 5 steps an epoch
  auto make = [](std::uint64_t seed) {
    fx::random::generator gen{seed};
    return nn::sequential(gen, nn::input<4>{}, nn::dense<16>{}, nn::relu{}, nn::dropout{0.25, 3}, nn::dense<2>{});
  };
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  // No epoch after the first improves the loss by min_delta = 1: the plateau halves the rate each
  // epoch but the cooldown's, and early stopping stops after epoch 3 of 6.
  const fx::reduce_lr_on_plateau::options plateau_options{.factor = 0.5, .patience = 1, .min_delta = 1.0, .cooldown = 1};
  const fx::early_stopping::options stop_options{.patience = 3, .min_delta = 1.0};
  const fx::fit_options fit_options{.epochs = 6, .verbose = 0};

  // The reference: never interrupted.
  auto reference = make(1);
  fx::optim::sgd reference_opt{0.05};
  fx::reduce_lr_on_plateau reference_plateau{reference_opt, plateau_options};
  fx::early_stopping reference_stop{stop_options};
  fx::checkpoint reference_ckpt{{"model", reference}};
  fx::best_checkpoint_callback reference_best{reference_ckpt, dir.file("reference_best")};
  fx::csv_logger reference_csv{dir.file("reference.csv")};
  auto options = fit_options;
  options.callbacks = {&reference_plateau, &reference_stop, &reference_best, &reference_csv};
  const auto want = fx::fit(reference, reference_opt, cross_entropy, data, options);
  REQUIRE(want.stopped_early);
  REQUIRE(reference_stop.stopped_epoch() == 3);
  REQUIRE(reference_plateau.reductions() >= 2);

  // The same run, with its callbacks in the checkpoint, stopped by Ctrl-C at global step 12 (epoch 2).
  const std::string csv = dir.file("run.csv");
  const std::string best_path = dir.file("run_best");
  {
    auto net = make(1);
    fx::optim::sgd opt{0.05};
    fx::reduce_lr_on_plateau plateau{opt, plateau_options};
    fx::early_stopping stop{stop_options};
    fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}, {"dropout", net.layer<2>().generator()},
                        {"plateau", plateau}, {"stop", stop}};
    fx::checkpoint_manager manager{ckpt, dir.file("ckpt")};
    fx::checkpoint_callback saver{manager};
    fx::checkpoint model_only{{"model", net}};
    fx::best_checkpoint_callback best{model_only, best_path};
    fx::csv_logger log{csv};
    struct interrupter : fx::callback {
      void on_batch_end(const fx::fit_logs& l) override {
        if (l.global_step == 12) std::raise(SIGINT);
      }
    } ctrl_c;
    options.callbacks = {&plateau, &stop, &best, &log, &saver, &ctrl_c};
    REQUIRE(fx::fit(net, opt, cross_entropy, data, options).interrupted);
  }
  // The log's last line was cut short; and the run resumes from the checkpoint of epoch 0's end
  // (step 5), older than the log's row of epoch 1, as after a crash that lost the later ones.
  std::ofstream(csv, std::ios::app) << "2,0.5";
  const auto saved = fx::list_checkpoints(dir.file("ckpt"));
  REQUIRE(saved.size() == 3);
  REQUIRE(saved[0].first == 5);

  auto resume = [&](bool with_state, fx::fit_history& history, fx::early_stopping& stop, fx::reduce_lr_on_plateau& plateau,
                    fx::optim::sgd& opt) {
    auto net = make(99);
    fx::checkpoint ckpt = with_state ? fx::checkpoint{{"model", net}, {"optimizer", opt}, {"dropout", net.layer<2>().generator()},
                                                      {"plateau", plateau}, {"stop", stop}}
                                     : fx::checkpoint{{"model", net}, {"optimizer", opt}, {"dropout", net.layer<2>().generator()}};
    ckpt.restore(saved[0].second, {.allow_partial = !with_state});
    fx::checkpoint model_only{{"model", net}};
    fx::best_checkpoint_callback best{model_only, best_path};
    fx::csv_logger log{csv};
    fx::summary_writer writer{dir.file(with_state ? "runs_with_state" : "runs_without")};
    fx::tensorboard_callback tensorboard{writer, 1};
    auto o = fit_options;
    o.resume = true;
    o.callbacks = {&plateau, &stop, &best, &log, &tensorboard};
    history = fx::fit(net, opt, cross_entropy, data, o);
    // The TensorBoard callback marked the restart at step 6, the first the resumed run writes again
    // (Event{wall_time, step 6, session_log{status START}}, after the file_version event).
    fx::io::tfrecord_reader events{writer.path()};
    REQUIRE(events.next());
    const auto restart = events.next();
    REQUIRE(restart);
    CHECK(restart->substr(9) == std::string("\x10\x06\x3a\x02\x08\x01", 6));
    if (with_state) {
      check_same_variables(net, reference);
      CHECK(best.best_epoch() == reference_best.best_epoch());
      CHECK(best.best() == reference_best.best());
      CHECK(read(csv) == read(dir.file("reference.csv")));  // rows 0-3, as the uninterrupted run wrote them
    }
  };
  fx::optim::sgd opt{0.05};
  fx::reduce_lr_on_plateau plateau{opt, plateau_options};
  fx::early_stopping stop{stop_options};
  fx::fit_history history;
  resume(true, history, stop, plateau, opt);
  CHECK(history.stopped_early);
  CHECK(stop.stopped_epoch() == 3);
  CHECK(plateau.reductions() == reference_plateau.reductions());
  CHECK(opt.learning_rate() == reference_opt.learning_rate());
  CHECK(history.learning_rate == std::vector<double>(want.learning_rate.begin() + 1, want.learning_rate.end()));

  // Without their state in the checkpoint they start afresh, as before stop 64: early stopping
  // waits three more epochs from the resumed one, and the rate falls an epoch later.
  fx::optim::sgd opt2{0.05};
  fx::reduce_lr_on_plateau plateau2{opt2, plateau_options};
  fx::early_stopping stop2{stop_options};
  resume(false, history, stop2, plateau2, opt2);
  CHECK(stop2.stopped_epoch() == 4);
  REQUIRE(history.learning_rate.size() == 4);
  CHECK(history.learning_rate[1] != want.learning_rate[2]);
}

TEST_CASE("best_checkpoint_callback: a resumed fit starts from the file's best, watched the same way") {
  scratch_dir dir;
  fx::random::generator gen{17};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  net(fx::zeros<float>({1, 4}));
  fx::checkpoint ckpt{{"model", net}};
  auto& kernel = net.layer<0>().kernel();
  const std::string path = dir.file("best.safetensors");
  auto epoch_end = [&](fx::best_checkpoint_callback& best, int epoch, double val_loss) {
    kernel.assign(fx::full<float>({4, 2}, static_cast<float>(epoch)));
    fx::fit_logs logs;
    logs.epoch = epoch;
    logs.has_validation = true;
    logs.val_loss = val_loss;
    best.on_epoch_end(logs);
  };
  {
    fx::best_checkpoint_callback best{ckpt, path};
    best.on_train_begin();
    epoch_end(best, 0, 0.5);
    epoch_end(best, 1, 0.7);
  }
  const auto file = fx::io::safetensors::load(path);
  CHECK(*file.find_metadata("best_checkpoint/monitor") == "automatic (min)");
  CHECK(*file.find_metadata("best_checkpoint/value") == "0.5");
  CHECK(*file.find_metadata("best_checkpoint/epoch") == "0");
  {  // Resumed at epoch 2 by a new process: 0.6 does not replace epoch 0's 0.5; 0.4 does.
    fx::best_checkpoint_callback best{ckpt, path};
    best.on_train_resume(2, 10);
    CHECK(best.best() == 0.5);
    CHECK(best.best_epoch() == 0);
    epoch_end(best, 2, 0.6);
    ckpt.restore(path);
    CHECK(kernel.peek().to_vector() == std::vector<float>(8, 0.f));
    epoch_end(best, 3, 0.4);
    CHECK(best.best_epoch() == 3);
    ckpt.restore(path);
    CHECK(kernel.peek().to_vector() == std::vector<float>(8, 3.f));
  }
  {  // Watching something else, the file's best does not count: the first epoch replaces it.
    fx::best_checkpoint_callback best{ckpt, path, {.monitor = fx::monitor::val_accuracy}};
    best.on_train_resume(4, 20);
    CHECK(best.best_epoch() == -1);
  }
  // A file that is not a checkpoint is an error, rather than replaced; none at all starts afresh.
  std::ofstream(path, std::ios::trunc) << "not safetensors";
  fx::best_checkpoint_callback best{ckpt, path};
  CHECK_THROWS_AS(best.on_train_resume(2, 10), fx::io_error);
  fx::best_checkpoint_callback elsewhere{ckpt, dir.file("none")};
  elsewhere.on_train_resume(2, 10);
  CHECK(elsewhere.best_epoch() == -1);
}

TEST_CASE("fit: an optimizer with use_ema leaves the model with its moving averages, as Keras's fit does") {
  fx::random::generator gen{5};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<2>{});
  fx::optim::adam opt{{.learning_rate = 0.05, .use_ema = true, .ema_momentum = 0.9}};
  struct raw_weights : fx::callback {  // the variables at the last step's end, before fit finalizes them
    fx::variable<float>* v;
    std::vector<float> last;
    void on_batch_end(const fx::fit_logs&) override { last = v->peek().to_vector(); }
  } raw;
  raw.v = &net.layer<0>().kernel();
  fx::fit(net, opt, cross_entropy, blobs(3, 8, 6), {.epochs = 2, .verbose = 0, .callbacks = {&raw}});
  const auto average = opt.get_slot(net.layer<0>().kernel(), "average")->peek().to_vector();
  CHECK(net.layer<0>().kernel().peek().to_vector() == average);
  CHECK(raw.last != average);
  // Interrupted by Ctrl-C, the run keeps its raw weights, for a checkpoint that resumes it exactly.
  struct interrupter : fx::callback {
    void on_batch_end(const fx::fit_logs& l) override {
      if (l.global_step == 8) std::raise(SIGINT);
    }
  } ctrl_c;
  CHECK(fx::fit(net, opt, cross_entropy, blobs(3, 8, 6), {.epochs = 2, .verbose = 0, .callbacks = {&raw, &ctrl_c}}).interrupted);
  CHECK(net.layer<0>().kernel().peek().to_vector() == raw.last);
  CHECK(opt.get_slot(net.layer<0>().kernel(), "average")->peek().to_vector() != raw.last);
}

TEST_CASE("fit: gradient accumulation over k batches of b trains as batches of k * b; the history's rates are the updates'") {
  const auto small = blobs(6, 4, 17);
  std::vector<batch> large;
  for (std::size_t i = 0; i < small.size(); i += 3)
    large.emplace_back(fx::tensor<float>(fx::concat({small[i].first, small[i + 1].first, small[i + 2].first}, 0)),
                       fx::tensor<std::int32_t>(fx::concat({small[i].second, small[i + 1].second, small[i + 2].second}, 0)));
  const fx::optim::schedule rate = fx::optim::exponential_decay(0.1, 1, 0.5);
  fx::random::generator gen_a{5}, gen_b{5};
  auto accumulated = nn::sequential(gen_a, nn::input<4>{}, nn::dense<2>{});
  auto reference = nn::sequential(gen_b, nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt_a{{.learning_rate = rate, .momentum = 0.5, .gradient_accumulation_steps = 3}};
  fx::optim::sgd opt_b{{.learning_rate = rate, .momentum = 0.5}};
  const auto history_a = fx::fit(accumulated, opt_a, cross_entropy, small, {.epochs = 2, .verbose = 0});
  const auto history_b = fx::fit(reference, opt_b, cross_entropy, large, {.epochs = 2, .verbose = 0});
  CHECK(opt_a.iterations() == 12);
  CHECK(opt_a.updates() == 4);
  CHECK(opt_b.updates() == 4);
  CHECK(history_a.learning_rate == history_b.learning_rate);
  CHECK(history_a.learning_rate == std::vector<double>{0.05, 0.0125});  // at updates 1 and 3
  auto vars = accumulated.variables();
  auto reference_vars = reference.variables();
  REQUIRE(vars.size() == reference_vars.size());
  for (std::size_t i = 0; i < vars.size(); ++i) {
    INFO(vars[i]->name());
    const auto got = vars[i]->peek().to_vector(), want = reference_vars[i]->peek().to_vector();
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-5));
  }
  // The per-epoch loss is the mean over the same examples, from the same weights at each update.
  CHECK(history_a.loss[0] == doctest::Approx(history_b.loss[0]).epsilon(1e-5));
}
