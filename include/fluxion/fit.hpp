// fx::fit: Keras's Model.fit for fluxion models: epochs over a dataset of (inputs, labels) batches,
// one gradient-tape step per batch, a progress bar, callbacks, and Ctrl-C that stops cleanly.
//
//   auto net = fx::nn::sequential(fx::nn::input<784>{}, fx::nn::dense<128>{}, fx::nn::relu{},
//                                 fx::nn::dense<10>{});
//   fx::optim::adam opt{1e-3};
//   auto loss = [](const auto& logits, const auto& labels) {
//     return fx::losses::sparse_softmax_cross_entropy(logits, labels);
//   };
//   fx::early_stopping stop{net, {.patience = 2, .restore_best_weights = true}};  // Keras 3's; also
//                                               // fx::reduce_lr_on_plateau{opt, {.factor = 0.5}}
//   auto history = fx::fit(net, opt, loss, train_batches, {.epochs = 10, .callbacks = {&stop}});
//   auto history = fx::fit(net, opt, loss, train_batches, {.epochs = 10, .callbacks = {&stop}}, test_batches);
//   fx::evaluation e = fx::evaluate(net, loss, test_batches);   // e.loss, e.accuracy
//   fx::tensor<float> logits = fx::predict(net, test_batches);     // every batch's output, concatenated
//
// With validation data (the last argument, Keras's validation_data), fit evaluates the model on it
// after each epoch: val_loss and val_accuracy join the epoch's line, the logs and the history, and
// early_stopping watches val_loss (Keras's default monitor). fx::evaluate is that evaluation alone:
// inference mode (training = false), no tape records it, and the loss is the mean over examples
// (each batch's loss weighted by its size, as Keras's evaluate), so a smaller last batch counts
// for what it holds. fit's training loss is the same kind of mean.
//
// The dataset is any range whose elements are (x, y) pairs or tuples of tensors, iterated once per
// epoch from its beginning (a std::vector of pairs, or an fx::data pipeline). With integer labels
// and logits of shape (batch, classes) (or (batch, time, classes) for labels (batch, time)), fit
// also reports sparse categorical accuracy.
//
// Keras's sample weights and masks: (x, y, sample_weight) elements call loss_fn(logits, y,
// sample_weight); a model whose mask reaches its output (a tagger: embedding<...>::mask_zero, a
// recurrent layer with ReturnSequences, dense) is called through output_and_mask, and its mask is
// loss_fn's third argument (with sample weights too, Keras's combination: the weights on the kept
// steps, the mean over those), so the padding steps count in neither the loss nor the accuracy:
//   auto loss = [](const auto& logits, const auto& labels, const auto& w) {
//     return fx::losses::sparse_softmax_cross_entropy(logits, labels, w);
//   };
// A loss function that takes two arguments there is a compile-time error, not a silent loss over
// the padding.
//
// Progress: on a terminal, a bar per epoch that shows step/total, loss, accuracy, samples per second
// and the ETA, redrawn at most ten times a second; otherwise (CI, logs) one line per epoch. While fit
// runs, SIGINT (Ctrl-C) asks it to stop after the current step: callbacks then see
// on_train_end (a checkpoint callback saves there) and fit returns with history.interrupted set; the
// previous handler is restored when fit returns.
//
// The callbacks that save and log live with what they use: fx::checkpoint_callback in
// <fluxion/checkpoint.hpp>, fx::tensorboard_callback in <fluxion/tensorboard.hpp>.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/state_fields.hpp"
#include "io/file.hpp"
#include "metrics.hpp"
#include "nn/regularizers.hpp"
#include "optim.hpp"
#include "tensor.hpp"

namespace fluxion {

/// What callbacks and the progress output see after a step or an epoch.
struct fit_logs {
  int epoch = 0;               // from 0
  std::int64_t step = 0;       // steps done in this epoch
  std::int64_t global_step = 0;  // steps done since fit began (plus the optimizer's earlier ones)
  double loss = 0;             // mean over the epoch's examples so far (each step's loss weighted by its batch size)
  double accuracy = -1;        // sparse categorical accuracy so far, -1 when not computed
  double samples_per_second = 0;
  double seconds = 0;          // since the epoch began
  double data_seconds = 0;     // of which waiting for the dataset's next batch
  std::int64_t skipped = 0;    // steps of this epoch a resumed run skipped (trained before it)
  bool has_validation = false;  // at on_epoch_end, when fit was given validation data:
  double val_loss = 0;          //   the loss on it (mean over examples)
  double val_accuracy = -1;     //   sparse categorical accuracy on it, -1 when not computed
  /// fit_options::metrics' and weighted_metrics' results so far in the epoch, by name (after a
  /// step, as the accuracy: only where the progress bar or a callback's reads_batch_metrics shows
  /// them, else empty).
  std::vector<std::pair<std::string, double>> metrics = {};
  /// At on_epoch_end with validation data: theirs on it, named "val_<name>".
  std::vector<std::pair<std::string, double>> val_metrics = {};
  /// The value named `name` among metrics and val_metrics, or nullptr.
  const double* find_metric(const std::string& name) const {
    for (const auto* list : {&metrics, &val_metrics})
      for (const auto& [n, v] : *list)
        if (n == name) return &v;
    return nullptr;
  }
};

/// What early_stopping, reduce_lr_on_plateau and best_checkpoint_callback watch, as Keras's
/// `monitor` and `mode`: fx::monitor::automatic (val_loss when fit has validation data, else the
/// training loss), fx::monitor::loss, val_loss, accuracy, val_accuracy, or one of
/// fit_options::metrics by its name in the logs: fx::monitor{"val_mean_absolute_error"} (stop 57).
/// Losses and errors improve downward (Keras's mode "min"); with mode::automatic, names that end in
/// "accuracy", "acc", "precision", "recall", "auc" or "iou" (after any "val_") improve upward ("max"), as
/// Keras's metrics' directions; mode::min or mode::max says so for any other. A min_delta or a
/// baseline is in the monitored quantity's own units either way.
class monitor {
 public:
  enum class mode { automatic, min, max };
  explicit monitor(const std::string& name, mode m = mode::automatic) : m_custom(name.begin(), name.end()) {
    if (m_custom.empty()) throw invalid_argument("monitor: the name is empty; name a value of fit's logs (\"val_loss\")");
    m_maximized = m == mode::max || (m == mode::automatic && upward(name));
  }
  /// A name alone, as Keras's monitor="val_mean_absolute_error": `.monitor = "val_mean_absolute_error"`.
  monitor(const char* name) : monitor(std::string(name)) {}  // NOLINT: a name is a monitor
  // Constants, not objects built when the program starts: a program that includes fit.hpp pays nothing for them.
  static const monitor automatic, loss, val_loss, accuracy, val_accuracy;
  /// The logs' name it watches ("automatic" for automatic).
  std::string_view name() const noexcept { return m_builtin ? std::string_view(m_builtin) : std::string_view(m_custom.data(), m_custom.size()); }
  bool is_automatic() const noexcept { return m_automatic; }
  /// Whether a bigger value is better (Keras's mode "max").
  bool maximized() const noexcept { return m_maximized; }
  bool operator==(const monitor& other) const noexcept {
    return name() == other.name() && m_maximized == other.m_maximized && m_automatic == other.m_automatic;
  }

 private:
  constexpr monitor(const char* builtin, bool maximized, bool automatic)
      : m_builtin(builtin), m_automatic(automatic), m_maximized(maximized) {}
  static bool upward(std::string_view name) {
    if (name.substr(0, 4) == "val_") name.remove_prefix(4);
    for (std::string_view suffix : {"accuracy", "acc", "precision", "recall", "auc", "iou"})
      if (name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix) return true;
    return false;
  }
  // Not a std::string: clang before 16 cannot build libstdc++ 12's empty string in a constant
  // expression (its short-string union), and the constants below are constexpr.
  std::vector<char> m_custom;
  const char* m_builtin = nullptr;
  bool m_automatic = false;
  bool m_maximized = false;
};
inline constexpr monitor monitor::automatic{"automatic", false, true};
inline constexpr monitor monitor::loss{"loss", false, false};
inline constexpr monitor monitor::val_loss{"val_loss", false, false};
inline constexpr monitor monitor::accuracy{"accuracy", true, false};
inline constexpr monitor monitor::val_accuracy{"val_accuracy", true, false};

namespace detail {
/// The monitored quantity of a callback `who` at an epoch's end, negated where bigger is better,
/// so that every callback looks for a smaller value; a validation quantity without validation data,
/// an accuracy fit did not compute, or a name the logs do not have, is an error naming what they have.
inline double monitored_loss(const fit_logs& logs, const monitor& m, const char* who) {
  if (m.is_automatic()) return logs.has_validation ? logs.val_loss : logs.loss;
  const std::string name(m.name());
  const bool validation = name.rfind("val_", 0) == 0;
  const std::string head = std::string(who) + ": monitor = " + name;
  if (validation && !logs.has_validation)
    throw invalid_argument(head + ", but fit was given no validation data (pass it as fit's last argument, or monitor the "
                           "training " + name.substr(4) + ")");
  double value = 0;
  if (name == "loss" || name == "val_loss") {
    value = validation ? logs.val_loss : logs.loss;
  } else if (name == "accuracy" || name == "val_accuracy") {
    value = validation ? logs.val_accuracy : logs.accuracy;
    if (value < 0)
      throw invalid_argument(head + ", but fit computed no accuracy (it does for integer labels and a model's class "
                             "scores, (batch, classes) or (batch, time, classes)); monitor the loss");
  } else if (const double* v = logs.find_metric(name)) {
    value = *v;
  } else {
    std::string have = "loss";
    if (logs.accuracy >= 0) have += ", accuracy";
    for (const auto& [n, v] : logs.metrics) have += ", " + n;
    if (logs.has_validation) have += ", val_loss";
    if (logs.has_validation && logs.val_accuracy >= 0) have += ", val_accuracy";
    for (const auto& [n, v] : logs.val_metrics) have += ", " + n;
    throw invalid_argument(head + ", but fit's logs have no such value; they have " + have +
                           " (a metric is there when given in fit_options::metrics)");
  }
  return m.maximized() ? -value : value;
}
/// A monitored value as the user reads it: monitored_loss's value, with a maximized one's sign restored.
inline double monitored_value(double internal, const monitor& m) noexcept { return m.maximized() ? -internal : internal; }
/// What a callback watches, as its checkpoint state's label: "val_loss (min)".
inline std::string monitor_label(const monitor& m) {
  return std::string(m.name()) + (m.maximized() ? " (max)" : " (min)");
}

/// Keras's "min" mode, shared by early_stopping and reduce_lr_on_plateau: the best loss so far and
/// the epochs since it improved.
struct plateau {
  double best = std::numeric_limits<double>::infinity();
  int wait = 0;
  /// Whether `value` improves on the best by more than min_delta; if so it becomes the best and
  /// the wait restarts.
  bool improved(double value, double min_delta) {
    if (!(value < best - min_delta)) return false;
    best = value;
    wait = 0;
    return true;
  }
};
}  // namespace detail

/// Hooks into fit, as Keras's callbacks. Setting stop_training ends fit after the current step.
class callback {
 public:
  virtual ~callback() = default;
  virtual void on_train_begin() {}
  /// Called instead of on_train_begin by a fit that resumes a run (fit_options::resume, with an
  /// optimizer that has taken steps): training goes on at `epoch` (from 0) after `global_step`
  /// steps. By default it is on_train_begin(). A callback whose state a checkpoint restored
  /// (checkpoint_state(): reduce_lr_on_plateau, early_stopping) keeps it; csv_logger keeps the
  /// rows of the epochs before `epoch`; best_checkpoint_callback keeps its file's best.
  virtual void on_train_resume(int /*epoch*/, std::int64_t /*global_step*/) { on_train_begin(); }
  virtual void on_epoch_begin(int /*epoch*/) {}
  /// A resumed fit (fit_options::resume) starts in the middle of `epoch`, whose first `skipped`
  /// steps the interrupted run trained: this is called instead of on_epoch_begin(epoch). By
  /// default it is on_epoch_begin(epoch); a callback whose effect at an epoch's beginning the
  /// checkpoint already holds (learning_rate_scheduler: the optimizer's rate) does nothing.
  virtual void on_epoch_resume(int epoch, std::int64_t /*skipped*/) { on_epoch_begin(epoch); }
  /// Whether the on_batch_end call after the step `logs` describes (its step and global_step are
  /// set) reads logs.accuracy. Where no callback does and the progress bar does not show it, that
  /// call sees accuracy -1, and on a device other than the cpu fit then reads nothing back for the
  /// step's accuracy: it stays on the device (fx::metrics) and the host goes on to the next step
  /// without waiting for this one. A callback that reads it only every few steps (the TensorBoard
  /// callback) or only at an epoch's end says so here.
  virtual bool reads_batch_metrics(const fit_logs&) const { return true; }
  virtual void on_batch_end(const fit_logs&) {}
  virtual void on_epoch_end(const fit_logs&) {}
  virtual void on_train_end(const fit_logs&) {}
  bool stop_training = false;
};

struct early_stopping_options {
  int patience = 0;  // Keras's default (until stop 57: 3)
  double min_delta = 0;
  fluxion::monitor monitor = fluxion::monitor::automatic;
  /// Keras's baseline, in the monitored quantity's units: an epoch that improves on the best but
  /// not on the baseline does not restart the wait.
  std::optional<double> baseline = std::nullopt;
  /// Keras's restore_best_weights: when fit ends, the model's variables get the values they had at
  /// the end of the best epoch. Needs the model: fx::early_stopping stop{net, {...}}.
  bool restore_best_weights = false;
  int start_from_epoch = 0;  // epochs before it are not watched (Keras's warm-up)
  std::ostream* out = nullptr;  // Keras's verbose: a line when it stops, and when it restores
};

/// Stops training when the monitored quantity (the validation loss when fit has validation data,
/// else the epoch's mean training loss; or an accuracy) has not improved by more than min_delta for
/// `patience` epochs: Keras 3's EarlyStopping, with its options and defaults (patience 0 stops at
/// the first epoch without improvement; it never stops after the first epoch). With
/// restore_best_weights the model's variables (all of them, as Keras's get_weights: the moving
/// statistics too) are kept, as shared immutable tensors, at each improvement, and set back when
/// fit ends, as Keras 3 does whether or not it stopped early; the optimizer's slots are not.
///   fx::early_stopping stop{net, {.patience = 2, .monitor = fx::monitor::val_accuracy, .restore_best_weights = true}};
template <class Unused = void>
class basic_early_stopping : public callback {
 public:
  using options = early_stopping_options;
  explicit basic_early_stopping(options o = {}) : m_options(o) {
    const char* who = "early_stopping";
    if (o.patience < 0) throw invalid_argument(std::string(who) + ": patience = " + std::to_string(o.patience) + " is negative");
    optim::detail::check_non_negative(who, "min_delta", o.min_delta);
    if (o.baseline && !std::isfinite(*o.baseline))
      throw invalid_argument(std::string(who) + ": baseline = " + optim::detail::format_number(*o.baseline) +
                             " must be finite");
    if (o.start_from_epoch < 0)
      throw invalid_argument(std::string(who) + ": start_from_epoch = " + std::to_string(o.start_from_epoch) +
                             " is negative");
    if (o.restore_best_weights)
      throw invalid_argument(std::string(who) +
                             ": restore_best_weights needs the model whose weights it restores: "
                             "fx::early_stopping stop{net, {.restore_best_weights = true}}");
  }
  /// The same, watching `model` (anything whose variables() gives its fx::variable pointers) for
  /// restore_best_weights.
  template <class Model>
    requires requires(Model& m) { m.variables(); }
  basic_early_stopping(Model& model, options o) : basic_early_stopping(without_restore(o)) {
    m_options.restore_best_weights = o.restore_best_weights;
    m_snapshot = [&model]() -> std::function<void()> {
      auto variables = model.variables();
      std::vector<std::remove_cvref_t<decltype(variables[0]->peek())>> values;
      values.reserve(variables.size());
      for (auto* v : variables) values.push_back(v->peek());  // tensors are immutable: shared, not copied
      return [variables = std::move(variables), values = std::move(values)] {
        for (std::size_t i = 0; i < variables.size(); ++i) variables[i]->assign(values[i]);
      };
    };
  }
  void on_train_begin() override {
    m_best = std::numeric_limits<double>::infinity();
    m_wait = 0;
    m_stopped_epoch = -1;
    m_best_epoch = -1;
    m_best_weights = nullptr;
    m_restored = false;
  }
  /// A resumed fit goes on with the best value and wait a checkpoint restored (checkpoint_state()),
  /// as the uninterrupted run would have; without a restored state, it starts afresh.
  void on_train_resume(int, std::int64_t) override {
    if (!m_restored) return on_train_begin();
    m_stopped_epoch = -1;
    m_restored = false;
  }
  /// The best value, the epochs waited and the best epoch, for fx::checkpoint: with
  /// {"early_stopping", stop} among a checkpoint's objects, a run resumed from it stops where the
  /// uninterrupted run would have. The monitor is the state's label. Refused with
  /// restore_best_weights: the checkpoint would not hold the best epoch's weights (keep them in a
  /// file with fx::best_checkpoint_callback instead).
  state_fields checkpoint_state() {
    if (m_options.restore_best_weights)
      throw invalid_argument(
          "early_stopping: a checkpoint cannot hold the copy of the best epoch's weights that restore_best_weights keeps, "
          "so a resumed run could not restore them; keep the best epoch's model in a file with "
          "fx::best_checkpoint_callback (restore it after fit), and checkpoint an early_stopping without "
          "restore_best_weights");
    return {.reals = {{"best", &m_best, m_options.monitor.maximized()}},
            .integers = {{"wait", &m_wait}, {"best_epoch", &m_best_epoch, -1}},
            .labels = {{"monitor", detail::monitor_label(m_options.monitor)}},
            .restored = [this] { m_restored = true; }};
  }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  // Keras 3's on_epoch_end, in "min" mode on monitored_loss's value.
  void on_epoch_end(const fit_logs& logs) override {
    if (logs.epoch < m_options.start_from_epoch) return;
    const double value = detail::monitored_loss(logs, m_options.monitor, "early_stopping");
    if (m_options.restore_best_weights && !m_best_weights) {
      m_best_weights = m_snapshot();
      m_best_epoch = logs.epoch;
    }
    ++m_wait;
    if (value < m_best - m_options.min_delta) {
      m_best = value;
      m_best_epoch = logs.epoch;
      if (m_options.restore_best_weights) m_best_weights = m_snapshot();
      const double baseline = m_options.baseline ? detail::monitored_value(*m_options.baseline, m_options.monitor) : 0;
      if (!m_options.baseline || value < baseline - m_options.min_delta) m_wait = 0;
      return;
    }
    if (m_wait >= m_options.patience && logs.epoch > 0) {
      stop_training = true;
      m_stopped_epoch = logs.epoch;
    }
  }
  void on_train_end(const fit_logs&) override {
    if (m_options.out != nullptr && m_stopped_epoch >= 0)
      *m_options.out << "epoch " << m_stopped_epoch + 1 << ": early_stopping stopped training\n";
    if (!m_best_weights) return;
    if (m_options.out != nullptr)
      *m_options.out << "early_stopping: restoring the model's weights from the end of the best epoch, "
                     << m_best_epoch + 1 << "\n";
    m_best_weights();
    m_best_weights = nullptr;
  }
  /// The epoch after which training stopped, or -1.
  int stopped_epoch() const noexcept { return m_stopped_epoch; }
  /// The best epoch watched so far (from 0), or -1.
  int best_epoch() const noexcept { return m_best_epoch; }
  /// Its monitored value (infinity, or minus infinity for an accuracy, before any).
  double best() const noexcept { return detail::monitored_value(m_best, m_options.monitor); }

 private:
  static options without_restore(options o) {
    o.restore_best_weights = false;
    return o;
  }
  options m_options;
  double m_best = std::numeric_limits<double>::infinity();  // in monitored_loss's "min" units
  int m_wait = 0;
  int m_stopped_epoch = -1;
  int m_best_epoch = -1;
  std::function<std::function<void()>()> m_snapshot;  // the model's values now, as a function that restores them
  std::function<void()> m_best_weights;
  bool m_restored = false;  // by a checkpoint, since the last fit began
};
/// A class template behind this alias, so that only a program that makes one compiles it.
using early_stopping = basic_early_stopping<>;

namespace detail {
/// The callbacks that set an optimizer's learning rate need a constant one: a schedule already sets
/// it at each step (Keras refuses to set the rate of an optimizer made with a schedule too).
inline void require_constant_rate(const char* who, const optim::optimizer& o) {
  if (!o.learning_rate_schedule().is_constant())
    throw invalid_argument(std::string(who) + ": the " + o.name() +
                           " optimizer's learning rate is a schedule, which already sets the rate at each step; give "
                           "the optimizer a constant learning rate for this callback to set");
}
}  // namespace detail

struct reduce_lr_on_plateau_options {
  double factor = 0.1;  // the learning rate is multiplied by it, in (0, 1)
  int patience = 10;    // epochs without improvement before a reduction
  double min_delta = 1e-4;
  int cooldown = 0;     // epochs after a reduction in which none is counted
  double min_lr = 0;    // the learning rate never goes below it
  fluxion::monitor monitor = fluxion::monitor::automatic;
  std::ostream* out = nullptr;  // Keras's verbose: a line here at each reduction
};

/// Keras's ReduceLROnPlateau: multiplies the optimizer's learning rate by `factor` (down to min_lr)
/// when the monitored loss (val_loss when fit has validation data, else the training loss) has not
/// improved by more than min_delta for `patience` epochs, then waits `cooldown` epochs before it
/// counts again. Keras's defaults. The optimizer's learning rate must be a constant: a schedule
/// already decides the rate (Keras refuses to set it too). The reduced rate stays the optimizer's
/// after fit, and a checkpoint saves and restores it (list this callback before a
/// checkpoint_callback, so that an epoch's reduction is made before the epoch's save); the
/// callback's own counts go in a checkpoint that has it among its objects (checkpoint_state()).
///
///   fx::reduce_lr_on_plateau plateau{opt, {.factor = 0.5, .patience = 2, .min_lr = 1e-5}};
///   fx::fit(net, opt, loss, train, {.epochs = 30, .callbacks = {&plateau}}, validation);
class reduce_lr_on_plateau : public callback {
 public:
  using options = reduce_lr_on_plateau_options;
  explicit reduce_lr_on_plateau(optim::optimizer& optimizer, options o = {}) : m_optimizer(&optimizer), m_options(o) {
    const char* who = "reduce_lr_on_plateau";
    if (!(o.factor > 0 && o.factor < 1))
      throw invalid_argument(std::string(who) + ": factor = " + optim::detail::format_number(o.factor) +
                             " must be in (0, 1): it multiplies the learning rate to reduce it");
    if (o.patience < 0) throw invalid_argument(std::string(who) + ": patience = " + std::to_string(o.patience) + " is negative");
    if (o.cooldown < 0) throw invalid_argument(std::string(who) + ": cooldown = " + std::to_string(o.cooldown) + " is negative");
    optim::detail::check_non_negative(who, "min_delta", o.min_delta);
    optim::detail::check_non_negative(who, "min_lr", o.min_lr);
  }
  void on_train_begin() override {
    detail::require_constant_rate("reduce_lr_on_plateau", *m_optimizer);
    m_plateau = {};
    m_cooldown = 0;
    m_reductions = 0;
    m_restored = false;
  }
  /// A resumed fit goes on with the counts a checkpoint restored (checkpoint_state()); without a
  /// restored state, it starts afresh.
  void on_train_resume(int, std::int64_t) override {
    if (!m_restored) return on_train_begin();
    detail::require_constant_rate("reduce_lr_on_plateau", *m_optimizer);
    m_restored = false;
  }
  /// The best value, the epochs waited, the cooldown left and the reductions, for fx::checkpoint,
  /// as PyTorch's ReduceLROnPlateau.state_dict(): with {"plateau", plateau} among a checkpoint's
  /// objects, a run resumed from it reduces the rate at the epochs the uninterrupted run would
  /// have. The monitor is the state's label.
  state_fields checkpoint_state() {
    return {.reals = {{"best", &m_plateau.best, m_options.monitor.maximized()}},
            .integers = {{"wait", &m_plateau.wait}, {"cooldown", &m_cooldown}, {"reductions", &m_reductions}},
            .labels = {{"monitor", detail::monitor_label(m_options.monitor)}},
            .restored = [this] { m_restored = true; }};
  }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  void on_epoch_end(const fit_logs& logs) override {
    const double value = detail::monitored_loss(logs, m_options.monitor, "reduce_lr_on_plateau");
    if (m_cooldown > 0) {
      --m_cooldown;
      m_plateau.wait = 0;
    }
    if (m_plateau.improved(value, m_options.min_delta) || m_cooldown > 0) return;
    if (++m_plateau.wait < m_options.patience) return;
    const double old_lr = m_optimizer->learning_rate();
    if (!(old_lr > m_options.min_lr)) return;
    const double new_lr = std::max(old_lr * m_options.factor, m_options.min_lr);
    m_optimizer->set_learning_rate(new_lr);
    ++m_reductions;
    if (m_options.out != nullptr)
      *m_options.out << "epoch " << logs.epoch + 1 << ": reduce_lr_on_plateau reducing the learning rate to "
                     << optim::detail::format_number(new_lr) << "\n";
    m_cooldown = m_options.cooldown;
    m_plateau.wait = 0;
  }
  /// How many times the learning rate was reduced since fit began (or since the run a resumed fit
  /// continues began, with a restored state).
  int reductions() const noexcept { return m_reductions; }

 private:
  optim::optimizer* m_optimizer;
  options m_options;
  detail::plateau m_plateau;
  int m_cooldown = 0;
  int m_reductions = 0;
  bool m_restored = false;  // by a checkpoint, since the last fit began
};

/// Keras's LearningRateScheduler: at the beginning of each epoch (from 0) sets the optimizer's
/// learning rate to schedule(epoch, current rate); with `out`, says so there each epoch, as Keras's
/// verbose. The optimizer must have a constant rate (for a rate that changes at every step, give
/// it an optim schedule instead). A checkpoint saves and restores the optimizer's rate, so a run
/// resumed in the middle of an epoch (fit_options::resume) keeps the rate the schedule set for it,
/// and the next epochs go on from there, as in the uninterrupted run.
///   fx::learning_rate_scheduler decay{opt, [](int epoch, double lr) { return epoch < 10 ? lr : lr * 0.9; }};
class learning_rate_scheduler : public callback {
 public:
  learning_rate_scheduler(optim::optimizer& optimizer, std::function<double(int, double)> schedule,
                          std::ostream* out = nullptr)
      : m_optimizer(&optimizer), m_schedule(std::move(schedule)), m_out(out) {
    if (!m_schedule) throw invalid_argument("learning_rate_scheduler: the schedule is empty");
  }
  void on_train_begin() override { detail::require_constant_rate("learning_rate_scheduler", *m_optimizer); }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  void on_epoch_begin(int epoch) override {
    const double rate = m_schedule(epoch, m_optimizer->learning_rate());
    optim::detail::check_non_negative(("learning_rate_scheduler: at epoch " + std::to_string(epoch)).c_str(),
                                      "the schedule's learning rate", rate);
    m_optimizer->set_learning_rate(rate);
    if (m_out != nullptr)
      *m_out << "epoch " << epoch + 1 << ": learning_rate_scheduler setting the learning rate to "
             << optim::detail::format_number(rate) << "\n";
  }
  /// The interrupted run set this epoch's rate before the checkpoint it resumes from was saved, and
  /// the checkpoint restored it: setting it again would apply a schedule that scales the current
  /// rate twice.
  void on_epoch_resume(int, std::int64_t) override {}

 private:
  optim::optimizer* m_optimizer;
  std::function<double(int, double)> m_schedule;
  std::ostream* m_out;
};

/// Keras's CSVLogger: a row per epoch, written to `path` and flushed at once, so that a run that
/// stops keeps its rows. The columns are Keras's, sorted by name after `epoch`: accuracy (where fit
/// computes it), loss, fit_options::metrics' names, and with validation data val_accuracy, val_loss
/// and the metrics' "val_" names, fixed at the first row (a value missing later is an empty field). Numbers are the shortest text that
/// reads back as the same double. `append` keeps the file's rows and writes the header only
/// to an empty file. A resumed fit (fit_options::resume) keeps the rows of the epochs before the
/// one it resumes and appends to them, whatever `append` says. A file that cannot be opened or
/// written is an fx::io_error naming it.
///   fx::csv_logger log{"training.csv"};
class csv_logger : public callback {
 public:
  explicit csv_logger(std::string path, bool append = false, char separator = ',')
      : m_path(std::move(path)), m_append(append), m_separator(separator) {}
  csv_logger(const csv_logger&) = delete;
  csv_logger& operator=(const csv_logger&) = delete;
  ~csv_logger() override { close(); }

  const std::string& path() const noexcept { return m_path; }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  void on_train_begin() override {
    close();
    m_file = std::fopen(m_path.c_str(), m_append ? "a" : "w");
    if (m_file == nullptr) fail("cannot open the file");
    m_columns.clear();
    m_header_written = m_append && std::ftell(m_file) > 0;
  }
  /// The file as the uninterrupted run would have it when it reached `epoch`: its header and the
  /// rows of the epochs before `epoch`, rewritten atomically without the rows of `epoch` and later
  /// (which the resumed run writes again) and without a last line cut short; then rows are appended,
  /// in the header's columns. A missing or empty file starts afresh, as on_train_begin.
  void on_train_resume(int epoch, std::int64_t) override {
    close();
    if (io::detail::stat_path(m_path).kind == io::detail::file_kind::missing) return on_train_begin();
    const std::string text = io::detail::read_whole_file("csv_logger", m_path, "a CSV log");
    if (text.empty()) return on_train_begin();
    const auto bad = [&](const std::string& what) {
      throw io_error("csv_logger: '" + m_path + "': cannot resume its rows: " + what);
    };
    std::size_t end = text.find('\n');
    if (end == std::string::npos) bad("its first line, the header, is incomplete");
    const std::string header = text.substr(0, end);
    const std::string first = std::string("epoch") + m_separator;
    if (header != "epoch" && header.compare(0, first.size(), first) != 0)
      bad("its first line is not a header that begins with 'epoch': '" + header.substr(0, 80) + "'");
    std::vector<std::string> columns;
    for (std::size_t at = header.find(m_separator); at != std::string::npos;) {
      const std::size_t next = header.find(m_separator, at + 1);
      columns.push_back(header.substr(at + 1, next == std::string::npos ? std::string::npos : next - at - 1));
      at = next;
    }
    std::string kept = header + "\n";
    int line = 1;
    for (std::size_t at = end + 1; at < text.size(); at = end + 1) {
      ++line;
      end = text.find('\n', at);
      if (end == std::string::npos) break;  // cut short by the interruption: the resumed run writes it again
      const std::string row = text.substr(at, end - at);
      int row_epoch = -1;
      const auto [ptr, ec] = std::from_chars(row.data(), row.data() + row.size(), row_epoch);
      if (ec != std::errc() || row_epoch < 0 || (ptr != row.data() + row.size() && *ptr != m_separator))
        bad("line " + std::to_string(line) + " does not begin with an epoch number: '" + row.substr(0, 80) + "'");
      if (row_epoch < epoch) kept += row + "\n";
    }
    io::detail::atomic_write("csv_logger", m_path, {kept});
    m_file = std::fopen(m_path.c_str(), "a");
    if (m_file == nullptr) fail("cannot open the file");
    m_columns = std::move(columns);
    m_header_written = true;
  }
  void on_epoch_end(const fit_logs& logs) override {
    if (m_file == nullptr) return;  // on_epoch_end outside fit
    // Keras's logs: the present values, by name.
    std::vector<std::pair<std::string, double>> values;
    if (logs.accuracy >= 0) values.emplace_back("accuracy", logs.accuracy);
    values.emplace_back("loss", logs.loss);
    if (logs.has_validation && logs.val_accuracy >= 0) values.emplace_back("val_accuracy", logs.val_accuracy);
    if (logs.has_validation) values.emplace_back("val_loss", logs.val_loss);
    values.insert(values.end(), logs.metrics.begin(), logs.metrics.end());
    if (logs.has_validation) values.insert(values.end(), logs.val_metrics.begin(), logs.val_metrics.end());
    if (m_columns.empty()) {  // loss is always present: empty means not fixed yet
      for (const auto& [name, value] : values) m_columns.push_back(name);
      std::sort(m_columns.begin(), m_columns.end());  // Keras's sorted keys
    }
    std::string text;
    if (!m_header_written) {
      text += "epoch";
      for (const std::string& name : m_columns) (text += m_separator) += name;
      text += "\n";
      m_header_written = true;
    }
    text += std::to_string(logs.epoch);
    for (const std::string& name : m_columns) {
      text += m_separator;
      const auto it = std::find_if(values.begin(), values.end(), [&](const auto& v) { return v.first == name; });
      if (it != values.end()) text += optim::detail::format_number(it->second);
    }
    text += "\n";
    if (std::fputs(text.c_str(), m_file) < 0 || std::fflush(m_file) != 0) fail("cannot write to the file");
  }
  void on_train_end(const fit_logs&) override { close(); }

 private:
  [[noreturn]] void fail(const std::string& what) {
    const std::string reason = std::strerror(errno);
    close();
    throw io_error("csv_logger: '" + m_path + "': " + what + ": " + reason);
  }
  void close() noexcept {
    if (m_file != nullptr) std::fclose(m_file);
    m_file = nullptr;
  }

  std::string m_path;
  bool m_append;
  char m_separator;
  std::FILE* m_file = nullptr;
  std::vector<std::string> m_columns;  // fixed by the first row
  bool m_header_written = false;
};

struct fit_options {
  int epochs = 1;
  /// Steps per epoch: -1 runs each epoch to the end of the dataset.
  std::int64_t steps_per_epoch = -1;
  /// 1: a progress bar on a terminal, one line per epoch otherwise; 2: one line per epoch; 0: silent.
  int verbose = 1;
  std::ostream* out = &std::cout;
  std::vector<callback*> callbacks = {};
  /// Stop cleanly on SIGINT (Ctrl-C) instead of being killed.
  bool handle_interrupt = true;
  /// Continue the run whose steps the optimizer has already taken (its iteration count, as a
  /// checkpoint restored it): with N steps an epoch (steps_per_epoch, or the dataset's length),
  /// training starts at epoch iterations / N, skipping the first iterations % N batches of that
  /// epoch's pass; `epochs` then counts the run's epochs from its beginning, as Keras's epochs with
  /// initial_epoch. With an fx::data pipeline, epoch n is its pass n, so the resumed run sees the
  /// batches in the order the first run would have.
  bool resume = false;
  /// Keras's class_weight: class_weight[c] weighs the loss of every example (or step) labeled c, in
  /// training only (evaluate does not weigh), multiplied into the dataset's sample weights. Empty:
  /// none. It needs integer labels in [0, class_weight.size()) and a loss function that takes
  /// (logits, labels, sample_weight) (an fx::out_of_range or fx::invalid_argument otherwise).
  std::vector<double> class_weight = {};
  /// Keras's compile(metrics=[...]): each is reset at each epoch's beginning, updated with every
  /// batch's labels and output (fx::metrics::metric::update_state; where the model's mask reaches
  /// its output, the mask as sample weights, as Keras applies it), and its result is in the logs,
  /// the progress line, the history (history.metric("mean_absolute_error")) and, with validation
  /// data, evaluated there too ("val_mean_absolute_error"). On a device other than the cpu each
  /// batch's output is copied back for them. Names must differ from each other and from "loss" and
  /// "accuracy", which fit reports itself.
  std::vector<metrics::metric*> metrics = {};
  /// Keras's weighted_metrics: the same, given the dataset's sample weights and class_weight too.
  std::vector<metrics::metric*> weighted_metrics = {};
};

struct fit_history {
  std::vector<double> loss;      // per epoch
  std::vector<double> accuracy;  // per epoch, when computed
  std::vector<double> val_loss;      // per epoch, with validation data
  std::vector<double> val_accuracy;  // per epoch, with validation data and when computed
  std::vector<double> learning_rate;  // per epoch: the rate its last step trained with (before the
                                      // epoch's callbacks change it, as Keras's logs record it)
  /// Per epoch, fit_options::metrics' and weighted_metrics' results by name, and with validation
  /// data theirs there ("val_<name>"), as Keras's history.history, in the order they first came.
  std::vector<std::pair<std::string, std::vector<double>>> metrics;
  /// The values of the metric `name` (history.metric("val_mean_absolute_error")); an
  /// fx::invalid_argument naming the history's metrics where there is none of that name.
  template <class Unused = void>  // compiled only where a program calls it
  const std::vector<double>& metric(std::string_view name) const {
    std::string have;
    for (const auto& [n, values] : metrics) {
      if (n == name) return values;
      have += (have.empty() ? "" : ", ") + n;
    }
    throw invalid_argument("fit_history::metric: no metric is named '" + std::string(name) + "'; the history has " +
                           (have.empty() ? std::string("none (give fit_options::metrics)") : have));
  }
  std::int64_t steps = 0;
  bool interrupted = false;      // stopped by SIGINT
  bool stopped_early = false;    // stopped by a callback
};

namespace detail {

inline std::atomic<bool>& fit_interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}

/// Installs a SIGINT handler that sets fit_interrupted() for the scope's lifetime.
class interrupt_scope {
 public:
  explicit interrupt_scope(bool active) : m_active(active) {
    fit_interrupted() = false;
    if (m_active) m_previous = std::signal(SIGINT, [](int) { fit_interrupted() = true; });
  }
  ~interrupt_scope() {
    if (m_active) std::signal(SIGINT, m_previous == SIG_ERR ? SIG_DFL : m_previous);
  }
  interrupt_scope(const interrupt_scope&) = delete;
  interrupt_scope& operator=(const interrupt_scope&) = delete;

 private:
  bool m_active;
  void (*m_previous)(int) = SIG_DFL;
};

inline bool is_terminal(const std::ostream* out) {
  if (out == &std::cout) return ::isatty(STDOUT_FILENO) != 0;
  if (out == &std::cerr || out == &std::clog) return ::isatty(STDERR_FILENO) != 0;
  return false;
}

/// printf into a string (the progress line's numbers, without <iomanip>'s cost in every program).
template <class... A>
void append_format(std::string& out, const char* format, A... args) {
  char buf[128];
  const int n = std::snprintf(buf, sizeof buf, format, args...);
  if (n > 0) out.append(buf, static_cast<std::size_t>(std::min<int>(n, sizeof buf - 1)));
}

/// "1h02m", "3m05s", "12s", "4.5s", or "45ms" under a second (an epoch of a small data set).
inline std::string format_seconds(double s) {
  std::string o;
  if (s < 0.9995) append_format(o, "%.0fms", s * 1000);
  else if (s >= 3600) append_format(o, "%ldh%02ldm", static_cast<long>(s) / 3600, (static_cast<long>(s) % 3600) / 60);
  else if (s >= 60) append_format(o, "%ldm%02lds", static_cast<long>(s) / 60, static_cast<long>(s) % 60);
  else append_format(o, "%.*fs", s < 10 ? 1 : 0, s);
  return o;
}

/// The progress bar of one epoch: `  37/938 [=>..........] 1.2s - loss: 0.5432 - accuracy: 0.8012
/// - 3021 samples/s - ETA: 29s`, or without a total `  37 steps 1.2s - loss ...`.
inline std::string progress_line(const fit_logs& l, std::int64_t total) {
  std::string o;
  if (total > 0) {
    const int width = 24;
    const int done = static_cast<int>(width * std::min<std::int64_t>(l.step, total) / total);
    const int digits = static_cast<int>(std::to_string(total).size());
    append_format(o, "%*lld/%lld [", digits, static_cast<long long>(l.step), static_cast<long long>(total));
    o.append(static_cast<std::size_t>(std::max(done - 1, 0)), '=');
    o += done > 0 ? (l.step >= total ? "=" : ">") : "";
    o.append(static_cast<std::size_t>(width - done), '.');
    o += "]";
  } else {
    append_format(o, "%lld steps", static_cast<long long>(l.step));
  }
  o += " " + format_seconds(l.seconds);
  append_format(o, " - loss: %.4f", l.loss);
  if (l.accuracy >= 0) append_format(o, " - accuracy: %.4f", l.accuracy);
  for (const auto& [name, value] : l.metrics) append_format(o, " - %s: %.4f", name.c_str(), value);
  append_format(o, " - %.0f samples/s", l.samples_per_second);
  if (l.data_seconds > 0 && l.seconds > 0) append_format(o, " - waiting for data %.1f%%", 100 * l.data_seconds / l.seconds);
  if (total > 0 && l.step < total && l.step > l.skipped)
    o += " - ETA: " + format_seconds(l.seconds / static_cast<double>(l.step - l.skipped) * static_cast<double>(total - l.step));
  if (l.has_validation) {
    append_format(o, " - val_loss: %.4f", l.val_loss);
    if (l.val_accuracy >= 0) append_format(o, " - val_accuracy: %.4f", l.val_accuracy);
    for (const auto& [name, value] : l.val_metrics) append_format(o, " - %s: %.4f", name.c_str(), value);
  }
  return o;
}

/// fit without validation data.
struct no_validation {};

template <class R>
concept sized_range = requires(R& r) { std::size(r); };

/// The model's output for a batch: {output} or, for a model whose mask reaches its output
/// (nn::sequential's output_masked, or a composite model's own output_and_mask), {output, mask}.
template <class T>
struct unmasked_output {
  T output;
};
template <class Model, class X>
auto run_model(Model& model, const X& x, bool training) {
  if constexpr (requires { model.output_and_mask(x, training); }) {
    // A composite model's own output_and_mask keeps what its layers add as a call does.
    if constexpr (requires { model.collecting_losses([] { return 0; }); })
      return model.collecting_losses([&] { return model.output_and_mask(x, training); });
    else
      return model.output_and_mask(x, training);
  }
  else return unmasked_output<decltype(model(x, training))>{model(x, training)};
}
template <class Out>
concept has_mask = requires(const Out& o) { o.mask; };

/// Weights `w` as T, shaped to multiply losses of rank `rank`: one per example ((batch,) or (batch,
/// 1)) then weighs each of the example's steps.
template <class T, class W>
auto aligned_weights(const W& w, int rank) {
  const auto t = fluxion::detail::materialize(fluxion::detail::as_expr<const W&>(w));
  using D = device_t<decltype(t)>;
  const tensor<T, D> weights = cast<T>(t);
  if (weights.rank() == 0) return weights;  // a scalar weighs everything as it is
  return tensor<T, D>(weights, fluxion::detail::sample_weight_shape(weights.shape(), rank), fluxion::detail::same_buffer);
}

/// Keras's sample weights combined with the output's mask: w m size(m) / count(m), so that a loss's
/// mean (the weighted sum over the number of losses) becomes the weighted sum over the kept ones.
template <class T, class D>
tensor<T, D> masked_sample_weight(const tensor<T, D>& w, const tensor<bool, D>& mask) {
  return tensor<T, D>(aligned_weights<T>(w, mask.rank()) * cast<T>(mask) *
                      (static_cast<T>(mask.size()) / maximum(reduce_sum(cast<T>(mask)), T(1))));
}

/// Keras's class_weight: the weight of each label's class, a tensor of the labels' shape.
template <class T, class D, class Y>
tensor<T, D> class_weights(const Y& labels, const std::vector<double>& class_weight) {
  if constexpr (std::is_integral_v<value_type_t<Y>>) {
    // A gather from the table of weights; on a device the labels are checked there, without waiting
    // (expr/indexing.hpp), and the table's upload is queued. int32 and int64 labels are gather's
    // indices as they are (no cast and copy each step); bool labels are cast.
    const auto by_class = [&]<class I>(const tensor<I, D>& ids) {
      const auto classes = static_cast<index_t>(class_weight.size());
      fluxion::detail::check_index_range(ids, classes, [classes, s = ids.shape()](index_t i, std::int64_t c) {
        return "fit: class_weight has weights for the classes [0, " + std::to_string(classes) + "), but labels" +
               fluxion::detail::position_text(i, s) + " = " + std::to_string(c);
      });
      const tensor<T, D> table = from_vector<T, D>(std::vector<T>(class_weight.begin(), class_weight.end()), shape{classes});
      return tensor<T, D>(gather(table, ids, 0, fluxion::detail::checked_indices));
    };
    if constexpr (std::is_same_v<Y, tensor<std::int32_t, D>> || std::is_same_v<Y, tensor<std::int64_t, D>>) return by_class(labels);
    else return by_class(tensor<std::int64_t, D>(cast<std::int64_t>(labels)));
  } else {
    throw invalid_argument("fit: class_weight needs integer class labels, not " + std::string(dtype_name<value_type_t<Y>>()));
  }
}

/// loss_fn on a batch's output, as Keras's compiled loss: loss_fn(logits, y) for (x, y) elements of
/// an unmasked model; loss_fn(logits, y, sample_weight) for (x, y, sample_weight) elements, with
/// class weights (fit's class_weight, multiplied into the sample weights), or with the output's
/// mask (a bool tensor, or with weights Keras's combination) for a masked model.
template <class LossFn, class Out, class Element>
auto call_loss(LossFn& loss_fn, const Out& out, const Element& element, const std::vector<double>& class_weight) {
  using L = std::remove_cvref_t<decltype(out.output)>;
  using T = value_type_t<L>;
  using D = device_t<L>;
  const auto& y = std::get<1>(element);
  using Y = std::remove_cvref_t<decltype(y)>;
  constexpr bool weighted = std::tuple_size_v<std::remove_cvref_t<Element>> >= 3;
  constexpr bool masked = has_mask<Out>;
  constexpr bool takes_weights = std::is_invocable_v<LossFn&, const L&, const Y&, const tensor<T, D>&>;
  static_assert(!(weighted || masked) || takes_weights,
                "fluxion::fit / evaluate: the dataset gives (x, y, sample_weight) elements, or the model's mask "
                "reaches its output (an embedding<...>::mask_zero before a recurrent layer with ReturnSequences), "
                "so the loss function is called as loss_fn(logits, labels, sample_weight): take the third "
                "argument and pass it on, "
                "[](const auto& logits, const auto& labels, const auto& w) { return "
                "fx::losses::sparse_softmax_cross_entropy(logits, labels, w); }");
  if constexpr (!takes_weights) {
    if (!class_weight.empty())
      throw invalid_argument("fit: class_weight needs a loss function that takes (logits, labels, sample_weight) and "
                             "passes the weights on to the loss");
    return loss_fn(out.output, y);
  } else {
    // A loss function of three arguments only gets a weight of 1 where there is none (Keras's
    // sample_weight = None).
    const auto unweighted = [&] {
      if constexpr (std::is_invocable_v<LossFn&, const L&, const Y&>) return loss_fn(out.output, y);
      else return loss_fn(out.output, y, ones<T, D>(shape{}));
    };
    std::optional<tensor<T, D>> w;
    if constexpr (weighted) w = aligned_weights<T>(std::get<2>(element), y.rank());
    if (!class_weight.empty()) {
      const tensor<T, D> by_class = class_weights<T, D>(y, class_weight);
      w = w ? tensor<T, D>(*w * by_class) : by_class;
    }
    if constexpr (masked) {
      if (!w) return loss_fn(out.output, y, out.mask);
      return loss_fn(out.output, y, masked_sample_weight(*w, out.mask));
    } else {
      if (!w) return unweighted();
      return loss_fn(out.output, y, *w);
    }
  }
}

/// Adds a batch to `accuracy` for integer labels and logits (batch, ..., classes) whose leading axes
/// the labels' shape is (or has with a unit axis), leaving out the steps a mask drops; true if it did.
template <class Y, class Out>
bool update_accuracy(metrics::detail::sparse_accuracy_counter& accuracy, const Y& y, const Out& out) {
  if constexpr (std::is_integral_v<value_type_t<std::remove_cvref_t<Y>>>) {
    const shape& ls = out.output.shape();
    if (ls.rank() < 2) return false;
    shape leading(ls.begin(), ls.end() - 1), with_unit_axis = leading;
    with_unit_axis.push_back(1);
    if (!(y.shape() == leading) && !(y.shape() == with_unit_axis)) return false;
    if constexpr (has_mask<Out>) accuracy.update(y, out.output, out.mask);
    else accuracy.update(y, out.output);
    return true;
  }
  return false;
}

/// Values on the host as doubles with their shape (a device's copied back), out of autodiff's
/// sight, read by plain loops so that fit and evaluate compile no statement for their metrics: the
/// metrics' own reader.
using host_array = metrics::detail::host_values;

/// The metrics fit and evaluate update (fit_options::metrics and weighted_metrics).
template <class Unused = void>  // compiled only where fit or evaluate is
struct basic_metric_lists {
  const std::vector<metrics::metric*>& plain;
  const std::vector<metrics::metric*>& weighted;
  bool empty() const noexcept { return plain.empty() && weighted.empty(); }
  // Out of line (FLUXION_NOINLINE), as all of metric_lists: fit's loop, one large function, grows
  // by calls only, which keeps its optimization time (and a fit program's build) as it was.
  FLUXION_NOINLINE void reset() const {
    for (auto* list : {&plain, &weighted})
      for (metrics::metric* m : *list) m->reset();
  }
  /// Their results, by name.
  FLUXION_NOINLINE std::vector<std::pair<std::string, double>> results() const {
    std::vector<std::pair<std::string, double>> out;
    for (auto* list : {&plain, &weighted})
      for (metrics::metric* m : *list) out.emplace_back(m->name(), m->result());
    return out;
  }
  /// Appends an epoch's value to the history's list of `name`.
  static void add_to_history(fit_history& history, const std::string& name, double value) {
    for (auto& [n, values] : history.metrics)
      if (n == name) return values.push_back(value);
    history.metrics.emplace_back(name, std::vector<double>{value});
  }
  /// Null metrics and names that repeat (or are fit's own) are refused, naming `who`.
  FLUXION_NOINLINE void check(const char* who) const {
    std::vector<std::string> names{"loss", "accuracy"};
    for (auto* list : {&plain, &weighted})
      for (metrics::metric* m : *list) {
        if (m == nullptr) throw invalid_argument(std::string(who) + ": a metric is null");
        if (std::find(names.begin(), names.end(), m->name()) != names.end())
          throw invalid_argument(std::string(who) + ": two metrics are named '" + m->name() + "'" +
                                 (m->name() == "loss" || m->name() == "accuracy"
                                      ? std::string(" (fit reports its own '") + m->name() + "'); give yours another name"
                                      : std::string("; give them distinct names (the metrics' constructors take one)")));
        names.push_back(m->name());
      }
  }
  /// A batch on the host: the plain metrics get the mask (Keras applies it to every metric), the
  /// weighted ones the sample weights, class weights and mask multiplied, each spread over the
  /// labels' elements (a weight of the labels' leading axes weighs its whole example).
  FLUXION_NOINLINE void update(const host_array& y_true, const host_array& y_pred, const host_array* sample_weight,
                               const host_array* mask, const std::vector<double>& class_weight) const {
    const tensor<double> t = from_vector(y_true.values, y_true.dims), p = from_vector(y_pred.values, y_pred.dims);
    const std::size_t n = y_true.values.size();
    auto spread = [&](const host_array& w, const char* what) {
      const std::size_t k = w.values.size();
      const bool leading = w.dims.rank() <= y_true.dims.rank() &&
                           std::equal(w.dims.begin(), w.dims.end(), y_true.dims.begin(), [](index_t a, index_t b) { return a == b || a == 1; });
      if (k == 0 || n % k != 0 || !leading)
        throw shape_error(std::string("fit metrics: the ") + what + " of shape " + to_string(w.dims) +
                          " does not fit the labels' shape " + to_string(y_true.dims));
      std::vector<double> out(n);
      for (std::size_t i = 0; i < n; ++i) out[i] = w.values[i / (n / k)];
      return out;
    };
    std::optional<std::vector<double>> masked;
    if (mask) masked = spread(*mask, "mask");
    const tensor<double> mask_weights = masked ? from_vector(*masked, y_true.dims) : tensor<double>();
    for (metrics::metric* m : plain) m->update_state(t, p, masked ? &mask_weights : nullptr);
    if (weighted.empty()) return;
    std::optional<std::vector<double>> w = masked;
    auto combine = [&](const std::vector<double>& factor) {
      if (!w) w = factor;
      else
        for (std::size_t i = 0; i < n; ++i) (*w)[i] *= factor[i];
    };
    if (sample_weight) combine(spread(*sample_weight, "sample weights"));
    if (!class_weight.empty()) {  // fit's loss has checked the labels against it
      std::vector<double> by_class(n);
      for (std::size_t i = 0; i < n; ++i) by_class[i] = class_weight[static_cast<std::size_t>(y_true.values[i])];
      combine(by_class);
    }
    const tensor<double> weights = w ? from_vector(*w, y_true.dims) : tensor<double>();
    for (metrics::metric* m : weighted) m->update_state(t, p, w ? &weights : nullptr);
  }
};
using metric_lists = basic_metric_lists<>;

/// Updates `lists` with a batch (metric_lists::update): its labels, the model's output, the
/// element's sample weights and the output's mask.
template <class Out, class Element>
__attribute__((noinline)) void update_metrics_now(const metric_lists& lists, const Out& out, const Element& element,
                                                  const std::vector<double>& class_weight) {
  const host_array y_true = metrics::detail::read(std::get<1>(element)), y_pred = metrics::detail::read(out.output);
  std::optional<host_array> w, mask;
  if constexpr (std::tuple_size_v<std::remove_cvref_t<Element>> >= 3) w = metrics::detail::read(std::get<2>(element));
  if constexpr (has_mask<Out>) mask = metrics::detail::read(out.mask);
  lists.update(y_true, y_pred, w ? &*w : nullptr, mask ? &*mask : nullptr, class_weight);
}
template <class Out, class Element>
void update_metrics(const metric_lists& lists, const Out& out, const Element& element, const std::vector<double>& class_weight) {
  if (!lists.empty()) update_metrics_now(lists, out, element, class_weight);
}

/// loss_fn on the output (call_loss), and its value plus the model's penalties (Keras's
/// `loss + sum(model.losses)`, where a variable has a regularizer: fit adds their gradients
/// itself, nn::detail::add_penalty_gradients), which must be finite: a loss that is not (fluxion's
/// losses throw naming the input) becomes error_for(value, detail), which adds where it happened.
template <class Model, class LossFn, class Out, class Element, class ErrorFor>
auto checked_loss(Model& model, LossFn& loss_fn, const Out& out, const Element& element,
                  const std::vector<double>& class_weight, const ErrorFor& error_for) {
  auto data_loss = [&] {
    try {
      return call_loss(loss_fn, out, element, class_weight);
    } catch (const numeric_error& e) {
      throw error_for(e.value(), std::string(" (") + e.what() + ")");
    }
  }();
  using L = std::remove_cvref_t<decltype(data_loss)>;
  using LT = value_type_t<L>;
  using LD = device_t<L>;
  tensor<LT, LD> loss(std::move(data_loss));
  if constexpr (requires { model.added_losses(); }) {
    // What the layers added in this call (nn::add_loss, nn::activity_regularization): in the loss
    // the tape differentiates.
    const auto& added = model.added_losses();
    for (const auto& a : added) {
      static_assert(std::is_same_v<device_t<std::remove_cvref_t<decltype(a)>>, LD>,
                    "fluxion::fit / evaluate: the loss is on another device than the model's variables.");
      if constexpr (std::is_same_v<value_type_t<std::remove_cvref_t<decltype(a)>>, LT>) loss = tensor<LT, LD>(loss + a);
      else loss = tensor<LT, LD>(loss + cast<LT>(a));
    }
  }
  tensor<LT, LD> total = loss;
  if constexpr (requires { model.trainable_variables(); }) {
    const auto vars = model.trainable_variables();
    if (nn::has_regularizers(vars)) {
      using V = std::remove_cvref_t<decltype(*vars[0])>;
      using VT = typename V::value_type;
      static_assert(std::is_same_v<typename V::device_type, LD>,
                    "fluxion::fit / evaluate: the loss is on another device than the model's variables.");
      if constexpr (std::is_same_v<VT, LT>) total = nn::detail::with_penalties(total, vars);
      else total = fluxion::detail::materialize_unrecorded(total + cast<LT>(nn::detail::with_penalties(zeros<VT, LD>(shape{}), vars)));
    }
  }
  const double value = static_cast<double>(total.item());
  if (!std::isfinite(value)) {
    if constexpr (requires { model.added_losses(); }) {
      std::size_t i = 0;
      for (const auto& a : model.added_losses()) {
        const double v = static_cast<double>(a.item());
        if (!std::isfinite(v))
          throw error_for(value, " (loss " + std::to_string(i) + " of those the model's layers added, nn::add_loss or "
                                     "activity_regularization, is " + fluxion::detail::value_text(v) + ")");
        ++i;
      }
    }
    throw error_for(value, "");
  }
  return std::pair{std::move(loss), value};
}

/// f(), where a fluxion error it throws (a dataset's corrupt record, a model's wrong input shape, a
/// label out of range) is thrown again with `context()` before its message, which names the epoch
/// and step or the batch. numeric_errors pass as they are: fit's and evaluate's name the step already.
template <class Context, class F>
decltype(auto) with_context(const Context& context, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const numeric_error&) {
    throw;
  } catch (const error&) {
    fluxion::detail::rethrow_with_context(context());
  }
}

}  // namespace detail

/// The result of fx::evaluate.
struct evaluation {
  double loss = 0;           // mean over the examples: each batch's loss weighted by its size
  double accuracy = -1;      // sparse categorical accuracy, -1 when not computed (not integer labels)
  std::int64_t steps = 0;    // batches
  std::int64_t samples = 0;  // examples
  std::vector<std::pair<std::string, double>> metrics = {};  // evaluate_options' metrics, by name
};

/// Keras's compile(metrics=..., weighted_metrics=...) for fx::evaluate, as fit_options' fields.
struct evaluate_options {
  std::vector<metrics::metric*> metrics = {};
  std::vector<metrics::metric*> weighted_metrics = {};
};

namespace detail {
/// Validation's metrics into fit's logs and history, "val_" before their names.
template <class Evaluation>  // a template: compiled only where fit is
__attribute__((noinline)) void record_validation(const Evaluation& v, fit_logs& logs, fit_history& history) {
  logs.has_validation = true;
  logs.val_loss = v.loss;
  logs.val_accuracy = v.accuracy;
  history.val_loss.push_back(v.loss);
  if (v.accuracy >= 0) history.val_accuracy.push_back(v.accuracy);
  logs.val_metrics.clear();
  for (const auto& [name, value] : v.metrics) {
    logs.val_metrics.emplace_back("val_" + name, value);
    metric_lists::add_to_history(history, "val_" + name, value);
  }
}

/// fx::evaluate, with the metrics as fit holds them.
template <class Model, class LossFn, class Dataset>
evaluation evaluate_with(Model& model, LossFn& loss_fn, Dataset&& dataset, const metric_lists& metric_list) {
  all_tapes_paused quiet;
  metric_list.check("evaluate");
  metric_list.reset();
  evaluation e;
  double weighted = 0;
  metrics::detail::sparse_accuracy_counter accuracy;
  bool has_accuracy = false;
  // An error while a batch is read or evaluated names the batch ("evaluate: batch 3: ...").
  const auto context = [&] { return "evaluate: batch " + std::to_string(e.steps + 1) + ": "; };
  auto it = detail::with_context(context, [&] { return std::begin(dataset); });
  const auto last = std::end(dataset);
  for (; !(it == last); detail::with_context(context, [&] { ++it; })) {
    detail::with_context(context, [&] {
      auto&& element = *it;
      const auto& x = std::get<0>(element);
      const auto& y = std::get<1>(element);
      const auto out = detail::run_model(model, x, /*training=*/false);
      const double value = detail::checked_loss(model, loss_fn, out, element, {}, [&](double v, const std::string& detail) {
        return numeric_error("evaluate: the loss is " + fluxion::detail::value_text(v) + " at batch " +
                                 std::to_string(e.steps + 1) + detail,
                             v);
      }).second;
      const std::int64_t n = x.rank() > 0 ? x.shape()[0] : 1;
      weighted += value * static_cast<double>(n);
      e.samples += n;
      has_accuracy = detail::update_accuracy(accuracy, y, out) || has_accuracy;
      detail::update_metrics(metric_list, out, element, {});
    });
    ++e.steps;
  }
  if (e.steps == 0) throw invalid_argument("evaluate: the dataset gave no batch");
  e.loss = e.samples > 0 ? weighted / static_cast<double>(e.samples) : 0;
  if (has_accuracy) e.accuracy = accuracy.result();
  e.metrics = metric_list.results();
  return e;
}
}  // namespace detail

/// Keras's Model.evaluate: the loss (and, for integer labels and logits of shape (batch, classes),
/// the accuracy) of `model` in inference mode over every (x, y) batch of `dataset`, recorded by
/// no tape. With metrics (evaluate_options), each is reset first and updated with every batch, as
/// fit's.
template <class Model, class LossFn, class Dataset>
evaluation evaluate(Model& model, LossFn loss_fn, Dataset&& dataset, const evaluate_options& options = {}) {
  return detail::evaluate_with(model, loss_fn, dataset, detail::metric_lists{options.metrics, options.weighted_metrics});
}

namespace detail {
/// A dataset element's input: the element itself, or the first of an (x, y[, w]) pair or tuple.
template <class Element>
const auto& input_of(const Element& element) {
  if constexpr (requires { std::tuple_size<Element>::value; }) return std::get<0>(element);
  else return element;
}
/// A model's output as tensors: an expression materialized, and each part of a pair or tuple (a
/// model of several outputs, as the composite models' `std::pair{classes(h), score(h)}`).
template <class O>
auto output_tensors(O&& out) {
  using R = std::remove_cvref_t<O>;
  if constexpr (requires { typename R::first_type; typename R::second_type; })
    return std::pair{output_tensors(std::forward<O>(out).first), output_tensors(std::forward<O>(out).second)};
  else if constexpr (requires { std::tuple_size<R>::value; })
    return std::apply([](auto&&... p) { return std::tuple{output_tensors(std::forward<decltype(p)>(p))...}; },
                      std::forward<O>(out));
  else
    return tensor<value_type_t<R>, device_t<R>>(std::forward<O>(out));
}
/// The output of one batch in inference mode, as tensors (a masked model's mask is not kept).
template <class Model, class X>
auto predict_batch(Model& model, const X& x) {
  return output_tensors(run_model(model, x, /*training=*/false).output);
}
/// The batches' outputs concatenated along the batch axis, part by part for several outputs.
template <class O>
O concat_outputs(std::vector<O>& parts) {
  if constexpr (requires { std::tuple_size<O>::value; }) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto column = [&](auto index) {
        std::vector<std::tuple_element_t<decltype(index)::value, O>> c;
        c.reserve(parts.size());
        for (auto& p : parts) c.push_back(std::move(std::get<decltype(index)::value>(p)));
        return concat_outputs(c);
      };
      return O{column(std::integral_constant<std::size_t, I>{})...};
    }(std::make_index_sequence<std::tuple_size_v<O>>{});
  } else {
    if (parts.size() == 1) return std::move(parts[0]);
    return O(concat(std::move(parts), 0));
  }
}
}  // namespace detail

/// Keras's Model.predict: `model`'s outputs in inference mode, recorded by no tape, for every batch
/// of `dataset` (elements x, or (x, y[, sample_weight]) pairs and tuples, whose other parts are not
/// read), concatenated along the batch axis in the dataset's order; a model of several outputs (a
/// pair or tuple of tensors) gives each output so, in a pair or tuple, as Keras gives a list. An
/// error in a batch names it ("predict: batch 3: ..."); a dataset without batches is an
/// fx::invalid_argument.
///   fx::tensor<float> probabilities = fx::softmax(fx::predict(net, test.batch(1000)));
template <class Model, class Dataset>
  requires(!is_expression_v<std::remove_cvref_t<Dataset>>)
auto predict(Model& model, Dataset&& dataset) {
  detail::all_tapes_paused quiet;
  using O = decltype(detail::predict_batch(model, detail::input_of(*std::begin(dataset))));
  std::vector<O> parts;
  const auto context = [&] { return "predict: batch " + std::to_string(parts.size() + 1) + ": "; };
  auto it = detail::with_context(context, [&] { return std::begin(dataset); });
  const auto last = std::end(dataset);
  for (; !(it == last); detail::with_context(context, [&] { ++it; }))
    detail::with_context(context, [&] { parts.push_back(detail::predict_batch(model, detail::input_of(*it))); });
  if (parts.empty()) throw invalid_argument("predict: the dataset gave no batch");
  return detail::concat_outputs(parts);
}

/// Keras's Model.predict(x, batch_size): the outputs for the examples along x's first axis, computed
/// batch_size examples at a time (Keras's default 32), so that only one batch's activations are
/// alive at once; the same values as model(x, false). An expression x is materialized first.
template <class Model, class X>
  requires is_expression_v<std::remove_cvref_t<X>>
auto predict(Model& model, const X& examples, index_t batch_size = 32) {
  const auto x = fluxion::detail::materialize(fluxion::detail::as_expr<const X&>(examples));
  using T = value_type_t<decltype(x)>;
  using D = device_t<decltype(x)>;
  if (batch_size <= 0) throw invalid_argument("predict: batch_size = " + std::to_string(batch_size) + " must be positive");
  if (x.rank() == 0) throw shape_error("predict: x is a scalar; it needs a first axis of examples");
  const index_t n = x.shape()[0];
  if (n <= batch_size) return predict(model, std::vector<tensor<T, D>>{x});  // one batch: no copy
  std::vector<tensor<T, D>> batches;
  std::vector<index_t> begin(static_cast<std::size_t>(x.rank()), 0);
  std::vector<index_t> size(x.shape().begin(), x.shape().end());
  for (index_t start = 0; start < n; start += batch_size) {
    begin[0] = start;
    size[0] = std::min(batch_size, n - start);
    batches.push_back(tensor<T, D>(slice(x, begin, size)));
  }
  return predict(model, batches);
}

namespace detail {
/// fit's epochs, with Validation = no_validation or a dataset to evaluate after each epoch.
template <class Model, class Optimizer, class LossFn, class Dataset, class Validation>
fit_history fit_loop(Model& model, Optimizer& optimizer, LossFn& loss_fn, Dataset&& dataset, const fit_options& options,
                     Validation& validation) {
  if (options.epochs < 0) throw invalid_argument("fit: epochs = " + std::to_string(options.epochs) + " is negative");
  if (options.steps_per_epoch == 0 || options.steps_per_epoch < -1)
    throw invalid_argument("fit: steps_per_epoch = " + std::to_string(options.steps_per_epoch) +
                           " must be positive, or -1 for whole epochs");
  if (!options.out) throw invalid_argument("fit: options.out is a null stream");
  const detail::metric_lists metric_list{options.metrics, options.weighted_metrics};
  metric_list.check("fit");
  std::ostream& out = *options.out;
  const bool bar = options.verbose == 1 && detail::is_terminal(options.out);
  std::int64_t total = options.steps_per_epoch;
  if constexpr (detail::sized_range<std::remove_reference_t<Dataset>>) {
    if (total < 0) total = static_cast<std::int64_t>(std::size(dataset));
  } else if constexpr (requires { dataset.cardinality(); }) {
    if (total < 0 && dataset.cardinality() >= 0) total = static_cast<std::int64_t>(dataset.cardinality());
  }

  // An optimizer that trains across processes (fx::distributed::data_parallel) starts every process
  // from the same variables and optimizer state, the first process's (before the step count below
  // decides where a resumed run starts).
  if constexpr (requires { optimizer.on_fit_begin(model); }) optimizer.on_fit_begin(model);
  fit_history history;
  fit_logs logs;
  logs.global_step = static_cast<std::int64_t>(optimizer.iterations());
  int first_epoch = 0;
  std::int64_t skip = 0;  // batches of the first epoch already trained on
  if (options.resume) {
    const std::int64_t per_epoch = options.steps_per_epoch > 0 ? options.steps_per_epoch : total;
    if (per_epoch <= 0)
      throw invalid_argument("fit: resume needs the number of steps in an epoch: set steps_per_epoch, the dataset's "
                             "length is not known");
    first_epoch = static_cast<int>(std::min<std::int64_t>(logs.global_step / per_epoch, options.epochs));
    skip = first_epoch < options.epochs ? logs.global_step % per_epoch : 0;
    if (options.verbose >= 1 && logs.global_step > 0)
      out << "resuming at epoch " << first_epoch + 1 << "/" << options.epochs << ", step " << skip + 1 << " (global step "
          << logs.global_step + 1 << ")\n";
  }
  detail::interrupt_scope interrupt(options.handle_interrupt);
  auto stop_requested = [&] {
    bool stop = false;
    for (callback* c : options.callbacks) stop = stop || c->stop_training;
    return stop;
  };
  // Across processes (fx::distributed::data_parallel): one process's Ctrl-C (1) or a callback's stop
  // on one process (2) stops every process at the same step.
  auto agreed_flags = [&](unsigned flags) {
    if constexpr (requires { optimizer.any_process_flags(flags, logs); }) return optimizer.any_process_flags(flags, logs);
    else return flags;
  };
  const bool resuming = options.resume && logs.global_step > 0;
  for (callback* c : options.callbacks) {
    c->stop_training = false;
    if (resuming) c->on_train_resume(first_epoch, logs.global_step);
    else c->on_train_begin();
  }
  using clock = std::chrono::steady_clock;
  for (int epoch = first_epoch; epoch < options.epochs && !history.interrupted && !history.stopped_early; ++epoch) {
    for (callback* c : options.callbacks) {
      if (epoch == first_epoch && skip > 0) c->on_epoch_resume(epoch, skip);
      else c->on_epoch_begin(epoch);
    }
    metric_list.reset();
    metrics::mean epoch_loss;
    metrics::detail::sparse_accuracy_counter accuracy;
    bool has_accuracy = false;
    std::int64_t samples = 0;
    const auto start = clock::now();
    auto last_draw = start;
    logs = fit_logs{epoch, 0, logs.global_step, 0, -1, 0, 0, 0, 0};
    auto fetch_start = clock::now();
    // An error while a batch is read or trained on names the step ("fit: epoch 1, step 3 (global
    // step 3): sparse_softmax_cross_entropy: labels[5] = 10 is not in [0, 10)").
    const auto context = [&] {
      return "fit: epoch " + std::to_string(epoch + 1) + ", step " + std::to_string(logs.step + 1) + " (global step " +
             std::to_string(logs.global_step + 1) + "): ";
    };
    // Epoch n is pass n of an fx::data pipeline (the same order in a resumed run).
    auto it = detail::with_context(context, [&] {
      if constexpr (requires { dataset.begin(std::uint64_t{}); }) return dataset.begin(static_cast<std::uint64_t>(epoch));
      else return std::begin(dataset);
    });
    const auto last = std::end(dataset);
    if (epoch == first_epoch) {
      for (; logs.step < skip && !(it == last); detail::with_context(context, [&] { ++it; })) ++logs.step;
      if (logs.step < skip)
        throw invalid_argument("fit: resume: epoch " + std::to_string(epoch + 1) + " has " + std::to_string(logs.step) +
                               " batches, fewer than the " + std::to_string(skip) + " the optimizer's iteration count says were done");
    }
    const std::int64_t first_step = logs.skipped = logs.step;
    for (; !(it == last); fetch_start = clock::now(), detail::with_context(context, [&] { ++it; })) {
      if (options.steps_per_epoch > 0 && logs.step >= options.steps_per_epoch) break;
      double step_loss = 0;
      std::int64_t batch_size = 1;
      detail::with_context(context, [&] {
        auto&& element = *it;
        logs.data_seconds += std::chrono::duration<double>(clock::now() - fetch_start).count();
        const auto& x = std::get<0>(element);
        const auto& y = std::get<1>(element);
        if (x.rank() > 0) batch_size = x.shape()[0];
        gradient_tape tape;
        const auto out = detail::run_model(model, x, /*training=*/true);
        auto [loss, value] = detail::checked_loss(model, loss_fn, out, element, options.class_weight, [&](double v, const std::string& detail) {
          return numeric_error("fit: the loss is " + fluxion::detail::value_text(v) + " at epoch " + std::to_string(epoch + 1) +
                                   ", step " + std::to_string(logs.step + 1) + " (global step " +
                                   std::to_string(logs.global_step + 1) +
                                   "); the variables were not updated with this step's gradients" + detail,
                               v);
        });
        step_loss = value;
        auto vars = model.trainable_variables();
        auto gradients = tape.gradient(loss, vars);
        if (nn::has_regularizers(vars)) nn::detail::add_penalty_gradients(gradients, vars);
        optimizer.apply_gradients(gradients, vars);
        has_accuracy = detail::update_accuracy(accuracy, y, out) || has_accuracy;
        detail::update_metrics(metric_list, out, element, options.class_weight);
      });
      epoch_loss.update(step_loss, static_cast<double>(batch_size));  // a mean over examples, as evaluate's
      samples += batch_size;
      ++logs.step;
      ++logs.global_step;
      ++history.steps;
      const auto now = clock::now();
      logs.seconds = std::chrono::duration<double>(now - start).count();
      logs.loss = epoch_loss.result();
      logs.samples_per_second = logs.seconds > 0 ? static_cast<double>(samples) / logs.seconds : 0;
      // The running accuracy only where something shows it: on a device, reading it waits for the step.
      const bool draw = bar && (now - last_draw > std::chrono::milliseconds(100) || logs.step == total);
      bool shown = draw;
      for (callback* c : options.callbacks) shown = shown || c->reads_batch_metrics(logs);
      logs.accuracy = has_accuracy && shown ? accuracy.result() : -1;
      // As the accuracy: only where something shows them (the epoch's end always has them).
      if (!metric_list.empty()) logs.metrics = shown ? metric_list.results() : decltype(logs.metrics){};
      for (callback* c : options.callbacks) c->on_batch_end(logs);
      if (draw) {
        out << "\r" << detail::progress_line(logs, total) << "\x1b[K" << std::flush;
        last_draw = now;
      }
      const unsigned flags = agreed_flags((detail::fit_interrupted() ? 1u : 0u) | (stop_requested() ? 2u : 0u));
      if (flags & 1u) {
        history.interrupted = true;
        break;
      }
      if (flags & 2u) {
        history.stopped_early = true;
        break;
      }
    }
    if (logs.step == first_step) throw invalid_argument("fit: the dataset gave no batch in epoch " + std::to_string(epoch + 1));
    logs.accuracy = has_accuracy ? accuracy.result() : -1;
    if (!metric_list.empty()) logs.metrics = metric_list.results();
    // Across processes (fx::distributed::data_parallel): the loss, accuracy and metrics of every
    // process's examples, so that the history and every callback see the same numbers everywhere.
    if constexpr (requires { optimizer.reduce_epoch_logs(logs, samples); }) optimizer.reduce_epoch_logs(logs, samples);
    history.loss.push_back(logs.loss);
    if constexpr (requires { optimizer.learning_rate_schedule(); })  // the rate of the epoch's last update
      history.learning_rate.push_back(optimizer.learning_rate_schedule()(std::max<std::int64_t>(optimizer.updates() - 1, 0)));
    if (logs.accuracy >= 0) history.accuracy.push_back(logs.accuracy);
    for (const auto& [name, value] : logs.metrics) detail::metric_lists::add_to_history(history, name, value);
    if constexpr (!std::is_same_v<std::remove_cv_t<Validation>, detail::no_validation>) {
      if (!history.interrupted) {
        evaluation v = [&] {
          try {
            return detail::evaluate_with(model, loss_fn, validation, metric_list);
          } catch (const numeric_error& e) {
            throw numeric_error("fit: validation after epoch " + std::to_string(epoch + 1) + ": " + e.what(), e.value());
          }
        }();
        // Across processes (fx::distributed::data_parallel): over every process's validation data.
        if constexpr (requires { optimizer.reduce_evaluation(v, epoch); }) optimizer.reduce_evaluation(v, epoch);
        detail::record_validation(v, logs, history);
      }
    }
    if (bar) {
      out << "\r" << detail::progress_line(logs, logs.step) << "\x1b[K\n";
    } else if (options.verbose >= 1) {
      out << "epoch " << epoch + 1 << "/" << options.epochs << ": " << detail::progress_line(logs, 0) << std::endl;
    }
    if (history.interrupted && options.verbose >= 1) out << "interrupted (SIGINT) at global step " << logs.global_step << "\n";
    for (callback* c : options.callbacks) c->on_epoch_end(logs);
    if (agreed_flags(stop_requested() ? 2u : 0u) & 2u) history.stopped_early = true;
  }
  // Keras's fit ends with finalize_variable_values: with use_ema, the variables become their
  // moving averages (before on_train_end, so that a checkpoint saved there holds them). Not when
  // Ctrl-C interrupted the run: the checkpoint saved then must hold the run as it was, so that
  // fit_options::resume continues it exactly.
  if (history.steps > 0 && !history.interrupted) optimizer.finalize_variable_values(model.trainable_variables());
  for (callback* c : options.callbacks) c->on_train_end(logs);
  out << std::flush;
  return history;
}

}  // namespace detail

/// Trains `model` with `optimizer` on `dataset` for options.epochs epochs; loss_fn(logits, labels)
/// returns the scalar loss (a tensor of shape ()). Returns the per-epoch history.
template <class Model, class Optimizer, class LossFn, class Dataset>
fit_history fit(Model& model, Optimizer& optimizer, LossFn loss_fn, Dataset&& dataset, const fit_options& options = {}) {
  detail::no_validation none;
  return detail::fit_loop(model, optimizer, loss_fn, dataset, options, none);
}

/// The same, evaluating the model on `validation` (fx::evaluate) after each epoch.
template <class Model, class Optimizer, class LossFn, class Dataset, class Validation>
fit_history fit(Model& model, Optimizer& optimizer, LossFn loss_fn, Dataset&& dataset, const fit_options& options,
                Validation&& validation) {
  return detail::fit_loop(model, optimizer, loss_fn, dataset, options, validation);
}

}  // namespace fluxion
