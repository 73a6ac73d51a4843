// Checkpoints: fx::checkpoint (a model's variables, an optimizer's slots and step, and any other
// tracked state in one safetensors file, written atomically and validated on restore; see
// io/checkpoint.hpp), fx::checkpoint_manager, fx::latest_checkpoint, and fx::checkpoint_callback,
// which fx::fit calls to save every N steps, at every epoch's end and when training stops. Not in the
// umbrella header (about 0.5 s of compile time): include it where a program saves or restores.
//
//   #include <fluxion/fluxion.hpp>
//   #include <fluxion/checkpoint.hpp>
//   fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
//   fx::checkpoint_manager manager{ckpt, "ckpt", {.max_to_keep = 3}};
//   ckpt.restore(manager.latest());    // TensorFlow's restore(manager.latest_checkpoint): none yet, no change
//   fx::checkpoint_callback save{manager, /*every_steps=*/500};
//   fx::fit(net, opt, loss, batches, {.epochs = 3, .callbacks = {&save}});
//
//   fx::best_checkpoint_callback best{ckpt, "ckpt/best.safetensors"};   // Keras's save_best_only
//   fx::fit(net, opt, loss, batches, {.epochs = 30, .callbacks = {&best}}, validation);
//   ckpt.restore(best.path());                          // the best epoch's model (restore_best_weights)
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "fit.hpp"
#include "io/checkpoint.hpp"

namespace fluxion {

/// Saves a checkpoint through a checkpoint_manager every `every_steps` steps (0: never), at the end
/// of every epoch, and when training ends, also by Ctrl-C or early stopping; the file's step is
/// the global step (the optimizer's iteration count).
class checkpoint_callback : public callback {
 public:
  explicit checkpoint_callback(checkpoint_manager& manager, std::int64_t every_steps = 0)
      : m_manager(&manager), m_every(every_steps) {
    if (every_steps < 0)
      throw invalid_argument("checkpoint_callback: every_steps = " + std::to_string(every_steps) + " is negative");
  }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  void on_batch_end(const fit_logs& logs) override {
    if (m_every > 0 && logs.global_step % m_every == 0) save(logs.global_step);
  }
  void on_epoch_end(const fit_logs& logs) override { save(logs.global_step); }
  void on_train_end(const fit_logs& logs) override { save(logs.global_step); }
  /// The last file written, empty before the first save.
  const std::string& last_saved() const noexcept { return m_last; }

 private:
  void save(std::int64_t step) {
    if (step == m_last_step) return;  // already saved at this step
    m_last = m_manager->save(step);
    m_last_step = step;
  }
  checkpoint_manager* m_manager;
  std::int64_t m_every;
  std::int64_t m_last_step = -1;
  std::string m_last;
};

struct best_checkpoint_options {
  fluxion::monitor monitor = fluxion::monitor::automatic;  // val_loss when fit has validation data
  double min_delta = 0;
};

/// Keras's ModelCheckpoint(save_best_only=True): saves `ckpt` to `path` (atomically, replacing the
/// previous best) at the end of each epoch whose monitored loss (or accuracy: fx::monitor) beats
/// the best so far by more than min_delta. Restoring that file after fit gives the best epoch's model, as Keras's
/// EarlyStopping(restore_best_weights=True) does. The file's metadata records what it watched, the
/// value and the epoch (`best_checkpoint/monitor`, `best_checkpoint/value`, `best_checkpoint/epoch`):
/// a resumed fit (fit_options::resume) starts from that best, so that its first epoch does not
/// replace a better model of the interrupted run.
class best_checkpoint_callback : public callback {
 public:
  using options = best_checkpoint_options;
  best_checkpoint_callback(checkpoint& ckpt, std::string path, options o = {})
      : m_checkpoint(&ckpt), m_path(std::move(path)), m_options(o) {
    if (m_path.empty()) throw invalid_argument("best_checkpoint_callback: the path is empty");
    if (!(o.min_delta >= 0))
      throw invalid_argument("best_checkpoint_callback: min_delta = " + std::to_string(o.min_delta) + " is negative");
  }
  bool reads_batch_metrics(const fit_logs&) const override { return false; }
  void on_train_begin() override {
    m_best = std::numeric_limits<double>::infinity();
    m_best_epoch = -1;
  }
  /// The best so far is the file's, when it has one saved watching the same monitor (it was saved
  /// by this callback in the run being resumed); otherwise, as on_train_begin. A file that cannot
  /// be read is an fx::io_error: the resumed run would otherwise replace it.
  void on_train_resume(int, std::int64_t) override {
    on_train_begin();
    if (io::detail::stat_path(checkpoint::file_name(m_path)).kind == io::detail::file_kind::missing) return;
    const io::safetensors file = io::safetensors::load(checkpoint::file_name(m_path), "best_checkpoint_callback");
    const std::string* watched = file.find_metadata("best_checkpoint/monitor");
    const std::string* value = file.find_metadata("best_checkpoint/value");
    const std::string* epoch = file.find_metadata("best_checkpoint/epoch");
    if (!watched || !value || !epoch || *watched != detail::monitor_label(m_options.monitor)) return;
    double best = 0;
    int best_epoch = -1;
    const auto [p1, e1] = std::from_chars(value->data(), value->data() + value->size(), best);
    const auto [p2, e2] = std::from_chars(epoch->data(), epoch->data() + epoch->size(), best_epoch);
    if (e1 != std::errc() || p1 != value->data() + value->size() || std::isnan(best) || e2 != std::errc() ||
        p2 != epoch->data() + epoch->size() || best_epoch < 0)
      throw io_error("best_checkpoint_callback: '" + checkpoint::file_name(m_path) + "': its metadata best_checkpoint/value = '" +
                     *value + "' and best_checkpoint/epoch = '" + *epoch + "' are not a number and an epoch");
    m_best = m_options.monitor.maximized() ? -best : best;
    m_best_epoch = best_epoch;
  }
  void on_epoch_end(const fit_logs& logs) override {
    const double value = detail::monitored_loss(logs, m_options.monitor, "best_checkpoint_callback");
    if (!(value < m_best - m_options.min_delta)) return;
    io::safetensors file = m_checkpoint->to_safetensors();
    file.set_metadata("best_checkpoint/monitor", detail::monitor_label(m_options.monitor));
    file.set_metadata("best_checkpoint/value", optim::detail::format_number(detail::monitored_value(value, m_options.monitor)));
    file.set_metadata("best_checkpoint/epoch", std::to_string(logs.epoch));
    m_checkpoint->save(m_path, file);
    m_best = value;
    m_best_epoch = logs.epoch;
  }
  /// Where the best epoch's checkpoint is.
  const std::string& path() const noexcept { return m_path; }
  /// The epoch (from 0) saved there, or -1 before any save.
  int best_epoch() const noexcept { return m_best_epoch; }
  /// Its monitored value (before any save, infinity, or minus infinity for an accuracy).
  double best() const noexcept { return detail::monitored_value(m_best, m_options.monitor); }

 private:
  checkpoint* m_checkpoint;
  std::string m_path;
  options m_options;
  double m_best = std::numeric_limits<double>::infinity();
  int m_best_epoch = -1;
};

}  // namespace fluxion
