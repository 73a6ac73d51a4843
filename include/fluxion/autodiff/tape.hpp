// fx::gradient_tape: records materializations while in scope and computes gradients from them.
//
//   fx::gradient_tape tape;
//   tape.watch(x);
//   fx::tensor<float> y = fx::sin(x) * x;          // one entry: the whole fused statement
//   auto dx = tape.gradient(y, x);                  // cos(x) * x + sin(x)
//
// Principle 4: each top-level materialization that reads a watched tensor, a trainable variable
// or the output of an earlier entry pushes one entry: its output's id and a backward function
// instantiated from the statement's expression type (autodiff/backprop.hpp). C++ `if`, `for` and
// `while` decide what runs; the tape sees only what ran. Tapes are thread-local and nest: while
// an outer tape records, an inner tape's gradient() is recorded by the outer one, which gives
// higher derivatives with no extra machinery (principle 5).

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_TAPE_HPP
#define FLUXION_AUTODIFF_TAPE_HPP
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../core/prebuilt.hpp"
#include "../tensor/variable.hpp"
#include "backprop.hpp"

namespace fluxion {

/// What `tape.gradient(target, {a, b, ...})` returns: the N gradients in order, as a std::vector
/// (index it, pass it to apply_gradients) that also unpacks with structured bindings, as
/// TensorFlow's `dw, db = tape.gradient(loss, [w, b])`:
///   auto [dw, db] = tape.gradient(loss, {w, b});
template <class Tensor, std::size_t N>
class gradient_list : public std::vector<Tensor> {
 public:
  explicit gradient_list(std::vector<Tensor>&& gradients) : std::vector<Tensor>(std::move(gradients)) {}

  template <std::size_t I>
    requires(I < N)
  Tensor& get() & {
    return this->at(I);
  }
  template <std::size_t I>
    requires(I < N)
  const Tensor& get() const& {
    return this->at(I);
  }
  template <std::size_t I>
    requires(I < N)
  Tensor&& get() && {
    return std::move(this->at(I));
  }
};

/// A source named in braces, `tape.gradient(loss, {w, x})`: a variable or a tensor of the target's
/// element type and device, mixed as TensorFlow's `tape.gradient(loss, [w, x])` allows. It refers to
/// the object; a brace list lives until the call returns.
template <class T, class D>
class gradient_source {
 public:
  using value_type = T;
  using device_type = D;

  gradient_source(const variable<T, D>& v) : m_variable(&v) {}
  gradient_source(const tensor<T, D>& t) : m_tensor(&t) {}
  gradient_source(std::reference_wrapper<const variable<T, D>> v) : m_variable(&v.get()) {}
  gradient_source(std::reference_wrapper<const tensor<T, D>> t) : m_tensor(&t.get()) {}
  /// A tensor or variable of another element type or device, or an unevaluated expression, in a
  /// brace list of sources: one readable error (the instantiation names Source, T and D) instead of
  /// every gradient() overload listed as a candidate.
  template <class Source>
    requires((is_expression_v<Source> || is_variable_v<Source>) && !std::is_same_v<Source, tensor<T, D>> &&
             !std::is_same_v<Source, variable<T, D>>)
  gradient_source(const Source&) {
    if constexpr (!is_tensor_v<Source> && !is_variable_v<Source>)
      static_assert(sizeof(Source) == 0,
                    "gradient_tape::gradient(target, {sources...}): a source must be a tensor or a variable; an "
                    "expression (Source here) is not evaluated, so no target was computed from it: store it in an "
                    "fx::tensor while the tape records, and compute the target from that tensor");
    else
      static_assert(sizeof(Source) == 0,
                    "gradient_tape::gradient(target, {sources...}): every source in braces must have the target's "
                    "element type and device (Source here; the target's are T and D). Pass the others in a list of "
                    "their own, {std::cref(a), std::cref(b)}, or cast the target (fx::cast<U>(target))");
  }

  std::uint64_t id() const { return m_variable ? m_variable->id() : m_tensor->id(); }
  fluxion::shape shape() const { return m_variable ? m_variable->shape() : m_tensor->shape(); }
  bool is_variable() const noexcept { return m_variable != nullptr; }

 private:
  const variable<T, D>* m_variable = nullptr;
  const tensor<T, D>* m_tensor = nullptr;
};

struct persistent_t {
  explicit constexpr persistent_t() = default;
};
/// Makes a tape persistent: gradient() may then be called more than once.
inline constexpr persistent_t persistent{};

namespace autodiff {

class gradient_store;

/// A recorded entry's backward function: owns any callable `void(gradient_store&)`, move-only.
/// It replaced std::function, which instantiates for every callable type a manager, an invoker and
/// their helpers (about ten functions); this needs two, and a program records one callable type per
/// statement type, thousands in a test of composite functions (tests/losses.test.cpp: 5400 fewer
/// functions to compile).
class backward_function {
 public:
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, backward_function>)
  explicit backward_function(F&& f)
      : m_callable(new std::remove_cvref_t<F>(std::forward<F>(f))),
        m_run(&run<std::remove_cvref_t<F>>),
        m_destroy(&destroy<std::remove_cvref_t<F>>) {}
  backward_function(backward_function&& o) noexcept
      : m_callable(std::exchange(o.m_callable, nullptr)), m_run(o.m_run), m_destroy(o.m_destroy) {}
  backward_function& operator=(backward_function&& o) noexcept {
    if (this != &o) {
      reset();
      m_callable = std::exchange(o.m_callable, nullptr);
      m_run = o.m_run;
      m_destroy = o.m_destroy;
    }
    return *this;
  }
  backward_function(const backward_function&) = delete;
  backward_function& operator=(const backward_function&) = delete;
  ~backward_function() { reset(); }

  void operator()(gradient_store& store) const { m_run(m_callable, store); }
  /// Frees the callable and what it captured (a released entry of a one-shot tape).
  void reset() noexcept {
    if (m_callable) m_destroy(m_callable);
    m_callable = nullptr;
  }

 private:
  template <class F>
  static void run(void* callable, gradient_store& store) {
    (*static_cast<F*>(callable))(store);
  }
  template <class F>
  static void destroy(void* callable) noexcept {
    delete static_cast<F*>(callable);
  }

  void* m_callable;
  void (*m_run)(void*, gradient_store&);
  void (*m_destroy)(void*) noexcept;
};

/// Gradients by tensor id, of any element type and device.
class gradient_store {
 public:
  template <class T, class D>
  const tensor<T, D>* find(std::uint64_t id) const {
    auto it = m_grads.find(id);
    return it == m_grads.end() ? nullptr : std::any_cast<tensor<T, D>>(&it->second);
  }
  /// Adds `g` (already of the leaf's shape) into the gradient of `id`. Gradients arrive
  /// materialized, so accumulating is the same tensor + tensor statement whatever expression
  /// produced them: one kernel, not one per gradient type, which keeps the compile time of each
  /// recorded statement down. K is their derivative order: an outer tape records the sum at the
  /// order of its terms (autodiff/order.hpp). When no other tape or accumulator is alive to
  /// record the sum and nobody else holds the accumulator, it is updated in place, so a backward
  /// pass allocates one buffer per term, as a fused `acc + g` would.
  template <int K, class T, class D>
  void add(std::uint64_t id, tensor<T, D> g) {
    auto it = m_grads.find(id);
    if (it == m_grads.end()) {
      m_grads.emplace(id, std::any(std::move(g)));
      return;
    }
    auto& acc = std::any_cast<tensor<T, D>&>(it->second);
    if (::fluxion::detail::autodiff_state::observers <= 1 && acc.use_count() == 1) {
      ::fluxion::detail::assign_into(acc, 0, contiguous_strides(acc.shape()).data(), acc + g);
    } else if constexpr (K > 0) {
      acc = tensor<T, D>(as_order<K>(acc) + as_order<K>(std::move(g)));
    } else {
      acc = acc + g;
    }
  }
  /// Adds `scattered`, a pad of zeros around a slice's gradient (`scattered.a`) shaped as the
  /// gradient of `id`, into that gradient in place, touching only the slice's region. Only where
  /// add() would update in place (nothing else records or holds the accumulator), the padding is
  /// zeros and every step is positive; returns false otherwise, and for the first term (which
  /// add() then stores whole).
  template <class P>
  bool add_region(std::uint64_t id, const P& scattered) {
    using T = value_type_t<P>;
    using D = device_t<P>;
    auto it = m_grads.find(id);
    if (it == m_grads.end()) return false;
    auto* acc = std::any_cast<tensor<T, D>>(&it->second);
    if (!acc || ::fluxion::detail::autodiff_state::observers > 1 || acc->use_count() != 1) return false;
    if (scattered.value != T(0) || acc->shape() != scattered.shape()) return false;
    const fluxion::shape& s = scattered.shape();
    const auto st = contiguous_strides(s);
    std::vector<index_t> begin, end, steps;
    index_t offset = 0, strides[max_rank];
    for (int d = 0; d < s.rank(); ++d) {
      const index_t step = scattered.step(d), n = scattered.a.shape()[d], first = scattered.first(d);
      if (step <= 0) return false;
      if (n == 0) return true;
      begin.push_back(first);
      end.push_back(first + (n - 1) * step + 1);
      steps.push_back(step);
      offset += first * st[static_cast<std::size_t>(d)];
      strides[d] = step * st[static_cast<std::size_t>(d)];
    }
    ::fluxion::detail::assign_into(*acc, offset, strides, strided_slice(*acc, begin, end, steps) + scattered.a);
    return true;
  }
  template <class T, class D>
  void put(std::uint64_t id, tensor<T, D> g) {
    m_grads.insert_or_assign(id, std::any(std::move(g)));
  }
  /// Drops the gradient of `id` (the tape, once nothing can add to it or read it any more).
  void erase(std::uint64_t id) { m_grads.erase(id); }

 private:
  std::unordered_map<std::uint64_t, std::any> m_grads;
};

}  // namespace autodiff

class gradient_tape;

namespace detail {
struct tape_stack {
  static inline thread_local std::vector<gradient_tape*> tapes;
};
}  // namespace detail

// tape.gradient(target, {w, b}): the two overloads of gradient() that take a brace list of
// gradient_source, for a target tensor or expression (target_tensor materializes an expression
// first), with or without output_gradients; two rather than four, so that a list that does not
// convert lists half as many candidates. The count N is a template parameter deduced from the
// list's length. clang (14, Debian 12's) does not deduce it: with the element type in a
// non-deduced context, it still compares each element's type with gradient_source, and rejects
// `{w, b}` ("does not match adjusted type"), where the standard ([temp.deduct.call]) and g++
// convert each element. Under clang the list is the whole parameter's non-deduced type instead,
// and there is one pair per count, 1 to 16.
#define FLUXION_TAPE_SOURCE_LIST(N, ...)                                                                         \
  template <expression E __VA_ARGS__>                                                                            \
  auto gradient(const E& target, FLUXION_TAPE_SOURCES((gradient_source<value_type_t<E>, device_t<E>>), N) sources, \
                unconnected_gradients unconnected = unconnected_gradients::none) {                               \
    return unpackable<N>(gradient(target_tensor(target), source_pointers(sources), nullptr, unconnected));       \
  }                                                                                                              \
  template <expression E __VA_ARGS__>                                                                            \
  auto gradient(const E& target, FLUXION_TAPE_SOURCES((gradient_source<value_type_t<E>, device_t<E>>), N) sources, \
                const tensor<value_type_t<E>, device_t<E>>& output_gradients,                                    \
                unconnected_gradients unconnected = unconnected_gradients::none) {                               \
    return unpackable<N>(gradient(target_tensor(target), source_pointers(sources), &output_gradients,           \
                                  unconnected));                                                                 \
  }
#define FLUXION_TAPE_UNPAREN(...) __VA_ARGS__
namespace detail {
template <class S, std::size_t N>
using source_array = const S (&)[N];
}  // namespace detail
#if defined(__clang__)
#define FLUXION_TAPE_SOURCES(S, N) std::type_identity_t<detail::source_array<FLUXION_TAPE_UNPAREN S, N>>
#define FLUXION_TAPE_SOURCE_LISTS                                                                                \
  FLUXION_TAPE_SOURCE_LIST(1) FLUXION_TAPE_SOURCE_LIST(2) FLUXION_TAPE_SOURCE_LIST(3) FLUXION_TAPE_SOURCE_LIST(4)     \
  FLUXION_TAPE_SOURCE_LIST(5) FLUXION_TAPE_SOURCE_LIST(6) FLUXION_TAPE_SOURCE_LIST(7) FLUXION_TAPE_SOURCE_LIST(8)     \
  FLUXION_TAPE_SOURCE_LIST(9) FLUXION_TAPE_SOURCE_LIST(10) FLUXION_TAPE_SOURCE_LIST(11) FLUXION_TAPE_SOURCE_LIST(12) \
  FLUXION_TAPE_SOURCE_LIST(13) FLUXION_TAPE_SOURCE_LIST(14) FLUXION_TAPE_SOURCE_LIST(15) FLUXION_TAPE_SOURCE_LIST(16)
#else
#define FLUXION_TAPE_SOURCES(S, N) detail::source_array<std::type_identity_t<FLUXION_TAPE_UNPAREN S>, N>
#define FLUXION_TAPE_SOURCE_LISTS FLUXION_TAPE_SOURCE_LIST(N, , std::size_t N)
#endif

class gradient_tape {
 public:
  /// A one-shot tape that watches trainable variables it sees read.
  gradient_tape() : gradient_tape(false, true) {}
  explicit gradient_tape(persistent_t, bool watch_accessed_variables = true)
      : gradient_tape(true, watch_accessed_variables) {}
  /// With watch_accessed_variables = false, only tensors passed to watch() are tracked.
  explicit gradient_tape(bool watch_accessed_variables) : gradient_tape(false, watch_accessed_variables) {}

  gradient_tape(const gradient_tape&) = delete;
  gradient_tape& operator=(const gradient_tape&) = delete;

  ~gradient_tape();

  /// Tracks a tensor: materializations that read it are recorded.
  template <class T, class D>
  void watch(const tensor<T, D>& t) {
    m_tracked.insert(t.id());
  }
  template <class T, class D>
  void watch(const variable<T, D>& v) {
    const auto& t = v.peek();
    m_tracked.insert(t.id());
    m_variable_reads[v.id()].push_back(t.id());
  }

  bool persistent() const noexcept { return m_persistent; }
  bool recording() const noexcept { return m_paused == 0; }
  std::size_t entries() const noexcept { return m_entries.size(); }
  /// A number no other tape of this thread has had (1, 2, ... in the order they were made), where
  /// an address could be a later tape's: what nn models note of the tape their call ran under.
  std::uint64_t serial() const noexcept { return m_serial; }

  /// A scope inside the tape's scope that does not record.
  class stop_recording_scope {
   public:
    explicit stop_recording_scope(gradient_tape& t) : m_tape(&t) { ++t.m_paused; }
    ~stop_recording_scope() { --m_tape->m_paused; }
    stop_recording_scope(const stop_recording_scope&) = delete;
    stop_recording_scope& operator=(const stop_recording_scope&) = delete;

   private:
    gradient_tape* m_tape;
  };
  [[nodiscard]] stop_recording_scope stop_recording() { return stop_recording_scope(*this); }

  // ---- gradients ------------------------------------------------------------------------

  /// d sum(target) / d source; with output_gradients, the vector-Jacobian product with them.
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const Source& source,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    return std::move(gradient(target, std::vector<const Source*>{&source}, nullptr, unconnected)[0]);
  }
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const Source& source, const tensor<T, D>& output_gradients,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    return std::move(gradient(target, std::vector<const Source*>{&source}, &output_gradients, unconnected)[0]);
  }
  /// Gradients with respect to several sources, in order, as TensorFlow's
  /// `tape.gradient(loss, [w, b])`: variables and tensors of the target's element type and device,
  /// mixed or not (`{w, b}`, `{w, x}`: gradient_source), or `{std::cref(a), std::cref(b)}` of
  /// another element type; with output_gradients, the vector-Jacobian products with them. The
  /// result is a std::vector that also unpacks: `auto [dw, db] = tape.gradient(loss, {w, b});`
  /// (gradient_list).
  FLUXION_TAPE_SOURCE_LISTS
  template <class T, class D, class Source, std::size_t N>
    requires(!std::is_same_v<Source, tensor<T, D>> && !std::is_same_v<Source, variable<T, D>>)
  auto gradient(const tensor<T, D>& target, const std::reference_wrapper<const Source> (&sources)[N],
                unconnected_gradients unconnected = unconnected_gradients::none) {
    return unpackable<N>(gradient(target, pointers<Source>(sources), nullptr, unconnected));
  }
  template <class T, class D, class Source, std::size_t N>
    requires(!std::is_same_v<Source, tensor<T, D>> && !std::is_same_v<Source, variable<T, D>>)
  auto gradient(const tensor<T, D>& target, const std::reference_wrapper<const Source> (&sources)[N],
                const tensor<T, D>& output_gradients, unconnected_gradients unconnected = unconnected_gradients::none) {
    return unpackable<N>(gradient(target, pointers<Source>(sources), &output_gradients, unconnected));
  }
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const std::vector<Source*>& sources,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    std::vector<const std::remove_const_t<Source>*> p(sources.begin(), sources.end());
    return gradient(target, p, nullptr, unconnected);
  }
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const std::vector<Source*>& sources, const tensor<T, D>& output_gradients,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    std::vector<const std::remove_const_t<Source>*> p(sources.begin(), sources.end());
    return gradient(target, p, &output_gradients, unconnected);
  }
  /// TensorFlow's tape.gradient([target, *also], sources, output_gradients=[output_gradients, 1,
  /// ...]): target's vector-Jacobian product with output_gradients plus the gradient of each tensor
  /// of `also` (a layer's output and the losses it added: nn::recompute's backward pass).
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const std::vector<Source*>& sources, const tensor<T, D>& output_gradients,
                const std::vector<tensor<T, D>>& also, unconnected_gradients unconnected = unconnected_gradients::none) {
    std::vector<const std::remove_const_t<Source>*> p(sources.begin(), sources.end());
    return gradient(target, p, &output_gradients, unconnected, &also);
  }
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const std::vector<std::reference_wrapper<Source>>& sources,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    return gradient(target, pointers<std::remove_const_t<Source>>(sources), nullptr, unconnected);
  }
  template <class T, class D, class Source>
  auto gradient(const tensor<T, D>& target, const std::vector<std::reference_wrapper<Source>>& sources,
                const tensor<T, D>& output_gradients, unconnected_gradients unconnected = unconnected_gradients::none) {
    return gradient(target, pointers<std::remove_const_t<Source>>(sources), &output_gradients, unconnected);
  }
  /// A target expression is materialized first (and recorded, if it reads tracked tensors).
  template <expression E, class Source>
    requires(!is_tensor_v<E>)
  auto gradient(const E& target, const Source& source, unconnected_gradients unconnected = unconnected_gradients::none) {
    return gradient(detail::materialize(target), source, unconnected);
  }
  /// The same with output_gradients (DESIGN.md's `tape.gradient(y, {x1, x2}, dy)` of `auto y = ...`).
  template <expression E, class Source>
    requires(!is_tensor_v<E>)
  auto gradient(const E& target, const Source& source, const tensor<value_type_t<E>, device_t<E>>& output_gradients,
                unconnected_gradients unconnected = unconnected_gradients::none) {
    return gradient(detail::materialize(target), source, output_gradients, unconnected);
  }
  /// The full Jacobian: shape target.shape + source.shape.
  template <class T, class D, class Source>
  tensor<T, D> jacobian(const tensor<T, D>& target, const Source& source) {
    const index_t n = target.size();
    const shape ss = source_shape(source);
    std::vector<tensor<T, D>> rows;
    keep_entries keep(*this);
    for (index_t i = 0; i < n; ++i) {
      tensor<T, D> seed = one_hot_of<T, D>(target.shape(), i);
      rows.push_back(gradient(target, std::vector<const Source*>{&source}, &seed, unconnected_gradients::zero)[0]);
    }
    keep.release();
    shape out = target.shape();
    for (int d = 0; d < ss.rank(); ++d) out.push_back(ss[d]);
    if (rows.empty()) return tensor<T, D>(out);
    return tensor<T, D>(reshape(stack(std::move(rows), 0), out.to_vector()));
  }

  template <expression E, class Source>
    requires(!is_tensor_v<E>)
  auto jacobian(const E& target, const Source& source) {
    return jacobian(detail::materialize(target), source);
  }

  /// Per-example Jacobians: target (B, ...) and source (B, ...) give (B, target..., source...),
  /// assuming example b of the target depends only on example b of the source.
  template <class T, class D, class Source>
  tensor<T, D> batch_jacobian(const tensor<T, D>& target, const Source& source) {
    const shape ts = target.shape(), ss = source_shape(source);
    if (ts.rank() < 1 || ss.rank() < 1 || ts[0] != ss[0])
      throw shape_error("batch_jacobian: target " + to_string(ts) + " and source " + to_string(ss) +
                        " must share their first (batch) dimension");
    const index_t b = ts[0], m = ts.size() / std::max<index_t>(b, 1);
    std::vector<tensor<T, D>> cols;
    keep_entries keep(*this);
    for (index_t j = 0; j < m; ++j) {
      tensor<T, D> seed = per_example_one_hot<T, D>(ts, j);
      cols.push_back(gradient(target, std::vector<const Source*>{&source}, &seed, unconnected_gradients::zero)[0]);
    }
    keep.release();
    shape out{b};
    for (int d = 1; d < ts.rank(); ++d) out.push_back(ts[d]);
    for (int d = 1; d < ss.rank(); ++d) out.push_back(ss[d]);
    if (cols.empty()) return tensor<T, D>(out);
    return tensor<T, D>(reshape(stack(std::move(cols), 1), out.to_vector()));
  }  template <expression E, class Source>
    requires(!is_tensor_v<E>)
  auto batch_jacobian(const E& target, const Source& source) {
    return batch_jacobian(detail::materialize(target), source);
  }


  // ---- internals used by the recording hook, custom_gradient and forward mode ------------

  /// Whether `id` is watched or produced by a recorded entry.
  bool tracks(std::uint64_t id) const { return m_tracked.contains(id); }

  /// Records an entry producing `output`; backward(store) pushes its output's gradient down.
  template <class F>
  void record(std::uint64_t output, F&& backward) {
    if (!m_tracked.insert(output).second) return;  // the same cached tensor again: one entry is enough
    m_entries.push_back({output, autodiff::backward_function(std::forward<F>(backward))});
  }

  void on_variable_read(std::uint64_t variable_id, bool trainable, std::uint64_t tensor_id, const void* var,
                        const std::type_info& type);

  /// The trainable variables of type variable<T, D> read while this tape recorded, in the order
  /// they were first read (for implicit_gradients).
  template <class T, class D>
  std::vector<const variable<T, D>*> variables_read() const {
    std::vector<const variable<T, D>*> out;
    for (auto [p, ti] : m_variable_order)
      if (*ti == typeid(variable<T, D>)) out.push_back(static_cast<const variable<T, D>*>(p));
    return out;
  }

 private:
  struct entry {
    std::uint64_t output;
    autodiff::backward_function backward;
  };

  gradient_tape(bool persistent, bool watch_variables);

  static void variable_hook(std::uint64_t variable_id, bool trainable, std::uint64_t tensor_id, const void* var,
                            const std::type_info& type);
  static void update_variable_hook() {
    detail::variable_read_observer::on_read = detail::tape_stack::tapes.empty() ? nullptr : &variable_hook;
  }

  // jacobian() calls gradient() many times on one recording, even on a one-shot tape.
  struct keep_entries {
    gradient_tape& t;
    bool was;
    explicit keep_entries(gradient_tape& tp) : t(tp), was(tp.m_keep) { t.m_keep = true; }
    void release() {
      t.m_keep = was;
      if (!t.m_keep && !t.m_persistent) t.finish();
    }
    ~keep_entries() { t.m_keep = was; }
  };

  void finish();

  /// A target tensor as it is; a target expression materialized first (and recorded, if it reads
  /// tracked tensors).
  template <class E>
  static decltype(auto) target_tensor(const E& target) {
    if constexpr (is_tensor_v<E>) return (target);
    else return detail::materialize(target);
  }

  template <std::size_t N, class Tensor>
  static gradient_list<Tensor, N> unpackable(std::vector<Tensor>&& gradients) {
    return gradient_list<Tensor, N>(std::move(gradients));
  }

  template <class T, class D, std::size_t N>
  static std::vector<const gradient_source<T, D>*> source_pointers(const gradient_source<T, D> (&sources)[N]) {
    std::vector<const gradient_source<T, D>*> p;
    p.reserve(N);
    for (const auto& s : sources) p.push_back(&s);
    return p;
  }
  template <class S>
  static bool is_variable_source(const S& s) {
    if constexpr (is_variable_v<S>) return true;
    else if constexpr (requires { s.is_variable(); }) return s.is_variable();
    else return false;
  }

  template <class Source, class List>
  static std::vector<const Source*> pointers(const List& sources) {
    std::vector<const Source*> p;
    for (const auto& s : sources) p.push_back(&s.get());
    return p;
  }

  template <class S>
  static shape source_shape(const S& s) {
    return s.shape();
  }

  template <class T, class D>
  static tensor<T, D> one_hot_of(const shape& s, index_t i) {
    tensor<T, D> flat = one_hot<T>(tensor<index_t, D>(i), s.size());
    return tensor<T, D>(flat, s, ::fluxion::detail::same_buffer);
  }
  template <class T, class D>
  static tensor<T, D> per_example_one_hot(const shape& s, index_t j) {
    const index_t b = s[0], m = s.size() / std::max<index_t>(b, 1);
    tensor<T, D> rows = broadcast_to(one_hot<T>(tensor<index_t, D>(j), m), {b, m});
    return tensor<T, D>(rows, s, ::fluxion::detail::same_buffer);
  }

  template <class T, class D, class S>
  std::uint64_t source_id(const S& s) const {
    if constexpr (is_variable_v<S>) return s.id();
    else return s.id();
  }

  template <class T, class D, class Source>
  std::vector<tensor<value_type_t<Source>, D>> gradient(const tensor<T, D>& target, const std::vector<const Source*>& sources,
                                                        const std::type_identity_t<tensor<T, D>>* output_gradients,
                                                        unconnected_gradients unconnected,
                                                        const std::vector<tensor<T, D>>* also = nullptr) {
    using S = value_type_t<Source>;
    static_assert(std::is_floating_point_v<S>,
                  "fluxion::gradient_tape::gradient: a source of integer or bool elements has no gradient "
                  "(TensorFlow returns None for one); take the gradient with respect to a float or double tensor "
                  "or variable (fluxion::cast<float>(k), watched, where the integers stand for values)");
    if (m_used)
      throw error("gradient_tape: gradient() was already called on this non-persistent tape; construct it with "
                  "fluxion::persistent to call it more than once");
    if (output_gradients && output_gradients->shape() != target.shape())
      throw shape_error("gradient: output_gradients of shape " + to_string(output_gradients->shape()) +
                        " do not match the target's shape " + to_string(target.shape()));
    autodiff::gradient_store store;
    {
      stop_recording_scope quiet(*this);  // the backward pass is not recorded on this tape
      store.put(target.id(), output_gradients ? *output_gradients
                                              : tensor<T, D>(broadcast_to(scalar_expr<T, D>(T(1)), target.shape())));
      if (also)
        for (const tensor<T, D>& a : *also) store.add<0>(a.id(), tensor<T, D>(broadcast_to(scalar_expr<T, D>(T(1)), a.shape())));
      // A one-shot tape frees as it goes, as PyTorch's backward without retain_graph: once an
      // entry has run, nothing adds to its output's gradient any more (the entries that read the
      // output were recorded after it, so they ran before it), so that gradient is dropped unless
      // it was asked for, and so is the entry with the activations it kept. Peak memory of a
      // backward pass is then the activations not yet reached plus the gradients in flight, not
      // every activation and every gradient at once.
      const bool release = !m_persistent && !m_keep;
      std::unordered_set<std::uint64_t> asked;
      if (release)
        for (const Source* src : sources) {
          asked.insert(src->id());
          if (is_variable_source(*src))
            if (auto v = m_variable_reads.find(src->id()); v != m_variable_reads.end()) asked.insert(v->second.begin(), v->second.end());
        }
      for (auto it = m_entries.rbegin(); it != m_entries.rend(); ++it) {
        it->backward(store);
        if (release) {
          it->backward.reset();
          if (!asked.contains(it->output)) store.erase(it->output);
        }
      }
    }
    std::vector<tensor<S, D>> out;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const Source* src = sources[i];
      const tensor<S, D>* g = nullptr;
      tensor<S, D> sum;
      if (is_variable_source(*src)) {
        auto it = m_variable_reads.find(src->id());
        if (it != m_variable_reads.end()) {
          bool first = true;
          for (std::uint64_t tid : it->second)
            if (const auto* gi = store.find<S, D>(tid)) {
              sum = first ? *gi : tensor<S, D>(sum + *gi);
              first = false;
            }
          if (!first) g = &sum;
        }
      } else {
        g = store.find<S, D>(src->id());
      }
      if (g) out.push_back(*g);
      else if (m_unrecorded > 0) throw_unrecorded(i, sources.size(), src->shape());
      else if (unconnected == unconnected_gradients::zero)
        out.push_back(tensor<S, D>(broadcast_to(scalar_expr<S, D>(S(0)), src->shape())));
      else
        out.push_back(tensor<S, D>::none());
    }
    if (!m_persistent && !m_keep) finish();
    return out;
  }

  friend class stop_recording_scope;
  friend void detail::note_unrecorded_statement();

  /// No gradient reaches a source, and statements ran that this tape could not record: their code
  /// was compiled without autodiff (FLUXION_MAX_DERIVATIVE_ORDER=0), so the missing gradient is
  /// more likely theirs than TensorFlow's None for an unconnected source.
  [[noreturn]] void throw_unrecorded(std::size_t index, std::size_t count, const shape& source) const;

  std::vector<entry> m_entries;
  std::unordered_set<std::uint64_t> m_tracked;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> m_variable_reads;
  std::vector<std::pair<const void*, const std::type_info*>> m_variable_order;
  bool m_persistent = false;
  bool m_watch_variables = true;
  bool m_used = false;
  bool m_keep = false;
  int m_paused = 0;
  std::uint64_t m_unrecorded = 0;  // statements that ran while this tape recorded, but could not be recorded
  std::uint64_t m_serial = next_serial();

  static std::uint64_t next_serial() noexcept {
    static thread_local std::uint64_t made = 0;
    return ++made;
  }
};
#undef FLUXION_TAPE_SOURCE_LISTS
#undef FLUXION_TAPE_SOURCE_LIST
#undef FLUXION_TAPE_SOURCES
#undef FLUXION_TAPE_UNPAREN

namespace detail {
/// Pauses every gradient tape of this thread for the scope's lifetime (custom_gradient's wrapped
/// function, fx::evaluate).
class all_tapes_paused {
 public:
  all_tapes_paused();

 private:
  std::vector<std::unique_ptr<gradient_tape::stop_recording_scope>> m_scopes;
};
}  // namespace detail

// The tape's non-template code: compiled once in src/kernels.cpp for programs with prebuilt kernels
// (core/prebuilt.hpp); the tape's layout does not depend on the autodiff settings.
#if FLUXION_CORE_DEFINITIONS
FLUXION_CORE_INLINE gradient_tape::gradient_tape(bool persistent, bool watch_variables)
    : m_persistent(persistent), m_watch_variables(watch_variables) {
  detail::tape_stack::tapes.push_back(this);
  ++detail::autodiff_state::observers;
  update_variable_hook();
}

FLUXION_CORE_INLINE gradient_tape::~gradient_tape() {
  std::erase(detail::tape_stack::tapes, this);
  --detail::autodiff_state::observers;
  update_variable_hook();
}

FLUXION_CORE_INLINE void gradient_tape::on_variable_read(std::uint64_t variable_id, bool trainable,
                                                         std::uint64_t tensor_id, const void* var,
                                                         const std::type_info& type) {
  if (m_paused || !m_watch_variables || !trainable) return;
  m_tracked.insert(tensor_id);
  auto& reads = m_variable_reads[variable_id];
  if (reads.empty()) m_variable_order.push_back({var, &type});
  if (reads.empty() || reads.back() != tensor_id) reads.push_back(tensor_id);
}

FLUXION_CORE_INLINE void gradient_tape::variable_hook(std::uint64_t variable_id, bool trainable,
                                                      std::uint64_t tensor_id, const void* var,
                                                      const std::type_info& type) {
  for (gradient_tape* t : detail::tape_stack::tapes) t->on_variable_read(variable_id, trainable, tensor_id, var, type);
}

FLUXION_CORE_INLINE void gradient_tape::finish() {
  m_entries.clear();
  m_tracked.clear();
  m_variable_reads.clear();
  m_variable_order.clear();
  m_used = true;
}

FLUXION_CORE_INLINE void detail::note_unrecorded_statement() {
  for (gradient_tape* t : tape_stack::tapes)
    if (t->recording()) ++t->m_unrecorded;
}

FLUXION_CORE_INLINE void gradient_tape::throw_unrecorded(std::size_t index, std::size_t count, const shape& source) const {
  throw error("gradient_tape::gradient: no gradient reaches source " + std::to_string(index) + " of " +
              std::to_string(count) + " (shape " + to_string(source) + "), and the tape could not record " +
              std::to_string(m_unrecorded) + (m_unrecorded == 1 ? " statement" : " statements") +
              " that ran while it recorded: code compiled with FLUXION_MAX_DERIVATIVE_ORDER=0 (autodiff off) "
              "materialized " + (m_unrecorded == 1 ? "it" : "them") + ". Compile the code that computes the target with "
              "FLUXION_MAX_DERIVATIVE_ORDER 1 or more (the default), or run the statements the target does not "
              "depend on under tape.stop_recording()");
}

FLUXION_CORE_INLINE detail::all_tapes_paused::all_tapes_paused() {
  for (gradient_tape* t : tape_stack::tapes) m_scopes.push_back(std::make_unique<gradient_tape::stop_recording_scope>(*t));
}
#endif  // FLUXION_CORE_DEFINITIONS

}  // namespace fluxion

// The tuple protocol that lets `auto [dw, db] = tape.gradient(loss, {w, b});` unpack.
template <class Tensor, std::size_t N>
struct std::tuple_size<fluxion::gradient_list<Tensor, N>> : std::integral_constant<std::size_t, N> {};
template <std::size_t I, class Tensor, std::size_t N>
struct std::tuple_element<I, fluxion::gradient_list<Tensor, N>> {
  using type = Tensor;
};

#endif  // FLUXION_AUTODIFF_TAPE_HPP
