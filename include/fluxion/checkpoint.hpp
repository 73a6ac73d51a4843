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
//   if (auto last = fx::latest_checkpoint("ckpt")) ckpt.restore(*last);
//   fx::checkpoint_callback save{manager, /*every_steps=*/500};
//   fx::fit(net, opt, loss, batches, {.epochs = 3, .callbacks = {&save}});
#pragma once

#include <cstdint>
#include <string>

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

}  // namespace fluxion
