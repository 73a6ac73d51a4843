// fluxion::distributed::data_parallel: synchronous data-parallel training over MPI, as Horovod's
// DistributedOptimizer (and tf.distribute's MultiWorkerMirroredStrategy) do it.
//
//   fx::distributed::communicator comm{argc, argv};
//   fx::optim::adam adam{{.learning_rate = 1e-3f}};
//   fx::distributed::data_parallel opt{comm, adam};
//   auto shard = train.shard(comm.size(), comm.rank()).batch(64, /*drop_remainder=*/true);
//   fx::fit(model, opt, loss, shard, options);         // or opt.apply_gradients in a loop of your own
//
// Each process computes the gradients of its own batch; apply_gradients averages them over the
// processes (every gradient packed into one buffer: one all-reduce per step) and then lets the
// wrapped optimizer update the variables, so that every process takes the same step, the step of
// one process on the union of the batches (where the processes' batches have the same size).
//
// With the wrapped optimizer's gradient accumulation (gradient_accumulation_steps = k), the calls
// between updates send no gradients; the update call exchanges each process's sum of the cycle, once
// (PyTorch DDP's no_sync(), Horovod's backward_passes_per_step).
//
// Under fx::fit it also
// - starts every process from process 0's variables (on_fit_begin);
// - combines the epoch's training loss, accuracy and metrics, and the validation's, over the
//   processes before the history and the callbacks see them (the loss and accuracy weighted by each
//   process's examples, the metrics as the mean of the processes' results, as Horovod's
//   MetricAverageCallback), so that early stopping and learning-rate callbacks decide alike
//   everywhere (the validation data may be the same on every process, or a shard of it);
// - stops every process at the same step where any one is interrupted (Ctrl-C) or a callback on
//   any one stops training, instead of leaving the others waiting for it.
//
// Every process must take the same number of steps (shard with drop_remainder, or set
// steps_per_epoch): a process that runs out of batches early is caught at its next collective,
// where the processes disagree, and every process throws a fluxion::invalid_argument that says
// which step each one was at. Save checkpoints and summaries from one process (comm.rank() == 0).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "../fit.hpp"
#include "../optim/optimizer.hpp"
#include "../tensor/creation.hpp"
#include "communicator.hpp"
#if !defined(__has_include) || __has_include(<mpi.h>)  // otherwise communicator.hpp said what is missing

namespace fluxion::distributed {

class data_parallel {
 public:
  /// Wraps `optimizer` (kept by reference: checkpoints and callbacks such as reduce_lr_on_plateau
  /// take the wrapped optimizer itself).
  data_parallel(const communicator& comm, optim::optimizer& optimizer) : m_comm(&comm), m_optimizer(&optimizer) {}

  const communicator& comm() const noexcept { return *m_comm; }
  optim::optimizer& optimizer() const noexcept { return *m_optimizer; }
  /// The wrapped optimizer where one is asked for: `fx::reduce_lr_on_plateau plateau{opt}`.
  operator optim::optimizer&() const noexcept { return *m_optimizer; }
  std::int64_t iterations() const noexcept { return m_optimizer->iterations(); }
  std::int64_t updates() const noexcept { return m_optimizer->updates(); }
  const optim::schedule& learning_rate_schedule() const noexcept { return m_optimizer->learning_rate_schedule(); }
  double learning_rate() const { return m_optimizer->learning_rate(); }

  /// The mean of every process's gradients, element by element (one all-reduce for the list). A
  /// none gradient (a variable the loss does not reach) stays none, and must be none on every
  /// process.
  template <class T, class Device>
  std::vector<tensor<T, Device>> average_gradients(const std::vector<tensor<T, Device>>& gradients) {
    return average_gradients(std::vector<tensor<T, Device>>(gradients));
  }
  /// The same from a list the caller gives away (tape.gradient's result): a gradient that nothing
  /// else holds is averaged in its own buffer, without a copy.
  template <class T, class Device>
  std::vector<tensor<T, Device>> average_gradients(std::vector<tensor<T, Device>>&& gradients) {
    if constexpr (!std::is_same_v<Device, cpu>) {
      detail::require_cpu<Device>();
      return std::move(gradients);
    } else {
      return average_on_cpu(std::move(gradients));
    }
  }

  /// Averages the gradients over the processes, then applies them with the wrapped optimizer
  /// (its clipping, weight decay and moving averages included, on the averaged gradients).
  /// With the optimizer's gradient accumulation (gradient_accumulation_steps = k), as PyTorch's
  /// DistributedDataParallel under no_sync() and Horovod's backward_passes_per_step: the calls
  /// between updates add each process's own gradients to its accumulators and send no gradients; the
  /// k-th call averages each process's sum of the cycle (accumulator + gradient) in one exchange,
  /// and the update takes that mean: the step of one process on the union of every process's k
  /// batches, as before, for one exchange in k.
  template <class T, class Device>
  void apply_gradients(const std::vector<tensor<T, Device>>& gradients, const std::vector<variable<T, Device>*>& variables) {
    apply_gradients(std::vector<tensor<T, Device>>(gradients), variables);
  }
  /// The same with tape.gradient's list, whose gradients are averaged in their own buffers.
  template <class T, class Device>
  void apply_gradients(std::vector<tensor<T, Device>>&& gradients, const std::vector<variable<T, Device>*>& variables) {
    if (gradients.size() != variables.size())
      throw invalid_argument("distributed::data_parallel::apply_gradients: " + std::to_string(gradients.size()) +
                             " gradients for " + std::to_string(variables.size()) + " variables");
    const std::int64_t cycle = m_optimizer->gradient_accumulation_steps();
    if (cycle > 1 && (m_optimizer->iterations() + 1) % cycle != 0) {
      m_optimizer->apply_gradients(gradients, variables);  // between updates: this process's alone
      return;
    }
    std::vector<std::pair<variable<T, Device>*, tensor<T, Device>>> sums;  // accumulators folded in, kept
    if constexpr (std::is_same_v<Device, cpu>)
      if (cycle > 1) sums = fold_accumulators(gradients, variables);
    std::vector<tensor<T, Device>> averaged = average_gradients(std::move(gradients));
    try {
      m_optimizer->apply_gradients(averaged, variables);
    } catch (...) {
      for (auto& [slot, value] : sums) slot->assign(value);  // the optimizer changed nothing either
      throw;
    }
  }

  /// How many times apply_gradients has exchanged gradients with the other processes.
  std::int64_t gradient_exchanges() const noexcept { return m_exchanges; }
  template <class T, class Device>
  void apply_gradients(const std::vector<tensor<T, Device>>& gradients,
                       std::initializer_list<std::reference_wrapper<std::type_identity_t<variable<T, Device>>>> variables) {
    apply_gradients(gradients, optim::detail::pointers_to(variables));
  }
  template <class T, class Device>
  void apply_gradients(std::initializer_list<tensor<T, Device>> gradients,
                       std::initializer_list<std::reference_wrapper<std::type_identity_t<variable<T, Device>>>> variables) {
    apply_gradients(std::vector<tensor<T, Device>>(gradients), variables);
  }

  template <class T, class Device>
  void finalize_variable_values(const std::vector<variable<T, Device>*>& variables) {
    m_optimizer->finalize_variable_values(variables);
  }

  /// fx::fit's hook: every process starts from process 0's variables (trainable or not) and
  /// optimizer state, as Horovod's BroadcastGlobalVariablesCallback: a run resumed from a
  /// checkpoint that only process 0 could read continues on every process.
  template <class Model>
  void on_fit_begin(Model& model) {
    m_comm->broadcast(model.variables(), 0);
    broadcast_optimizer_state(model.trainable_variables());
  }

  /// Process 0's optimizer state on every process (Horovod's broadcast_optimizer_state): its step
  /// count, its learning rate where it is a constant (a rate reduce_lr_on_plateau changed and a
  /// checkpoint restored), and the slots of these variables (momentum, Adam's moments, ...),
  /// which every process creates first where it has none yet.
  template <class T, class Device>
  void broadcast_optimizer_state(const std::vector<variable<T, Device>*>& variables) {
    const bool constant = m_optimizer->learning_rate_schedule().is_constant();
    const tensor<double> mine = {static_cast<double>(m_optimizer->iterations()), constant ? m_optimizer->learning_rate() : 0.0,
                                 constant ? 1.0 : 0.0, static_cast<double>(m_optimizer->updates())};
    const std::vector<double> root = m_comm->broadcast(mine, 0).to_vector();
    m_optimizer->set_iterations(static_cast<std::int64_t>(root[0]));
    m_optimizer->set_updates(static_cast<std::int64_t>(root[3]));
    if (constant && root[2] == 1.0) m_optimizer->set_learning_rate(root[1]);
    m_optimizer->build(variables);
    const auto specs = m_optimizer->slot_specs();
    std::vector<variable<T, Device>*> slots;
    for (variable<T, Device>* v : variables)
      if (v != nullptr && v->trainable())
        for (const auto& spec : specs) slots.push_back(m_optimizer->get_slot(*v, spec.name));
    m_comm->broadcast(slots, 0);
  }

  /// fx::fit's hook after every step and at every epoch's end: the bitwise or of the processes'
  /// flags (1: interrupted, 2: a callback stops training), so that one process's Ctrl-C or early
  /// stop stops every process at the same step instead of leaving the others waiting for it.
  unsigned any_process_flags(unsigned flags, const fit_logs& logs) const {
    return static_cast<unsigned>(m_comm->agree("distributed::data_parallel: fit",
                                               "whether to stop after step " + std::to_string(logs.global_step) +
                                                   " (epoch " + std::to_string(logs.epoch + 1) + ")",
                                               flags));
  }

  /// fx::fit's hook after each validation: the loss and accuracy over every process's validation
  /// examples, and the mean of the processes' metrics (the same numbers where every process was
  /// given the same validation data; a sharded validation set is combined).
  void reduce_evaluation(evaluation& v, int epoch) const {
    combine("the validation after epoch " + std::to_string(epoch + 1), v.loss, v.accuracy, v.metrics, v.samples);
  }

  /// fx::fit's hook at an epoch's end: the loss and accuracy of every process's `samples`
  /// examples, and the mean of the processes' metrics.
  void reduce_epoch_logs(fit_logs& logs, std::int64_t samples) const {
    combine("the logs of epoch " + std::to_string(logs.epoch + 1), logs.loss, logs.accuracy, logs.metrics, samples);
  }

 private:
  /// The loss and accuracy weighted by each process's examples, the metrics' mean, in one message,
  /// once the processes agree that they are combining the same numbers (`what`).
  void combine(const std::string& what, double& loss, double& accuracy,
               std::vector<std::pair<std::string, double>>& metrics, std::int64_t samples) const {
    std::string names = what + " (loss" + (accuracy >= 0 ? ", accuracy" : "");
    for (const auto& [name, value] : metrics) names += ", " + name;
    m_comm->agree("distributed::data_parallel: fit", names + ")");
    std::vector<double> values{loss * static_cast<double>(samples), static_cast<double>(samples),
                               accuracy >= 0 ? accuracy * static_cast<double>(samples) : 0.0};
    for (const auto& [name, value] : metrics) values.push_back(value);
    m_comm->reduce_in_place(values.data(), static_cast<std::int64_t>(values.size()), reduction::sum,
                            "distributed::data_parallel: fit");
    const double all = values[1];
    if (all > 0) {
      loss = values[0] / all;
      if (accuracy >= 0) accuracy = values[2] / all;
    }
    for (std::size_t i = 0; i < metrics.size(); ++i) metrics[i].second = values[3 + i] / static_cast<double>(m_comm->size());
  }

  /// Gradients of at least this many elements are all-reduced straight from the gradient into the
  /// result; smaller ones are packed into one buffer and all-reduced together (Horovod's tensor
  /// fusion), so that a model's many biases cost one message instead of one each.
  static constexpr std::int64_t fuse_below = std::int64_t{1} << 16;

  /// At the update of an accumulation cycle: each trained gradient becomes this process's sum of
  /// the cycle (its accumulator + the gradient), and the accumulators are zeroed, so that the
  /// optimizer's (accumulator + gradient) / k is the mean over the processes once the sums are
  /// averaged. Returns the accumulators' values, for apply_gradients to put back if the update
  /// throws. Where the call is bad (a null pointer, a gradient of the wrong shape), folds nothing
  /// and leaves the optimizer to name the fault.
  template <class T>
  std::vector<std::pair<variable<T, cpu>*, tensor<T, cpu>>> fold_accumulators(std::vector<tensor<T, cpu>>& gradients,
                                                                            const std::vector<variable<T, cpu>*>& variables) {
    std::vector<std::size_t> folded;
    std::vector<std::pair<variable<T, cpu>*, tensor<T, cpu>>> sums;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      if (variables[i] == nullptr) return {};
      if (!variables[i]->trainable()) continue;
      if (gradients[i].is_none() || gradients[i].shape() != variables[i]->shape()) return {};
      if (variable<T, cpu>* slot = m_optimizer->get_slot(*variables[i], "gradient_accumulator")) {
        folded.push_back(i);
        sums.emplace_back(slot, slot->peek());
      }
    }
    for (std::size_t k = 0; k < folded.size(); ++k)  // one fused SIMD statement each
      gradients[folded[k]] = tensor<T, cpu>(sums[k].second + gradients[folded[k]]);
    for (auto& [slot, value] : sums) slot->assign(zeros<T>(value.shape()));
    return sums;
  }

  template <class T>
  std::vector<tensor<T, cpu>> average_on_cpu(std::vector<tensor<T, cpu>> gradients) {
    constexpr const char* who = "distributed::data_parallel::apply_gradients";
    ++m_exchanges;
    std::string what = "the gradients of step " + std::to_string(m_optimizer->iterations() + 1) + ": " +
                       std::to_string(gradients.size()) + " tensors";
    std::int64_t fused = 0;
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      const auto& g = gradients[i];
      what += (i == 0 ? ": " : ", ") + (g.is_none() ? std::string("none") : detail::describe_shape<T>(g.shape()));
      if (!g.is_none() && g.size() < fuse_below) fused += g.size();
    }
    m_comm->agree(who, what);
    if (m_comm->size() == 1) return gradients;
    if (m_fusion.size() < static_cast<std::size_t>(fused) * sizeof(T)) m_fusion.resize(static_cast<std::size_t>(fused) * sizeof(T));
    T* const buffer = reinterpret_cast<T*>(m_fusion.data());
    std::vector<tensor<T, cpu>> out;
    out.reserve(gradients.size());
    std::int64_t at = 0;
    for (auto& g : gradients) {
      if (g.is_none()) {
        out.push_back(g);
      } else if (g.size() < fuse_below) {
        std::copy(g.data(), g.data() + g.size(), buffer + at);
        at += g.size();
        out.emplace_back(g.shape());
      } else if (g.use_count() == 1) {  // this list's alone: nobody can see it change
        m_comm->reduce(static_cast<const T*>(nullptr), g.mutable_data(), g.size(), reduction::mean, who);
        out.push_back(std::move(g));
      } else {
        out.emplace_back(g.shape());
        m_comm->reduce(g.data(), out.back().mutable_data(), g.size(), reduction::mean, who);
      }
    }
    if (fused == 0) return out;
    m_comm->reduce(static_cast<const T*>(nullptr), buffer, fused, reduction::mean, who);
    at = 0;
    for (auto& o : out) {
      if (o.is_none() || o.size() >= fuse_below) continue;
      std::copy(buffer + at, buffer + at + o.size(), o.mutable_data());
      at += o.size();
    }
    return out;
  }

  const communicator* m_comm;
  optim::optimizer* m_optimizer;
  std::vector<std::byte> m_fusion;  // the small gradients' buffer, kept from step to step
  std::int64_t m_exchanges = 0;
};

}  // namespace fluxion::distributed

#endif  // __has_include(<mpi.h>)
