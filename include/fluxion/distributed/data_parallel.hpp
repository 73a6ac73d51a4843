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
// Under fx::fit it also
// - starts every process from process 0's variables (on_fit_begin);
// - combines the epoch's training loss, accuracy and metrics over the processes before the history
//   and the callbacks see them (the loss and accuracy weighted by each process's examples, the
//   metrics as the mean of the processes' results, as Horovod's MetricAverageCallback), so that
//   early stopping and learning-rate callbacks decide alike everywhere. Validation is not combined:
//   give every process the same validation data.
//
// Every process must take the same number of steps (shard with drop_remainder, or set
// steps_per_epoch): a process that runs out of batches early is caught at its next collective,
// where the processes disagree, and every process throws a fluxion::invalid_argument that says
// which step each one was at. Save checkpoints and summaries from one process (comm.rank() == 0).
#pragma once

#include <string>
#include <vector>

#include "../fit.hpp"
#include "../optim/optimizer.hpp"
#include "communicator.hpp"

namespace fluxion::distributed {

class data_parallel {
 public:
  /// Wraps `optimizer` (kept by reference: checkpoints and callbacks such as reduce_lr_on_plateau
  /// take the wrapped optimizer itself).
  data_parallel(const communicator& comm, optim::optimizer& optimizer) : m_comm(&comm), m_optimizer(&optimizer) {}

  const communicator& comm() const noexcept { return *m_comm; }
  optim::optimizer& optimizer() const noexcept { return *m_optimizer; }
  std::int64_t iterations() const noexcept { return m_optimizer->iterations(); }
  const optim::schedule& learning_rate_schedule() const noexcept { return m_optimizer->learning_rate_schedule(); }
  double learning_rate() const { return m_optimizer->learning_rate(); }

  /// The mean of every process's gradients, element by element (one all-reduce for the list). A
  /// none gradient (a variable the loss does not reach) stays none, and must be none on every
  /// process.
  template <class T, class Device>
  std::vector<tensor<T, Device>> average_gradients(const std::vector<tensor<T, Device>>& gradients) const {
    if constexpr (!std::is_same_v<Device, cpu>) {
      detail::require_cpu<Device>();
      return gradients;
    } else {
      return average_on_cpu(gradients);
    }
  }

  /// Averages the gradients over the processes, then applies them with the wrapped optimizer
  /// (its clipping, weight decay and moving averages included, on the averaged gradients).
  template <class T, class Device>
  void apply_gradients(const std::vector<tensor<T, Device>>& gradients, const std::vector<variable<T, Device>*>& variables) {
    if (gradients.size() != variables.size())
      throw invalid_argument("distributed::data_parallel::apply_gradients: " + std::to_string(gradients.size()) +
                             " gradients for " + std::to_string(variables.size()) + " variables");
    m_optimizer->apply_gradients(average_gradients(gradients), variables);
  }
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

  /// fx::fit's hook: every process starts from process 0's variables (trainable or not).
  template <class Model>
  void on_fit_begin(Model& model) const {
    m_comm->broadcast(model.variables(), 0);
  }

  /// fx::fit's hook at an epoch's end: the loss and accuracy of every process's `samples`
  /// examples, and the mean of the processes' metrics.
  void reduce_epoch_logs(fit_logs& logs, std::int64_t samples) const {
    std::string what = "the logs of epoch " + std::to_string(logs.epoch + 1) + " (loss" +
                       (logs.accuracy >= 0 ? ", accuracy" : "");
    for (const auto& [name, value] : logs.metrics) what += ", " + name;
    what += ")";
    m_comm->agree("distributed::data_parallel: fit", what);
    std::vector<double> values{logs.loss * static_cast<double>(samples), static_cast<double>(samples),
                               logs.accuracy >= 0 ? logs.accuracy * static_cast<double>(samples) : 0.0};
    for (const auto& [name, value] : logs.metrics) values.push_back(value);
    m_comm->reduce_in_place(values.data(), static_cast<std::int64_t>(values.size()), reduction::sum,
                            "distributed::data_parallel: fit");
    const double all = values[1];
    if (all > 0) {
      logs.loss = values[0] / all;
      if (logs.accuracy >= 0) logs.accuracy = values[2] / all;
    }
    for (std::size_t i = 0; i < logs.metrics.size(); ++i)
      logs.metrics[i].second = values[3 + i] / static_cast<double>(m_comm->size());
  }

 private:
  template <class T>
  std::vector<tensor<T, cpu>> average_on_cpu(const std::vector<tensor<T, cpu>>& gradients) const {
    std::string what = "the gradients of step " + std::to_string(m_optimizer->iterations() + 1) + ": " +
                       std::to_string(gradients.size()) + " tensors";
    std::int64_t total = 0;
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      what += (i == 0 ? ": " : ", ") + (gradients[i].is_none() ? std::string("none") : detail::describe_shape<T>(gradients[i].shape()));
      if (!gradients[i].is_none()) total += gradients[i].size();
    }
    m_comm->agree("distributed::data_parallel::apply_gradients", what);
    if (m_comm->size() == 1) return gradients;
    std::vector<T> buffer(static_cast<std::size_t>(total));
    std::int64_t at = 0;
    for (const auto& g : gradients) {
      if (g.is_none()) continue;
      std::copy(g.data(), g.data() + g.size(), buffer.data() + at);
      at += g.size();
    }
    m_comm->reduce_in_place(buffer.data(), total, reduction::mean, "distributed::data_parallel::apply_gradients");
    std::vector<tensor<T, cpu>> out;
    out.reserve(gradients.size());
    at = 0;
    for (const auto& g : gradients) {
      if (g.is_none()) {
        out.push_back(g);
        continue;
      }
      tensor<T, cpu> mean(g.shape());
      std::copy(buffer.data() + at, buffer.data() + at + g.size(), mean.mutable_data());
      out.push_back(std::move(mean));
      at += g.size();
    }
    return out;
  }

  const communicator* m_comm;
  optim::optimizer* m_optimizer;
};

}  // namespace fluxion::distributed
