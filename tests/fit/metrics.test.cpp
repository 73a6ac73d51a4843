// fx::fit and fx::evaluate with Keras's compile(metrics=..., weighted_metrics=...): with a learning
// rate of 0 the model does not change, so every epoch's training metric, and the validation's, must
// equal a naive loop over the same batches; a tagger's mask reaches the metrics (its accuracy
// through fit_options::metrics equals fit's own); the results reach the history, the logs, the
// progress line and the CSV log; callbacks monitor a metric by name; errors name what is wrong.
#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../scratch_dir.hpp"

// Test files are compiled a few to a program (cmake/tests.cmake, FLUXION_TEST_BATCHES): this one's
// helpers live in a namespace of its own.
namespace fit_metrics_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

using regression_batch = std::tuple<fx::tensor<float>, fx::tensor<float>, fx::tensor<float>>;

/// Batches of (x (rows, 3), y (rows, 2), sample_weight (rows,)).
std::vector<regression_batch> regression(int batches, std::uint64_t seed) {
  fx::random::generator gen{seed};
  std::vector<regression_batch> out;
  for (int b = 0; b < batches; ++b) {
    const fx::index_t rows = 4 + b;
    out.emplace_back(fx::random::normal<float>({rows, 3}, gen, 0.f, 1.f), fx::random::normal<float>({rows, 2}, gen, 0.f, 1.f),
                     fx::random::uniform<float>({rows}, gen, 0.f, 2.f));
  }
  return out;
}

auto mse_loss = [](const auto& out, const auto& y, const auto& w) { return fx::losses::mean_squared_error(out, y, w); };

/// The mean absolute error of net over the batches, each example weighted (or not), by a loop.
template <class Net>
double naive_mae(Net& net, const std::vector<regression_batch>& data, bool weighted) {
  double total = 0, count = 0;
  for (const auto& [x, y, w] : data) {
    const auto out = fx::tensor<float>(net(x, false)).to_vector();
    const auto yv = y.to_vector();
    const auto wv = w.to_vector();
    for (std::size_t i = 0; i < out.size(); ++i) {
      const double weight = weighted ? wv[i / 2] : 1.0;
      total += weight * std::abs(static_cast<double>(yv[i]) - static_cast<double>(out[i]));
      count += weight;
    }
  }
  return total / count;
}

struct logs_seen : fx::callback {
  std::vector<fx::fit_logs> batch_end, epoch_end;
  void on_batch_end(const fx::fit_logs& l) override { batch_end.push_back(l); }
  void on_epoch_end(const fx::fit_logs& l) override { epoch_end.push_back(l); }
};

}  // namespace

TEST_CASE("fit metrics: each epoch's training and validation metrics equal a naive loop over the batches") {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<3>{}, nn::dense<8>{}, nn::tanh{}, nn::dense<2>{});
  const auto train = regression(3, 4);
  const auto validation = regression(2, 5);
  fx::optim::sgd frozen{0.0};  // the model stays as it is: each epoch's metrics are the same
  fx::metrics::mean_absolute_error mae;
  fx::metrics::root_mean_squared_error rmse{"rmse"};
  fx::metrics::mean_absolute_error weighted_mae{"weighted_mae"};
  logs_seen seen;
  std::ostringstream log;
  const auto history = fx::fit(net, frozen, mse_loss, train,
                               {.epochs = 2, .verbose = 2, .out = &log, .callbacks = {&seen}, .metrics = {&mae, &rmse},
                                .weighted_metrics = {&weighted_mae}},
                               validation);
  const double want = naive_mae(net, train, false), want_weighted = naive_mae(net, train, true);
  const double want_val = naive_mae(net, validation, false), want_val_weighted = naive_mae(net, validation, true);
  REQUIRE(history.metrics.size() == 6);
  for (const auto& [name_, values] : history.metrics) {
    const auto& name = name_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(name);
    CHECK(values.size() == 2);
  }
  for (int e = 0; e < 2; ++e) {
    CHECK(history.metric("mean_absolute_error")[e] == doctest::Approx(want).epsilon(1e-6));
    CHECK(history.metric("weighted_mae")[e] == doctest::Approx(want_weighted).epsilon(1e-6));
    CHECK(history.metric("val_mean_absolute_error")[e] == doctest::Approx(want_val).epsilon(1e-6));
    // The validation's sample weights reach the weighted metrics there too, as Keras's evaluate.
    CHECK(history.metric("val_weighted_mae")[e] == doctest::Approx(want_val_weighted).epsilon(1e-6));
  }
  CHECK(want_weighted != doctest::Approx(want).epsilon(1e-3));  // the weights mattered
  // RMSE: the root of the loop's mean squared error.
  double squares = 0, count = 0;
  for (const auto& [x, y, w] : train) {
    const auto out = fx::tensor<float>(net(x, false)).to_vector();
    const auto yv = y.to_vector();
    for (std::size_t i = 0; i < out.size(); ++i) {
      squares += (yv[i] - out[i]) * (yv[i] - out[i]);
      ++count;
    }
  }
  CHECK(history.metric("rmse")[1] == doctest::Approx(std::sqrt(squares / count)).epsilon(1e-6));
  // The logs: running values at each step, the epoch's at its end with the validation's.
  REQUIRE(seen.batch_end.size() == 6);
  REQUIRE(seen.batch_end[0].metrics.size() == 3);
  CHECK(seen.batch_end[0].metrics[0].first == "mean_absolute_error");
  CHECK(seen.batch_end[2].metrics[0].second == doctest::Approx(want).epsilon(1e-6));  // the epoch's last step
  REQUIRE(seen.epoch_end.size() == 2);
  CHECK(seen.epoch_end[1].val_metrics.size() == 3);
  CHECK(seen.epoch_end[1].val_metrics[1].first == "val_rmse");
  REQUIRE(seen.epoch_end[1].find_metric("val_weighted_mae") != nullptr);
  CHECK(*seen.epoch_end[1].find_metric("val_weighted_mae") == doctest::Approx(want_val_weighted).epsilon(1e-6));
  CHECK(seen.epoch_end[1].find_metric("mse") == nullptr);
  CHECK_THROWS_WITH_AS(history.metric("mse"),
                       "fit_history::metric: no metric is named 'mse'; the history has mean_absolute_error, rmse, "
                       "weighted_mae, val_mean_absolute_error, val_rmse, val_weighted_mae",
                       fx::invalid_argument);
  // The epoch's line.
  CHECK(log.str().find(" - mean_absolute_error: ") != std::string::npos);
  CHECK(log.str().find(" - val_rmse: ") != std::string::npos);

  // Where nothing shows a step's values, the step's logs have none (as the accuracy's -1); the
  // epoch's end has them.
  struct quiet : logs_seen {
    bool reads_batch_metrics(const fx::fit_logs&) const override { return false; }
  } unread;
  fx::fit(net, frozen, mse_loss, train, {.epochs = 1, .verbose = 0, .callbacks = {&unread}, .metrics = {&mae}});
  REQUIRE(unread.batch_end.size() == 3);
  CHECK(unread.batch_end[2].metrics.empty());
  REQUIRE(unread.epoch_end.size() == 1);
  CHECK(unread.epoch_end[0].metrics.size() == 1);
  CHECK(unread.epoch_end[0].metrics[0].second == doctest::Approx(want).epsilon(1e-6));

  // evaluate with the same metrics, by itself.
  const fx::evaluation e = fx::evaluate(net, mse_loss, validation, {.metrics = {&mae}});
  REQUIRE(e.metrics.size() == 1);
  CHECK(e.metrics[0].first == "mean_absolute_error");
  CHECK(e.metrics[0].second == doctest::Approx(want_val).epsilon(1e-6));
}

TEST_CASE("fit metrics: a tagger's mask reaches them; Keras's top-k and class weights; monitored by name") {
  fx::random::generator gen{7};
  // (batch, 5) class scores from 4 features, integer labels.
  std::vector<std::pair<fx::tensor<float>, fx::tensor<std::int32_t>>> data;
  for (int b = 0; b < 3; ++b)
    data.emplace_back(fx::random::normal<float>({6, 4}, gen, 0.f, 1.f), fx::random::uniform<std::int32_t>({6}, gen, 0, 5));
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<5>{});
  auto cross_entropy = [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  };
  fx::optim::sgd frozen{0.0};
  fx::metrics::sparse_categorical_accuracy accuracy{"same_accuracy"};
  fx::metrics::sparse_top_k_categorical_accuracy top2{2, "top2"};
  fx::metrics::mean_iou miou{5, {.sparse_y_pred = false}};
  const auto history =
      fx::fit(net, frozen, cross_entropy, data, {.epochs = 1, .verbose = 0, .metrics = {&accuracy, &top2, &miou}});
  fx::metrics::mean_iou direct{5, {.sparse_y_pred = false}};  // the same batches, updated by hand
  for (const auto& [x, y] : data) direct.update(y, net(x, false));
  CHECK(history.metric("mean_iou")[0] == doctest::Approx(direct.result()).epsilon(1e-12));
  CHECK(direct.result() > 0);
  REQUIRE(history.accuracy.size() == 1);
  CHECK(history.metric("same_accuracy")[0] == history.accuracy[0]);  // fit's own, through the interface
  double hits = 0, n = 0;
  for (const auto& [x, y] : data) {
    const auto scores = fx::tensor<float>(net(x, false)).to_vector();
    const auto labels = y.to_vector();
    for (std::size_t r = 0; r < labels.size(); ++r) {
      int higher = 0;
      for (std::size_t c = 0; c < 5; ++c) higher += scores[r * 5 + c] > scores[r * 5 + static_cast<std::size_t>(labels[r])];
      hits += higher < 2;
      ++n;
    }
  }
  CHECK(history.metric("top2")[0] == doctest::Approx(hits / n).epsilon(1e-12));

  // Monitoring a metric by name: top2 rises (mode max, from the name), the error falls.
  CHECK(fx::monitor{"val_top2"}.maximized() == false);  // "top2" does not say; give the mode
  CHECK(fx::monitor{"val_top2", fx::monitor::mode::max}.maximized());
  CHECK(fx::monitor{"val_sparse_top_k_categorical_accuracy"}.maximized());
  CHECK(fx::monitor{"precision"}.maximized());
  CHECK(fx::monitor{"val_auc"}.maximized());
  CHECK(fx::monitor{"val_mean_iou"}.maximized());
  CHECK_FALSE(fx::monitor{"val_mean_absolute_error"}.maximized());
  fx::early_stopping on_top2{{.patience = 0, .monitor = fx::monitor{"top2", fx::monitor::mode::max}}};
  on_top2.on_train_begin();
  fx::fit_logs logs;
  logs.metrics = {{"top2", 0.5}};
  on_top2.on_epoch_end(logs);
  logs.epoch = 1;
  logs.metrics = {{"top2", 0.6}};
  on_top2.on_epoch_end(logs);
  CHECK(on_top2.best() == 0.6);
  CHECK_FALSE(on_top2.stop_training);
  logs.epoch = 2;
  logs.metrics = {{"top2", 0.55}};
  on_top2.on_epoch_end(logs);
  CHECK(on_top2.stop_training);
  fx::early_stopping missing{{.monitor = "val_mae"}};  // a name alone, as Keras's monitor="val_mae"
  logs.has_validation = true;
  logs.val_metrics = {{"val_top2", 0.5}};
  CHECK_THROWS_WITH_AS(missing.on_epoch_end(logs),
                       "early_stopping: monitor = val_mae, but fit's logs have no such value; they have loss, top2, "
                       "val_loss, val_top2 (a metric is there when given in fit_options::metrics)",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::monitor{""}, doctest::Contains("monitor: the name is empty"), fx::invalid_argument);

  // class_weight reaches the weighted metrics, not the plain ones.
  fx::metrics::sparse_categorical_accuracy plain{"plain"}, weighted{"weighted"};
  const std::vector<double> class_weight{1, 0, 0, 0, 0};  // only class 0 counts
  auto weighted_loss = [](const auto& logits, const auto& labels, const auto& w) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels, w);
  };
  const auto by_class = fx::fit(net, frozen, weighted_loss, data,
                                {.epochs = 1, .verbose = 0, .class_weight = class_weight, .metrics = {&plain},
                                 .weighted_metrics = {&weighted}});
  double right0 = 0, count0 = 0;
  for (const auto& [x, y] : data) {
    const auto predicted = fx::tensor<std::int64_t>(fx::argmax(fx::tensor<float>(net(x, false)), -1)).to_vector();
    const auto labels = y.to_vector();
    for (std::size_t r = 0; r < labels.size(); ++r)
      if (labels[r] == 0) {
        right0 += predicted[r] == 0;
        ++count0;
      }
  }
  CHECK(by_class.metric("plain")[0] == history.accuracy[0]);
  CHECK(by_class.metric("weighted")[0] == doctest::Approx(count0 > 0 ? right0 / count0 : 0.0));
}

TEST_CASE("fit metrics: the CSV log has their columns, sorted as Keras's; bad metric lists are refused") {
  scratch_dir dir;
  fx::random::generator gen{9};
  auto net = nn::sequential(gen, nn::input<3>{}, nn::dense<2>{});
  const auto train = regression(2, 10);
  fx::optim::sgd opt{0.01};
  fx::metrics::mean_absolute_error mae;
  fx::metrics::mean_squared_error mse{"a_mse"};
  fx::csv_logger csv{dir.file("log.csv")};
  fx::fit(net, opt, mse_loss, train, {.epochs = 2, .verbose = 0, .callbacks = {&csv}, .metrics = {&mae, &mse}}, regression(1, 11));
  std::ifstream in(dir.file("log.csv"));
  std::string header;
  std::getline(in, header);
  CHECK(header == "epoch,a_mse,loss,mean_absolute_error,val_a_mse,val_loss,val_mean_absolute_error");

  fx::metrics::mean_absolute_error again;
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, mse_loss, train, {.verbose = 0, .metrics = {&mae, &again}}),
                       "fit: two metrics are named 'mean_absolute_error'; give them distinct names (the metrics' "
                       "constructors take one)",
                       fx::invalid_argument);
  fx::metrics::mean_absolute_error named_loss{"loss"};
  CHECK_THROWS_WITH_AS(fx::fit(net, opt, mse_loss, train, {.verbose = 0, .weighted_metrics = {&named_loss}}),
                       "fit: two metrics are named 'loss' (fit reports its own 'loss'); give yours another name",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(fx::evaluate(net, mse_loss, train, {.metrics = {nullptr}}), "evaluate: a metric is null",
                       fx::invalid_argument);
  CHECK(opt.iterations() == 4);  // the refused calls trained nothing
}

}  // namespace fit_metrics_test
