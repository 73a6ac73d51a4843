// fx::optim::optimizer: what every optimizer shares: the iteration counter, the learning rate (a
// constant or a schedule), decoupled weight decay, the slot variables, the checks, and the fused
// update loop.
//
//   fx::optim::adam opt{1e-3};
//   std::vector<fx::variable<float>*> vars = model.trainable_variables();
//   {
//     fx::gradient_tape tape;
//     fx::tensor<float> loss = fx::reduce_mean(fx::square(y - model(x)));
//     opt.apply_gradients(tape.gradient(loss, vars), vars);   // one fused pass per variable (one kernel in all on a GPU)
//   }
//   opt.iterations();                                          // 1
//   for (auto& [name, slot] : opt.slot_variables<float, fx::cpu>()) save(name, slot->peek());
//   // names: "dense/kernel/momentum", "dense/kernel/velocity", ...
//
// apply_gradients checks every (gradient, variable) pair before it changes anything, so a bad
// call leaves the variables, the slots and the counter as they were. Then, for each variable, one
// loop reads the gradient, the value and the slots and writes the new value and new slots (xsimd
// batches, split across the thread pool above 32768 elements), swapped in with variable::assign:
// tensors read from a variable earlier never change (principle 1). The new values go into fresh
// buffers, or into the old ones when nothing but the variable holds them (nobody can tell). The loop is compiled once per optimizer and element type, not once per expression type.
// On fx::cuda the variables of one apply_gradients are updated by one multi-tensor kernel (as
// PyTorch's foreach optimizers), not a kernel each: backend/cuda/update.hpp.
// The update formulas are Keras 3's (keras/src/optimizers); each header says where PyTorch's
// differ. As in Keras: a variable that is not trainable is skipped (its gradient is not looked
// at), an empty list of gradients is a no-op, weight_decay (any optimizer) is decoupled,
// w -= w * weight_decay * learning_rate before the update, and NaN or inf in a gradient is not
// checked here (a pass over every gradient per step); fluxion's losses, fit and compile_step throw
// fluxion::numeric_error for a NaN or infinite loss before its gradients exist. Slots are created on the first apply_gradients (or by build()), owned by the
// optimizer, and keyed by the variable's id().
//
// Gradient accumulation (every optimizer's gradient_accumulation_steps, Keras's): with k >= 2, a
// call adds its gradients to a slot `gradient_accumulator` per variable and leaves the variables;
// every k-th call updates them from the mean of the k calls' gradients (clipped then, weight decay
// then) and zeroes the accumulators. One fused pass per call either way, in place. iterations()
// counts calls, as Keras's does (fx::fit's step count); updates() counts updates (its own counter,
// saved by checkpoints), and the schedule,
// Adam's bias correction and the moving average follow updates(), where Keras's follow the calls:
// k calls with batches of b examples and a mean loss then give what one call with the k * b
// examples gives, to rounding. A checkpoint saves the accumulators (slots) and iterations(), which
// places the next call in its cycle.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../backend/cpu/detail/xsimd.hpp"

#include "../backend/cpu/detail/simd_arch.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../core/config.hpp"
#include "../core/error.hpp"
#include "../core/math.hpp"
// The facade, not tensor/variable.hpp alone: variable.hpp does not compile on its own at present.
#include "../tensor.hpp"
#include "schedules.hpp"

// Where Thrust's device system is compiled in (nvcc, or a host compiler with
// THRUST_DEVICE_SYSTEM=THRUST_DEVICE_SYSTEM_OMP), optimizers also update fx::cuda variables, each
// with one fused kernel. Every file of a program that uses an optimizer must agree on this.
#if (defined(__CUDACC__) || defined(THRUST_DEVICE_SYSTEM)) && __has_include(<thrust/for_each.h>)
#define FLUXION_DEVICE_OPTIMIZERS 1
#include "../backend/cuda/update.hpp"
#else
#define FLUXION_DEVICE_OPTIMIZERS 0
#endif

namespace fluxion::optim {

namespace detail {

/// The variables of `apply_gradients(grads, {w, b})` as the pointer list the checks and updates take.
template <class T, class Device>
std::vector<variable<T, Device>*> pointers_to(std::initializer_list<std::reference_wrapper<variable<T, Device>>> variables) {
  std::vector<variable<T, Device>*> pointers;
  pointers.reserve(variables.size());
  for (variable<T, Device>& v : variables) pointers.push_back(&v);
  return pointers;
}

/// The most slots an optimizer keeps per variable (Adam with amsgrad, centered RMSprop with momentum).
inline constexpr std::size_t max_slots = 3;
/// Elements per thread-pool task; task boundaries never depend on the thread count.
inline constexpr index_t update_task_elements = 32768;

/// What one fused update reads and writes. A new buffer is either distinct from the old one or the
/// same buffer (an update in place): each element is read before it is written.
template <class T>
struct update_buffers {
  index_t size = 0;
  const T* gradient = nullptr;
  const T* value = nullptr;
  T* new_value = nullptr;
  std::array<const T*, max_slots> slots{};
  std::array<T*, max_slots> new_slots{};
  bool on_device = false;  // the pointers are fx::cuda memory: the update runs as one device kernel
};

/// The buffers of every variable one apply_gradients updates (of one element type and device).
template <class T>
using update_list = std::span<const update_buffers<T>>;

/// The per-call scalars: the learning rate at this iteration, the decoupled weight decay, and the
/// iteration count before this call (Keras's `iterations`; its local_step is iteration + 1).
struct step_constants {
  double learning_rate = 0;
  double weight_decay = 0;
  std::int64_t iteration = 0;
};

// Scalars (also on a device) and xsimd batches (host only: nvcc compiles no vector types for the
// device, so a host-device template must never be instantiated with one).
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V sqrt_of(const V& x) {
  return ::fluxion::math::sqrt(x);
}
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V max_of(const V& a, const V& b) {
  return a < b ? b : a;
}
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V abs_of(const V& x) {
  return x < V(0) ? -x : x;
}
/// -1, 0 or 1 (Keras's ops.sign; 0 for 0).
template <class V>
  requires std::is_floating_point_v<V>
FLUXION_HOST_DEVICE V sign_of(const V& x) {
  return x > V(0) ? V(1) : x < V(0) ? V(-1) : V(0);
}
template <class V>
FLUXION_ALWAYS_INLINE V sqrt_of(const V& x) {
  return xsimd::sqrt(x);
}
template <class V>
FLUXION_ALWAYS_INLINE V max_of(const V& a, const V& b) {
  return xsimd::max(a, b);
}
template <class V>
FLUXION_ALWAYS_INLINE V abs_of(const V& x) {
  return xsimd::abs(x);
}
template <class V>
FLUXION_ALWAYS_INLINE V sign_of(const V& x) {
  using T = typename V::value_type;
  return xsimd::select(x > V(T(0)), V(T(1)), xsimd::select(x < V(T(0)), V(T(-1)), V(T(0))));
}

/// Defines an optimizer step functor's operator()(V g, V& w, S& s) from one body: host-only for
/// xsimd batches (the cpu loop), host-device for scalars (the cpu tail and the device kernel).
/// A functor, not a lambda: nvcc's host-device lambdas cannot be generic.
#define FLUXION_OPTIMIZER_STEP(...)                         \
  template <class V, class S>                               \
    requires(!std::is_floating_point_v<V>)                  \
  void operator()(V g, V& w, S& s) const {                  \
    (void)s; /* plain SGD keeps no slots */                 \
    __VA_ARGS__                                             \
  }                                                         \
  template <class V, class S>                               \
    requires std::is_floating_point_v<V>                    \
  FLUXION_HOST_DEVICE void operator()(V g, V& w, S& s) const { \
    (void)s;                                                \
    __VA_ARGS__                                             \
  }

/// Runs step(gradient, value, slots) over every element of host buffers: V is an xsimd batch of
/// T, then T for the tail (and for everything where xsimd knows no architecture). `value` and the
/// Slots entries of `slots` are read, updated in place by step, and stored into the new buffers.
/// Decoupled weight decay runs first, as Keras's _apply_weight_decay does. Not inline: with
/// FLUXION_PREBUILT_KERNELS the optimizers' specializations are `extern template`
/// (nn/prebuilt.hpp) and compiled once, in src/nn_kernels.cpp. It holds no device code, so it is
/// the same in every file of a program, nvcc's included.
template <std::size_t Slots, class T, class Step>
void host_fused_update(const update_buffers<T>& b, const step_constants& c, const Step& step) {
  auto run = [&](index_t begin, index_t end) {
    // Locals, not captures: a store through xsimd may alias anything, so pointers and constants
    // read through references would be read again after every store (Adam over 1M floats, one
    // thread: 0.61 -> 0.37 ms).
    const update_buffers<T> buffers = b;
    const Step st = step;
    const bool decay = c.weight_decay != 0;
    const T weight_decay = static_cast<T>(c.weight_decay), learning_rate = static_cast<T>(c.learning_rate);
    index_t i = begin;
    if constexpr (!std::is_same_v<::fluxion::detail::simd_arch, xsimd::unavailable>) {
      using batch = xsimd::batch<T, ::fluxion::detail::simd_arch>;
      constexpr index_t width = static_cast<index_t>(batch::size);
      for (; i + width <= end; i += width) {
        const batch g = batch::load_unaligned(buffers.gradient + i);
        batch w = batch::load_unaligned(buffers.value + i);
        std::array<batch, Slots> s;
        if constexpr (Slots > 0) for (std::size_t k = 0; k < Slots; ++k) s[k] = batch::load_unaligned(buffers.slots[k] + i);
        if (decay) w = w - w * batch(weight_decay) * batch(learning_rate);
        st(g, w, s);
        w.store_unaligned(buffers.new_value + i);
        if constexpr (Slots > 0) for (std::size_t k = 0; k < Slots; ++k) s[k].store_unaligned(buffers.new_slots[k] + i);
      }
    }
    for (; i < end; ++i) {
      const T g = buffers.gradient[i];
      T w = buffers.value[i];
      std::array<T, Slots> s;
      if constexpr (Slots > 0) for (std::size_t k = 0; k < Slots; ++k) s[k] = buffers.slots[k][i];
      if (decay) w = w - w * weight_decay * learning_rate;
      st(g, w, s);
      buffers.new_value[i] = w;
      if constexpr (Slots > 0) for (std::size_t k = 0; k < Slots; ++k) buffers.new_slots[k][i] = s[k];
    }
  };
  const index_t n = b.size;
  const index_t tasks = (n + update_task_elements - 1) / update_task_elements;
  if (tasks <= 1) {
    run(0, n);
    return;
  }
  fluxion::detail::parallel_for(tasks, [&](index_t t) {
    const index_t begin = t * update_task_elements;
    run(begin, std::min(n, begin + update_task_elements));
  });
}

/// One optimizer step over the buffers of every variable of a call: on the device with one fused
/// multi-tensor kernel (where the device backend is compiled in), else host_fused_update for each.
template <std::size_t Slots, class T, class Step>
inline void fused_update(update_list<T> list, const step_constants& c, const Step& step) {
  if (list.empty()) return;
  if (list.front().on_device) {
#if FLUXION_DEVICE_OPTIMIZERS
    ::fluxion::detail::device_fused_update<Slots>(list, c, step);
    return;
#else
    throw invalid_argument(
        "apply_gradients: the variables are on fluxion::cuda, but this file was compiled without the device "
        "backend; include <fluxion/cuda.hpp> and compile with nvcc (or Thrust's OpenMP system)");
#endif
  }
  for (const update_buffers<T>& b : list) host_fused_update<Slots>(b, c, step);
}

/// The moving average's step (use_ema): with the variable's new value as the "gradient" and the
/// average as the value, average = momentum * average + (1 - momentum) * variable, in the same
/// fused, in-place pass (on the device too) as the optimizers' updates.
template <class T>
struct ema_step {  // a functor, not a lambda, so that it also runs on a device (see sgd::step)
  T momentum, one_minus_momentum;
  FLUXION_OPTIMIZER_STEP(w = w * V(momentum) + g * V(one_minus_momentum);)
};

/// Gradient accumulation's step between updates (gradient_accumulation_steps): with the gradient
/// as the gradient and the accumulator as the value, accumulator += gradient, in place.
template <class T>
struct accumulate_step {
  FLUXION_OPTIMIZER_STEP(w = w + g;)
};
/// Gradient accumulation's step at an update: with the gradient, the accumulator as the value and
/// as slot 0, writes the average (accumulator + gradient) / steps as the new value (the buffer the
/// update then reads as its gradient) and 0 into the accumulator.
template <class T>
struct average_accumulated_step {
  T steps;
  FLUXION_OPTIMIZER_STEP(w = (w + g) / V(steps); s[0] = V(T(0));)
};

/// Throws "<op>: <name> = <value> must be finite and non-negative" unless 0 <= value < inf.
inline void check_non_negative(const char* op, const char* name, double value) {
  if (!(value >= 0) || !std::isfinite(value))
    throw invalid_argument(std::string(op) + ": " + name + " = " + format_number(value) +
                           " must be finite and non-negative");
}
/// Throws "<op>: <name> = <value> is not in [0, 1)" (or [0, 1] with `closed`).
inline void check_unit_interval(const char* op, const char* name, double value, bool closed) {
  if (!(value >= 0) || (closed ? !(value <= 1) : !(value < 1)))
    throw invalid_argument(std::string(op) + ": " + name + " = " + format_number(value) + " is not in [0, " +
                           (closed ? "1]" : "1)"));
}

}  // namespace detail

/// Keras's gradient clipping, done by apply_gradients before weight decay and the update, on the
/// gradients of the trainable variables (every optimizer's options have these three fields, as
/// Keras's optimizers take them as arguments: `fx::optim::adam opt{{.learning_rate = 1e-3,
/// .clipnorm = 1.0}}`). 0 leaves a kind off, and at most one may be set, as in Keras:
/// - clipnorm: each gradient scaled to an L2 norm of at most clipnorm (tf.clip_by_norm);
/// - clipvalue: each element clipped to [-clipvalue, clipvalue];
/// - global_clipnorm: all of a call's gradients scaled together to a joint L2 norm of at most
///   global_clipnorm (clip_by_global_norm, optim/clip.hpp).
/// A NaN or infinite norm makes the clipped gradients NaN, as in tf.clip_by_global_norm. On
/// fx::cuda the norms stay on the device: clipping reads nothing back and does not wait.
struct gradient_clipping {
  double clipnorm = 0;
  double clipvalue = 0;
  double global_clipnorm = 0;
};

template <class T, class Device>
std::pair<std::vector<tensor<T, Device>>, T> clip_by_global_norm(const std::vector<tensor<T, Device>>& gradients,
                                                               double clip_norm);
namespace detail {
// The constraints' row loops are compiled as at -O3 by g++ whatever the program's level: at -O2
// (the README's flags) g++ 12 leaves them scalar (its very cheap cost model refuses loops that need
// a remainder), and the projection then took 1.3-1.7x the time of the fused statements it replaced.
#if defined(__GNUC__) && !defined(__clang__)
#define FLUXION_CONSTRAINT_O3 __attribute__((optimize("O3")))
#else
#define FLUXION_CONSTRAINT_O3
#endif
/// sums[j] += w[j]^2 in double, j < n.
template <class T>
FLUXION_CONSTRAINT_O3 void add_squares(double* sums, const T* w, index_t n) {
  for (index_t j = 0; j < n; ++j) sums[j] += static_cast<double>(w[j]) * static_cast<double>(w[j]);
}
/// out[j] = w[j] * factor[j], or w[j] * factor[0] where `one`, j < n.
template <class T>
FLUXION_CONSTRAINT_O3 void scale_row(T* out, const T* w, const T* factor, bool one, index_t n) {
  if (one) {
    const T f = factor[0];
    for (index_t j = 0; j < n; ++j) out[j] = w[j] * f;
  } else {
    for (index_t j = 0; j < n; ++j) out[j] = w[j] * factor[j];
  }
}
/// Keras's non_neg: out[j] = w[j] * (w[j] >= 0), j < n.
template <class T>
FLUXION_CONSTRAINT_O3 void non_negative(T* out, const T* w, index_t n) {
  for (index_t j = 0; j < n; ++j) out[j] = w[j] * static_cast<T>(w[j] >= T(0));
}
#undef FLUXION_CONSTRAINT_O3

/// The norm constraints' projection of a dense row-major tensor of shape s into dst: each element
/// times (rate * clip(n, lo, hi) + (1 - rate) * n) / (1e-7 + n), n the norm of its group (the
/// elements that differ only along `axes`), summed in double. Plain loops over the rows of the last
/// axis, split among the thread pool's threads (each with sums of its own, added after), as the
/// clipping's cpu paths: a program that constructs an optimizer compiles no statement for it.
template <class T>
void scale_by_group_norms(const T* src, T* dst, const fluxion::shape& s, const std::vector<int>& axes, double lo,
                          double hi, double rate) {
  const int rank = s.rank();
  if (rank == 0 || s.size() == 0) return;  // a constraint has axes, so a variable of rank >= 1
  std::vector<char> reduced(static_cast<std::size_t>(rank), 0);
  for (int a : axes) reduced[static_cast<std::size_t>(a < 0 ? a + rank : a)] = 1;
  // Each element's group: its index with the reduced axes dropped (their strides 0).
  std::vector<index_t> stride(static_cast<std::size_t>(rank));
  index_t groups = 1;
  for (int d = rank - 1; d >= 0; --d) {
    stride[static_cast<std::size_t>(d)] = reduced[static_cast<std::size_t>(d)] ? 0 : groups;
    if (!reduced[static_cast<std::size_t>(d)]) groups *= s[d];
  }
  // The last axis kept: a row's groups are contiguous (vector loops); reduced: one group a row.
  const index_t inner = s[rank - 1], row_count = s.size() / inner;
  const bool kept = stride.back() != 0;
  // Visits rows [first, last): f(first element, the group of its first element).
  auto rows = [&](index_t first, index_t last, auto f) {
    std::vector<index_t> idx(static_cast<std::size_t>(rank - 1));
    index_t group = 0, rest = first;
    for (int d = rank - 2; d >= 0; --d) {  // row `first`'s index over the axes before the last
      const auto u = static_cast<std::size_t>(d);
      idx[u] = rest % s[d];
      rest /= s[d];
      group += idx[u] * stride[u];
    }
    for (index_t row = first; row < last; ++row) {
      f(row * inner, group);
      for (int d = rank - 2; d >= 0; --d) {  // the next row's index and group
        const auto u = static_cast<std::size_t>(d);
        group += stride[u];
        if (++idx[u] < s[d]) break;
        group -= stride[u] * s[d];
        idx[u] = 0;
      }
    }
  };
  // A task per thread, each of at least 64K elements and a row.
  index_t tasks = static_cast<index_t>(fluxion::detail::thread_pool::instance().num_threads());
  if (tasks > row_count) tasks = row_count;
  if (tasks > s.size() / 65536 + 1) tasks = s.size() / 65536 + 1;
  auto chunk = [&](index_t task) { return row_count * task / tasks; };
  std::vector<std::vector<double>> sums(static_cast<std::size_t>(tasks));
  fluxion::detail::parallel_for(tasks, [&](index_t task) {
    std::vector<double>& sum = sums[static_cast<std::size_t>(task)];
    sum.assign(static_cast<std::size_t>(groups), 0.0);
    rows(chunk(task), chunk(task + 1), [&](index_t start, index_t group) {
      const T* w = src + start;
      if (kept) {
        add_squares(sum.data() + group, w, inner);
      } else {
        double total = 0;
        for (index_t j = 0; j < inner; ++j) total += static_cast<double>(w[j]) * static_cast<double>(w[j]);
        sum[static_cast<std::size_t>(group)] += total;
      }
    });
  });
  std::vector<double>& scale = sums[0];
  for (std::size_t t = 1; t < sums.size(); ++t)
    for (std::size_t g = 0; g < scale.size(); ++g) scale[g] += sums[t][g];
  std::vector<T> factors(scale.size());  // in T: the scaling pass multiplies in T's vectors
  for (std::size_t g = 0; g < scale.size(); ++g) {
    const double norm = std::sqrt(scale[g]);
    const double clipped = norm < lo ? lo : norm > hi ? hi : norm;
    factors[g] = static_cast<T>((rate * clipped + (1 - rate) * norm) / (1e-7 + norm));
  }
  fluxion::detail::parallel_for(tasks, [&](index_t task) {
    rows(chunk(task), chunk(task + 1), [&](index_t start, index_t group) {
      scale_row(dst + start, src + start, factors.data() + group, !kept, inner);
    });
  });
}

/// Keras's constraints (variable::constraint(), nn/constraints.hpp), applied by apply_gradients to
/// each variable it updated: non_neg w * (w >= 0); the norm constraints w * (rate * clip(n, lo, hi)
/// + (1 - rate) * n) / (1e-7 + n), n the norms over the constraint's axes (max_norm: lo = 0, rate
/// = 1; unit_norm: lo = hi = 1). Nothing records it. On the cpu plain loops (the norms in double);
/// on a device fused statements. Config: as the layers' statements (nn/prebuilt.hpp compiles the
/// float one once).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
void apply_constraint(variable<T, Device>& v) {
  using kind = constraint::kind;
  const constraint& c = v.constraint();
  const tensor<T, Device> w = v.peek();
  const bool unit = c.which == kind::unit_norm;
  const double lo = unit ? 1.0 : c.which == kind::max_norm ? 0.0 : c.min_value;
  const double hi = unit ? 1.0 : c.max_value;
  const double rate = c.which == kind::min_max_norm ? c.rate : 1.0;
  if constexpr (std::is_same_v<Device, cpu>) {
    tensor<T, cpu> out(w.shape());
    if (c.which == kind::non_neg) {
      non_negative(out.mutable_data(), w.data(), w.size());
    } else {
      scale_by_group_norms(w.data(), out.mutable_data(), w.shape(), c.axes, lo, hi, rate);
    }
    v.assign(out);
  } else {
    if (c.which == kind::non_neg) {
      v.assign(fluxion::detail::materialize_unrecorded(w * cast<T>(w >= T(0))));
      return;
    }
    // The squares first: a reduction of a tensor, not of an expression, whose backward rule the
    // program would compile (boundaries compile theirs even where nothing records).
    const tensor<T, Device> squares = fluxion::detail::materialize_unrecorded(square(w));
    const tensor<T, Device> n = fluxion::detail::materialize_unrecorded(sqrt(reduce_sum(squares, axes(c.axes), keepdims)));
    const T tlo = static_cast<T>(lo), thi = static_cast<T>(hi), trate = static_cast<T>(rate);
    v.assign(fluxion::detail::materialize_unrecorded(w * ((trate * clip(n, tlo, thi) + (T(1) - trate) * n) / (T(1e-7) + n))));
  }
}
template <class T, class Device>
std::vector<tensor<T, Device>> clip_by_joint_norm(const std::vector<tensor<T, Device>>& gradients, double clip_norm);
template <class T, class F>
tensor<T, cpu> map_elements(const tensor<T, cpu>& g, F f);
}  // namespace detail

/// A slot an optimizer keeps per variable: its name (the suffix of the slot variable's name) and
/// the value it starts from (or the variable's value, for the moving average).
struct slot_spec {
  std::string name;
  double initial_value = 0;
  bool from_variable = false;
};

/// Keras's moving average of the weights (every optimizer's use_ema, ema_momentum and
/// ema_overwrite_frequency options): after each update, apply_gradients sets a slot `average` of
/// each trainable variable to ema_momentum * average + (1 - ema_momentum) * variable (to the
/// variable itself at the first step, iterations() == 0, as Keras does), and every
/// ema_overwrite_frequency steps (0: never) sets the variables to their averages.
/// finalize_variable_values(variables) sets them to their averages, as fx::fit does when training
/// ends (Keras's fit calls it too). The averages are slots: checkpoints save and restore them.
///   fx::optim::adam opt{{.learning_rate = 1e-3, .use_ema = true, .ema_momentum = 0.999}};
struct moving_average {
  bool use_ema = false;
  double momentum = 0.99;               // in [0, 1]
  std::int64_t overwrite_frequency = 0;  // >= 0; 0: never
};

// kernel_instantiation: each optimizer (sgd, adagrad, rmsprop, adam, adamw, ...) is an alias of a class
// template (`using sgd = basic_sgd<>;`, as std::string is basic_string<char>). Its update()
// overrides call its per-element loops for float and double; in a plain class its inline
// constructors would make every file that includes optim.hpp compile them all, used or not. A class
// template's members are compiled only where they are used: where an optimizer is constructed.
class optimizer {
 public:
  virtual ~optimizer() = default;
  optimizer(const optimizer&) = delete;  // slots are owned: copying would share or duplicate state
  optimizer& operator=(const optimizer&) = delete;
  optimizer(optimizer&&) noexcept = default;
  optimizer& operator=(optimizer&&) noexcept = default;

  /// "sgd", "adagrad", "rmsprop", "adam", "adamw", "adamax", "nadam", "adadelta" or "lion".
  const std::string& name() const noexcept { return m_name; }

  /// How many times apply_gradients has been called (Keras's `iterations`): fx::fit's step count.
  /// Without gradient accumulation, how many times it has updated the variables.
  std::int64_t iterations() const noexcept { return m_iterations; }
  /// How many times apply_gradients has updated the variables: iterations() without gradient
  /// accumulation, one in gradient_accumulation_steps() calls with it. Schedules, Adam's bias
  /// correction and the moving average count these. A counter of its own, which checkpoints save:
  /// a run resumed with another gradient_accumulation_steps keeps its schedule where it was.
  std::int64_t updates() const noexcept { return m_updates; }
  /// Sets the call counter, as when restoring a checkpoint, and the update counter to what this
  /// optimizer would have counted in as many calls (set_updates then sets it apart). With gradient
  /// accumulation the place in the cycle follows it (iterations() modulo the steps), as in Keras.
  void set_iterations(std::int64_t n) {
    if (n < 0) throw invalid_argument("set_iterations: n = " + std::to_string(n) + " must be non-negative");
    m_iterations = n;
    m_updates = accumulating() ? n / m_accumulation_steps : n;
  }
  /// Sets the update counter (updates()), which schedules and Adam's bias correction follow.
  void set_updates(std::int64_t n) {
    if (n < 0) throw invalid_argument("set_updates: n = " + std::to_string(n) + " must be non-negative");
    m_updates = n;
  }

  /// Keras's gradient_accumulation_steps: 0 or 1 (Keras's None) updates the variables at every
  /// apply_gradients; k >= 2 adds each call's gradients to a slot `gradient_accumulator` and
  /// updates the variables at every k-th call, from the mean of the k calls' gradients (clipped
  /// then, as in Keras). k calls with batches of b examples and a mean loss then train as one
  /// call with a batch of k * b would.
  std::int64_t gradient_accumulation_steps() const noexcept { return m_accumulation_steps; }

  /// The learning rate the next update uses: the schedule at updates().
  double learning_rate() const { return m_learning_rate(updates()); }
  const schedule& learning_rate_schedule() const noexcept { return m_learning_rate; }
  void set_learning_rate(schedule learning_rate) {
    if (learning_rate.is_constant()) detail::check_non_negative("set_learning_rate", "learning_rate", learning_rate(0));
    m_learning_rate = std::move(learning_rate);
  }
  double weight_decay() const noexcept { return m_weight_decay; }

  /// Keras's clipnorm, clipvalue and global_clipnorm (gradient_clipping): 0 when off.
  double clipnorm() const noexcept { return m_clipping.clipnorm; }
  double clipvalue() const noexcept { return m_clipping.clipvalue; }
  double global_clipnorm() const noexcept { return m_clipping.global_clipnorm; }
  const gradient_clipping& clipping() const noexcept { return m_clipping; }
  /// Changes the clipping from the next apply_gradients on, as assigning Keras's `opt.clipnorm` does.
  void set_clipping(gradient_clipping clipping) {
    check_clipping(m_name, clipping);
    m_clipping = clipping;
  }

  /// The slots kept per variable, in order: for Adam, momentum and velocity (and velocity_hat),
  /// then, with use_ema, the moving average `average`, then, with gradient accumulation, the sum
  /// `gradient_accumulator`.
  std::vector<slot_spec> slot_specs() const {
    std::vector<slot_spec> specs = update_slot_specs();
    if (m_ema.use_ema) specs.push_back({"average", 0.0, /*from_variable=*/true});
    if (accumulating()) specs.push_back({"gradient_accumulator", 0.0});
    return specs;
  }
  /// The slots the update itself reads and writes, in order (slot_specs() without the average).
  virtual std::vector<slot_spec> update_slot_specs() const = 0;

  /// Keras's use_ema, ema_momentum and ema_overwrite_frequency (moving_average).
  bool use_ema() const noexcept { return m_ema.use_ema; }
  double ema_momentum() const noexcept { return m_ema.momentum; }
  std::int64_t ema_overwrite_frequency() const noexcept { return m_ema.overwrite_frequency; }

  /// Keras's finalize_variable_values: with use_ema, sets each trainable variable to its moving
  /// average (a variable without slots yet, never updated, stays); without, does nothing.
  template <class T, class Device>
  void finalize_variable_values(const std::vector<variable<T, Device>*>& variables) {
    if (!m_ema.use_ema) return;
    for (variable<T, Device>* v : variables)
      if (v != nullptr && v->trainable())
        if (variable<T, Device>* average = get_slot(*v, "average")) v->assign(average->peek());
  }

  /// apply_gradients (below) with the variables in braces, as Keras's `apply_gradients(zip(grads, [w, b]))`:
  /// `opt.apply_gradients(tape.gradient(loss, {w, b}), {w, b})`, or `opt.apply_gradients({dw, db}, {w, b})`.
  template <class T, class Device>
  void apply_gradients(const std::vector<tensor<T, Device>>& gradients,
                       std::initializer_list<std::reference_wrapper<std::type_identity_t<variable<T, Device>>>> variables) {
    apply_gradients(gradients, detail::pointers_to(variables));
  }
  template <class T, class Device>
  void apply_gradients(std::initializer_list<tensor<T, Device>> gradients,
                       std::initializer_list<std::reference_wrapper<std::type_identity_t<variable<T, Device>>>> variables) {
    apply_gradients(std::vector<tensor<T, Device>>(gradients), variables);
  }
  /// Updates each trainable variable from its gradient, then increments iterations(). gradients[i]
  /// belongs to variables[i]; a gradient must have its variable's shape. Throws
  /// fluxion::invalid_argument, before changing anything, when the lists differ in length, a
  /// pointer is null, a variable appears twice, or a gradient is empty or of the wrong shape.
  template <class T, class Device>
  void apply_gradients(const std::vector<tensor<T, Device>>& gradients,
                       const std::vector<variable<T, Device>*>& variables) {
    constexpr bool device_ok = std::is_same_v<Device, cpu> || FLUXION_DEVICE_OPTIMIZERS;
    constexpr bool type_ok = std::is_same_v<T, float> || std::is_same_v<T, double>;
    static_assert(device_ok,
                  "fluxion::optim::optimizer::apply_gradients: variables on fluxion::cuda need the device backend; "
                  "include <fluxion/cuda.hpp> and compile with nvcc (or with Thrust's OpenMP system).");
    static_assert(type_ok,
                  "fluxion::optim::optimizer::apply_gradients: optimizers update float or double variables; "
                  "make the variable's element type float or double.");
    if constexpr (device_ok && type_ok) apply_checked(gradients, variables);  // else: the message above only
  }

 private:
  template <class T, class Device>
  void apply_checked(const std::vector<tensor<T, Device>>& gradients,
                     const std::vector<variable<T, Device>*>& variables) {
    if (gradients.size() != variables.size())
      throw invalid_argument("apply_gradients: " + std::to_string(gradients.size()) + " gradients for " +
                             std::to_string(variables.size()) +
                             " variables; pass one gradient per variable, in the same order");
    if (variables.empty())  // TensorFlow's "No gradients provided for any variable"; Keras 3 does nothing
      throw invalid_argument(
          "apply_gradients: no variables to update (the lists are empty), so this step would train nothing. A layer "
          "used alone makes its variables on its first call (or build(shape)): take trainable_variables() after "
          "that; a model that starts with nn::input has them from its construction");
    const double lr = learning_rate();
    if (!(lr >= 0) || !std::isfinite(lr))
      throw invalid_argument("apply_gradients: the learning rate schedule gives " + detail::format_number(lr) +
                             " at update " + std::to_string(updates()) +
                             "; a learning rate must be finite and non-negative");
    std::unordered_set<std::uint64_t> seen;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const variable<T, Device>* v = variables[i];
      if (v == nullptr)
        throw invalid_argument("apply_gradients: variables[" + std::to_string(i) + "] is a null pointer");
      if (!v->trainable()) continue;
      if (!seen.insert(v->id()).second)
        throw invalid_argument("apply_gradients: " + describe(*v, i) +
                               " appears more than once; pass each variable once, with the sum of its gradients");
      check_gradient(gradients[i], *v, i);
    }
    // Slots are created before any variable changes, so a failure here changes nothing either.
    std::vector<std::vector<variable<T, Device>>*> slots(variables.size(), nullptr);
    for (std::size_t i = 0; i < variables.size(); ++i)
      if (variables[i]->trainable()) slots[i] = &slots_of(*variables[i]);
    const std::int64_t update_index = m_updates;  // updates before this call's
    // Gradient accumulation (Keras's _backend_apply_gradients): between updates only the
    // accumulators change; at an update the mean of the cycle's gradients replaces this call's.
    std::vector<tensor<T, Device>> averaged;
    std::vector<pending_update<T, Device>> accumulators;  // zeroed, with the update
    if (accumulating()) {
      if (accumulate(gradients, slots, accumulators)) {
        ++m_iterations;
        return;
      }
      averaged = gradients;
      for (std::size_t i = 0, k = 0; i < variables.size(); ++i)
        if (slots[i] != nullptr) averaged[i] = accumulators[k++].value;
    }
    const std::vector<tensor<T, Device>>& unclipped = averaged.empty() ? gradients : averaged;
    std::vector<tensor<T, Device>> clipped;
    if (m_clipping.clipnorm != 0 || m_clipping.clipvalue != 0 || m_clipping.global_clipnorm != 0)
      clipped = clip_gradients(unclipped, variables);
    const std::vector<tensor<T, Device>>& grads = clipped.empty() ? unclipped : clipped;
    const detail::step_constants constants{lr, m_weight_decay, update_index};
    // Every variable's buffers first, then one update over all of them (one kernel on a device),
    // then the new buffers swapped in.
    std::vector<pending_update<T, Device>> pending;
    std::vector<detail::update_buffers<T>> buffers;
    pending.reserve(variables.size());
    buffers.reserve(variables.size());
    const std::size_t updated = update_slot_specs().size();  // the average, last, is not the update's
    for (std::size_t i = 0; i < variables.size(); ++i)
      if (slots[i] != nullptr) buffers.push_back(prepare(grads[i], *variables[i], *slots[i], updated, pending));
    update(detail::update_list<T>(buffers), constants);
    for (auto& p : pending) {
      p.v->assign(p.value);  // the same shape: the new buffer is swapped in
      for (std::size_t k = 0; k < updated; ++k) (*p.slots)[k].assign(p.new_slots[k]);
    }
    for (auto& a : accumulators) a.v->assign(a.new_slots[0]);
    if (m_ema.use_ema) {
      // Keras's _update_model_variables_moving_average: the variable itself at the first step.
      // One more fused pass, the averages updated in place where nothing else holds them. With
      // gradient accumulation, at updates only (Keras also averages between them, where the
      // variables have not changed), so that the average is the one a k times larger batch gives.
      const double momentum = update_index == 0 ? 0.0 : m_ema.momentum;
      std::vector<pending_update<T, Device>> averages;
      std::vector<detail::update_buffers<T>> average_buffers;
      averages.reserve(pending.size());
      average_buffers.reserve(pending.size());
      for (auto& p : pending)
        average_buffers.push_back(prepare(p.v->peek(), (*p.slots)[updated], *p.slots, 0, averages));
      detail::fused_update<0>(detail::update_list<T>(average_buffers), detail::step_constants{0, 0, update_index},
                              detail::ema_step<T>{static_cast<T>(momentum), static_cast<T>(1 - momentum)});
      for (auto& a : averages) a.v->assign(a.value);
      if (m_ema.overwrite_frequency > 0 && (update_index + 1) % m_ema.overwrite_frequency == 0)
        for (auto& p : pending) p.v->assign((*p.slots)[updated].peek());
    }
    // Keras's variable constraints, after the update (and the moving average), as Keras's apply().
    for (auto& p : pending)
      if (p.v->constraint()) detail::apply_constraint<T, Device>(*p.v);
    ++m_iterations;
    ++m_updates;
  }

 public:
  /// Creates the slots of these variables now rather than on the first apply_gradients, so that a
  /// checkpoint can be restored into them.
  template <class T, class Device>
  void build(const std::vector<variable<T, Device>*>& variables) {
    for (std::size_t i = 0; i < variables.size(); ++i) {
      if (variables[i] == nullptr)
        throw invalid_argument("build: variables[" + std::to_string(i) + "] is a null pointer");
      if (variables[i]->trainable()) slots_of(*variables[i]);
    }
  }

  /// Every slot variable of element type T on Device, with its name `<variable name>/<slot>`
  /// (`dense/kernel/momentum`), in the order the slots were created. For checkpoints.
  template <class T, class Device>
  std::vector<std::pair<std::string, variable<T, Device>*>> slot_variables() {
    std::vector<std::pair<std::string, variable<T, Device>*>> out;
    for (auto& s : slots_by_variable<T, Device>()) out.emplace_back(s.value->name(), s.value);
    return out;
  }

  /// A slot with the id of its variable and its name in slot_specs().
  template <class T, class Device>
  struct owned_slot {
    std::uint64_t variable_id;
    std::string slot;
    variable<T, Device>* value;
  };
  /// slot_variables(), with each slot's variable: checkpoints name the slots of variables that
  /// share a name by the variables' paths instead.
  template <class T, class Device>
  std::vector<owned_slot<T, Device>> slots_by_variable() {
    const auto specs = slot_specs();
    std::vector<owned_slot<T, Device>> out;
    for (auto& entry : m_slots) {
      if (*entry.type != typeid(variable<T, Device>)) continue;
      auto& slots = *static_cast<std::vector<variable<T, Device>>*>(entry.variables.get());
      for (std::size_t k = 0; k < slots.size(); ++k) out.push_back({entry.variable_id, specs[k].name, &slots[k]});
    }
    return out;
  }

  /// The slot `slot` (a name from slot_specs(), else this throws) of `v`, or nullptr if `v` has no
  /// slots yet.
  template <class T, class Device>
  variable<T, Device>* get_slot(const variable<T, Device>& v, std::string_view slot) {
    const auto specs = slot_specs();
    std::size_t k = 0;
    while (k < specs.size() && specs[k].name != slot) ++k;
    if (k == specs.size())
      throw invalid_argument("get_slot: " + m_name + " has no slot named '" + std::string(slot) + "'");
    const auto it = m_slot_index.find(v.id());
    if (it == m_slot_index.end()) return nullptr;
    return &(*static_cast<std::vector<variable<T, Device>>*>(m_slots[it->second].variables.get()))[k];
  }

 protected:
  optimizer(std::string name, schedule learning_rate, double weight_decay, gradient_clipping clipping = {},
            moving_average ema = {}, std::int64_t gradient_accumulation_steps = 0)
      : m_name(std::move(name)), m_learning_rate(std::move(learning_rate)), m_weight_decay(weight_decay),
        m_clipping(clipping), m_ema(ema), m_accumulation_steps(gradient_accumulation_steps) {
    if (m_accumulation_steps < 0)
      throw invalid_argument(m_name + ": gradient_accumulation_steps = " + std::to_string(m_accumulation_steps) +
                             " is negative (0 or 1 updates the variables at every apply_gradients)");
    if (m_learning_rate.is_constant()) detail::check_non_negative(m_name.c_str(), "learning_rate", m_learning_rate(0));
    detail::check_non_negative(m_name.c_str(), "weight_decay", weight_decay);
    check_clipping(m_name, m_clipping);
    detail::check_unit_interval(m_name.c_str(), "ema_momentum", m_ema.momentum, /*closed=*/true);
    if (m_ema.overwrite_frequency < 0)
      throw invalid_argument(m_name + ": ema_overwrite_frequency = " + std::to_string(m_ema.overwrite_frequency) +
                             " is negative (0 never overwrites the variables with their averages)");
  }

  /// The clipping fields of an optimizer's options.
  template <class Options>
  static gradient_clipping clipping_of(const Options& o) {
    return {o.clipnorm, o.clipvalue, o.global_clipnorm};
  }
  /// The moving-average fields of an optimizer's options.
  template <class Options>
  static moving_average ema_of(const Options& o) {
    return {o.use_ema, o.ema_momentum, o.ema_overwrite_frequency};
  }

  /// One fused pass over the variables of a call: for each, read b.gradient, b.value and the
  /// slot_specs().size() slots, write b.new_value and the new slots (detail::fused_update).
  virtual void update(detail::update_list<float> b, const detail::step_constants& c) const = 0;
  virtual void update(detail::update_list<double> b, const detail::step_constants& c) const = 0;

 private:
  struct slot_entry {
    std::uint64_t variable_id;
    const std::type_info* type;       // typeid(variable<T, Device>)
    std::shared_ptr<void> variables;  // std::vector<variable<T, Device>>, one per slot_specs() entry
  };

  bool accumulating() const noexcept { return m_accumulation_steps > 1; }

  static void check_clipping(const std::string& op, const gradient_clipping& c) {
    detail::check_non_negative(op.c_str(), "clipnorm", c.clipnorm);
    detail::check_non_negative(op.c_str(), "clipvalue", c.clipvalue);
    detail::check_non_negative(op.c_str(), "global_clipnorm", c.global_clipnorm);
    if ((c.clipnorm != 0) + (c.clipvalue != 0) + (c.global_clipnorm != 0) > 1)
      throw invalid_argument(op + ": only one of clipnorm, clipvalue and global_clipnorm can be set (as in Keras), not clipnorm = " +
                             detail::format_number(c.clipnorm) + ", clipvalue = " + detail::format_number(c.clipvalue) +
                             " and global_clipnorm = " + detail::format_number(c.global_clipnorm));
  }

  /// The gradients with m_clipping applied to those of trainable variables (the others are not
  /// read, and stay as they are).
  template <class T, class Device>
  std::vector<tensor<T, Device>> clip_gradients(const std::vector<tensor<T, Device>>& gradients,
                                                const std::vector<variable<T, Device>*>& variables) const {
    std::vector<tensor<T, Device>> out = gradients;
    if (m_clipping.global_clipnorm != 0) {
      std::vector<tensor<T, Device>> trained;
      for (std::size_t i = 0; i < variables.size(); ++i)
        if (variables[i]->trainable()) trained.push_back(gradients[i]);
      trained = detail::clip_by_joint_norm(trained, m_clipping.global_clipnorm);
      for (std::size_t i = 0, k = 0; i < variables.size(); ++i)
        if (variables[i]->trainable()) out[i] = std::move(trained[k++]);
      return out;
    }
    for (std::size_t i = 0; i < variables.size(); ++i) {
      if (!variables[i]->trainable()) continue;
      if (m_clipping.clipnorm != 0) {
        out[i] = std::move(detail::clip_by_joint_norm(std::vector<tensor<T, Device>>{gradients[i]}, m_clipping.clipnorm)[0]);
      } else {
        const T limit = static_cast<T>(m_clipping.clipvalue);
        if constexpr (std::is_same_v<Device, cpu>)  // NaN stays NaN, as in clip()
          out[i] = detail::map_elements(gradients[i], [limit](T x) { return x < -limit ? -limit : (x > limit ? limit : x); });
        else
          out[i] = tensor<T, Device>(clip(gradients[i], -limit, limit));
      }
    }
    return out;
  }

  template <class T, class Device>
  static std::string describe(const variable<T, Device>& v, std::size_t i) {
    return v.name().empty() ? "variables[" + std::to_string(i) + "] (unnamed)" : "variable '" + v.name() + "'";
  }

  template <class T, class Device>
  static void check_gradient(const tensor<T, Device>& g, const variable<T, Device>& v, std::size_t i) {
    if (g.shape() == v.shape()) return;
    const std::string what = describe(v, i);
    if (g.empty() && g.shape() == fluxion::shape{0})
      throw invalid_argument("apply_gradients: the gradient for " + what + " of shape " + to_string(v.shape()) +
                             (g.is_none() ? " is none (TensorFlow's None)" : " is empty (shape (0,))") +
                             ": the tape never saw " + what +
                             " read: the loss does not depend on it, it was read before the tape started recording, or the code "
                             "that ran the model was compiled with FLUXION_MAX_DERIVATIVE_ORDER=0 (autodiff off)");
    throw shape_error("apply_gradients: the gradient for " + what + " has shape " + to_string(g.shape()) +
                      ", but the variable has shape " + to_string(v.shape()));
  }

  /// The slots of `v`, created (filled with their initial values) on first use.
  template <class T, class Device>
  std::vector<variable<T, Device>>& slots_of(const variable<T, Device>& v) {
    using slots_t = std::vector<variable<T, Device>>;
    if (const auto it = m_slot_index.find(v.id()); it != m_slot_index.end()) {
      auto& existing = *static_cast<slots_t*>(m_slots[it->second].variables.get());
      for (const auto& s : existing)
        if (s.shape() != v.shape())
          throw shape_error("apply_gradients: slot '" + s.name() + "' has shape " + to_string(s.shape()) +
                            ", but its variable has shape " + to_string(v.shape()));
      return existing;
    }
    const auto specs = slot_specs();
    auto created = std::make_shared<slots_t>();
    created->reserve(specs.size());  // never grows again: pointers to the slots stay valid
    const std::string prefix = v.name().empty() ? "variable_" + std::to_string(v.id()) : v.name();
    for (const auto& spec : specs) {
      if (spec.from_variable) {  // the moving average: the variable's value (tensors are immutable: shared)
        created->emplace_back(v.peek(), prefix + "/" + spec.name, /*trainable=*/false);
        continue;
      }
      tensor<T, cpu> initial(v.shape());
      T* p = initial.mutable_data();
      for (index_t k = 0; k < initial.size(); ++k) p[k] = static_cast<T>(spec.initial_value);
      created->emplace_back(::fluxion::detail::device_copy<Device>(initial), prefix + "/" + spec.name,
                            /*trainable=*/false);
    }
    m_slots.push_back({v.id(), &typeid(variable<T, Device>), created});
    m_slot_index.emplace(v.id(), m_slots.size() - 1);
    return *created;
  }

  /// A variable's new buffers, swapped in once the update has run.
  template <class T, class Device>
  struct pending_update {
    variable<T, Device>* v;
    std::vector<variable<T, Device>>* slots;
    tensor<T, Device> value;
    std::array<tensor<T, Device>, detail::max_slots> new_slots;
  };

  /// The buffer a new value of `old` goes to: `old`'s own (under a new tensor id) when nothing but
  /// its variable holds it, else a fresh one.
  template <class T, class Device>
  static tensor<T, Device> next_buffer(const tensor<T, Device>& old) {
    return old.use_count() == 1 && old.data() != nullptr ? tensor<T, Device>(old, old.shape(), ::fluxion::detail::same_buffer)
                                                          : tensor<T, Device>(old.shape());
  }

  /// The buffers of one variable's update (its first `updated` slots); its new buffers go to `pending`.
  template <class T, class Device>
  detail::update_buffers<T> prepare(const tensor<T, Device>& g, variable<T, Device>& v,
                                    std::vector<variable<T, Device>>& slots, std::size_t updated,
                                    std::vector<pending_update<T, Device>>& pending) {
    // A buffer that nothing but its variable holds (no tensor read from the variable is alive)
    // is updated in place, under a new tensor id: nobody can see the old values change, and the
    // loop then reads and writes each line once instead of also filling fresh buffers (a third
    // less memory traffic; Adam on a 784x256 kernel is bound by it). Otherwise, fresh buffers.
    pending_update<T, Device>& p = pending.emplace_back(pending_update<T, Device>{&v, &slots, next_buffer(v.peek()), {}});
    detail::update_buffers<T> b;
    b.size = v.size();
    b.gradient = g.data();
    b.value = v.peek().data();
    b.new_value = p.value.mutable_data();
    b.on_device = !std::is_same_v<Device, cpu>;
    for (std::size_t k = 0; k < updated; ++k) {
      p.new_slots[k] = next_buffer(slots[k].peek());
      b.slots[k] = slots[k].peek().data();
      b.new_slots[k] = p.new_slots[k].mutable_data();
    }
    return b;
  }

  /// Gradient accumulation's pass over a call's gradients (slots[i] is null for a variable that is
  /// not trained). Between updates, adds them to the accumulators and returns true. At an update
  /// (every gradient_accumulation_steps-th call), returns false and puts in `out`, for each
  /// trained variable in order, its accumulator (v), the mean of the cycle's gradients (value)
  /// and the zeroed accumulator to swap in with the update (new_slots[0]). One fused pass either
  /// way (one kernel on a device), in place where nothing else holds an accumulator.
  template <class T, class Device>
  bool accumulate(const std::vector<tensor<T, Device>>& gradients, const std::vector<std::vector<variable<T, Device>>*>& slots,
                  std::vector<pending_update<T, Device>>& out) {
    const std::size_t slot = update_slot_specs().size() + (m_ema.use_ema ? 1 : 0);
    std::vector<detail::update_buffers<T>> buffers;
    buffers.reserve(gradients.size());
    out.reserve(gradients.size());
    const detail::step_constants none{0, 0, m_iterations};
    if ((m_iterations + 1) % m_accumulation_steps != 0) {
      for (std::size_t i = 0; i < slots.size(); ++i)
        if (slots[i] != nullptr) buffers.push_back(prepare(gradients[i], (*slots[i])[slot], *slots[i], 0, out));
      detail::fused_update<0>(detail::update_list<T>(buffers), none, detail::accumulate_step<T>{});
      for (auto& a : out) a.v->assign(a.value);
      return true;
    }
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == nullptr) continue;
      variable<T, Device>& sum = (*slots[i])[slot];
      pending_update<T, Device>& p = out.emplace_back(pending_update<T, Device>{&sum, slots[i], tensor<T, Device>(sum.shape()), {}});
      p.new_slots[0] = next_buffer(sum.peek());
      detail::update_buffers<T> b;
      b.size = sum.size();
      b.gradient = gradients[i].data();
      b.value = b.slots[0] = sum.peek().data();
      b.new_value = p.value.mutable_data();
      b.new_slots[0] = p.new_slots[0].mutable_data();
      b.on_device = !std::is_same_v<Device, cpu>;
      buffers.push_back(b);
    }
    detail::fused_update<1>(detail::update_list<T>(buffers), none,
                            detail::average_accumulated_step<T>{static_cast<T>(m_accumulation_steps)});
    return false;
  }

  std::string m_name;
  schedule m_learning_rate;
  double m_weight_decay = 0;
  gradient_clipping m_clipping;
  moving_average m_ema;
  std::int64_t m_accumulation_steps = 0;
  std::int64_t m_iterations = 0;
  std::int64_t m_updates = 0;
  std::vector<slot_entry> m_slots;
  std::unordered_map<std::uint64_t, std::size_t> m_slot_index;
};

}  // namespace fluxion::optim

// clip_by_global_norm and clip_by_joint_norm, which apply_gradients calls for the clipping options.
#include "clip.hpp"
