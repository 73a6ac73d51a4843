// TensorBoard output: fx::summary_writer (event files of scalars, histograms, images and text, see
// io/summary.hpp) and fx::tensorboard_callback, which fx::fit calls to log the running loss, accuracy
// and learning rate. Not in the umbrella header: as DESIGN.md asks of TensorBoard output, a program
// pays for it (about 0.45 s of compile time) only where it includes this header.
//
//   #include <fluxion/fluxion.hpp>
//   #include <fluxion/tensorboard.hpp>
//   fx::summary_writer log{"runs/cnn"};
//   fx::tensorboard_callback tensorboard{log, /*every_steps=*/10, &opt};
//   fx::fit(net, opt, loss, batches, {.epochs = 3, .callbacks = {&tensorboard}});
#pragma once

#include <cstdint>
#include <string>

#include "fit.hpp"
#include "io/summary.hpp"
#include "optim/optimizer.hpp"

namespace fluxion {

/// Writes the running loss and accuracy (and the learning rate, when given the optimizer) to a
/// TensorBoard summary_writer every `every_steps` steps, under `loss`, `accuracy`, `learning_rate`,
/// as the reference texts' tf.contrib.summary.scalar calls every 10 steps; at each epoch's end
/// `epoch_loss`, `epoch_accuracy`, `samples_per_second`, and with validation data `epoch_val_loss`
/// and `epoch_val_accuracy`; fit_options::metrics under their names (`mean_absolute_error` every
/// `every_steps` steps, `epoch_mean_absolute_error` and `epoch_val_mean_absolute_error`).
class tensorboard_callback : public callback {
 public:
  explicit tensorboard_callback(io::summary_writer& writer, std::int64_t every_steps = 10,
                                const optim::optimizer* optimizer = nullptr);
  bool reads_batch_metrics(const fit_logs& logs) const override { return logs.global_step % m_every == 0; }
  void on_batch_end(const fit_logs& logs) override;
  void on_epoch_end(const fit_logs& logs) override;
  void on_train_end(const fit_logs& logs) override;
  /// A resumed run writes again the steps after `global_step`: the writer marks the restart there
  /// (summary_writer::restart_at), and TensorBoard drops the interrupted run's events of those steps.
  void on_train_resume(int epoch, std::int64_t global_step) override;

 private:
  io::summary_writer* m_writer;
  std::int64_t m_every;
  const optim::optimizer* m_optimizer;
};

#if FLUXION_IO_DEFINITIONS
// In src/io.cpp where the program uses prebuilt kernels (io/prebuilt.hpp); inline otherwise.
FLUXION_IO_INLINE tensorboard_callback::tensorboard_callback(io::summary_writer& writer, std::int64_t every_steps,
                                                            const optim::optimizer* optimizer)
    : m_writer(&writer), m_every(every_steps), m_optimizer(optimizer) {
  if (every_steps < 1)
    throw invalid_argument("tensorboard_callback: every_steps = " + std::to_string(every_steps) + " must be at least 1");
}

FLUXION_IO_INLINE void tensorboard_callback::on_batch_end(const fit_logs& logs) {
  if (logs.global_step % m_every != 0) return;
  m_writer->scalar("loss", logs.loss, logs.global_step);
  if (logs.accuracy >= 0) m_writer->scalar("accuracy", logs.accuracy, logs.global_step);
  if (m_optimizer) m_writer->scalar("learning_rate", m_optimizer->learning_rate(), logs.global_step);
  for (const auto& [name, value] : logs.metrics) m_writer->scalar(name, value, logs.global_step);
}

FLUXION_IO_INLINE void tensorboard_callback::on_epoch_end(const fit_logs& logs) {
  m_writer->scalar("epoch_loss", logs.loss, logs.global_step);
  if (logs.accuracy >= 0) m_writer->scalar("epoch_accuracy", logs.accuracy, logs.global_step);
  if (logs.has_validation) {
    m_writer->scalar("epoch_val_loss", logs.val_loss, logs.global_step);
    if (logs.val_accuracy >= 0) m_writer->scalar("epoch_val_accuracy", logs.val_accuracy, logs.global_step);
  }
  for (const auto* list : {&logs.metrics, &logs.val_metrics})
    for (const auto& [name, value] : *list) m_writer->scalar("epoch_" + name, value, logs.global_step);
  m_writer->scalar("samples_per_second", logs.samples_per_second, logs.global_step);
  m_writer->flush();
}

FLUXION_IO_INLINE void tensorboard_callback::on_train_end(const fit_logs&) { m_writer->flush(); }

FLUXION_IO_INLINE void tensorboard_callback::on_train_resume(int, std::int64_t global_step) {
  m_writer->restart_at(global_step + 1);
}
#endif  // FLUXION_IO_DEFINITIONS
}  // namespace fluxion
