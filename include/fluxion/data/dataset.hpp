// fx::data::dataset<Element>: a lazy, streaming input pipeline, as tf.data.Dataset.
//
//   auto ds = fx::data::idx_images("train-images-idx3-ubyte.gz")          // (28, 28, 1) float
//                 .zip(fx::data::idx_labels("train-labels-idx1-ubyte.gz")) // () int32
//                 .shuffle(10000, /*seed=*/42).batch(64).prefetch(2);
//   for (auto [images, labels] : ds) { ... }          // (64, 28, 28, 1) float, (64,) int32
//   auto it = ds.open();                               // or explicitly:
//   while (auto element = it.next()) { ... }           // std::optional<Element>
//
// A dataset is a recipe, cheap to copy: nothing is read until it is iterated, and every iteration
// (each range-for, each open()) starts again from the beginning. An element is a tensor, a
// std::tuple or std::pair of elements, or any movable value (tfrecord() yields std::string records,
// which map(parse_example) turns into tensors). Each transform returns a new dataset; the type is
// erased (dataset<Element> only names the element), so a pipeline costs one indirect call per
// element and per stage, little next to the work of a batch, and long pipelines compile fast.
//
// Transforms, with tf.data's meaning:
//   map(f)                     f(element), or f(parts...) when the element is a tuple; expressions
//                              that f returns are materialized into tensors
//   shuffle(buffer, seed)      a uniform shuffle buffer of `buffer` elements; the order depends on
//                              the seed and on the pass number (each iteration reshuffles, as
//                              reshuffle_each_iteration=True) and on nothing else: not on threads,
//                              prefetch or timing
//   batch(n, drop_remainder)   stacks n elements along a new leading axis (tuples part by part);
//                              the last batch is short unless drop_remainder
//   repeat(count = -1)         count passes, or forever
//   take(n)                    the first n elements
//   skip(n)                    all but the first n (ds.take(n) and ds.skip(n) split a dataset)
//   filter(pred)               the elements for which pred(element) is true
//   concatenate(other)         this dataset's elements, then other's
//   cache()                    the elements of the first full pass kept in memory and replayed on
//                              every later one (the upstream's pass 0: put it before shuffle)
//   zip(other)                 std::tuple{a, b}; ends with the shorter
//   prefetch(n)                keeps up to n elements ready, made on a background thread and on the
//                              thread pool's idle workers; an exception of the producer is rethrown
//                              by next(), and destroying the iterator stops it
//   prefetch_to<Device>(n)     prefetch(n) with the elements' tensors copied to Device (fx::cuda:
//                              include <fluxion/cuda.hpp>), as tf.data's prefetch_to_device
// cardinality() is the number of elements when it is known, infinite_cardinality (-1) or
// unknown_cardinality (-2) otherwise.
//
// Passes are numbered. open() and range-for start pass 0, 1, 2, ... of this dataset object (and its
// copies) in turn; open(n) and begin(n) start pass n itself, whatever came before, so epoch n of a
// training run sees the same order in a fresh process as in the first one (fx::fit opens epoch n as
// pass n, and a resumed run continues in the same order). repeat() numbers the passes it makes of
// its upstream after its own.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#include "../backend/cpu/thread_pool.hpp"
#include "../core/error.hpp"
#include "../core/shape.hpp"
#include "../expr/forward.hpp"
#include "../tensor/random.hpp"
#include "../tensor/tensor.hpp"

namespace fluxion::data {

inline constexpr std::int64_t infinite_cardinality = -1;
inline constexpr std::int64_t unknown_cardinality = -2;

template <class Element>
class dataset;

namespace detail {

template <class T>
inline constexpr bool is_tuple_like_v = false;
template <class... T>
inline constexpr bool is_tuple_like_v<std::tuple<T...>> = true;
template <class A, class B>
inline constexpr bool is_tuple_like_v<std::pair<A, B>> = true;

/// What map stores for a value f returns: expressions become tensors, tuples part by part.
template <class R>
struct materialized {
  using type = std::remove_cvref_t<R>;
};
template <class R>
  requires(is_expression_v<R> && !is_tensor_v<std::remove_cvref_t<R>>)
struct materialized<R> {
  using type = tensor<value_type_t<R>, device_t<R>>;
};
template <class... T>
struct materialized<std::tuple<T...>> {
  using type = std::tuple<typename materialized<T>::type...>;
};
template <class A, class B>
struct materialized<std::pair<A, B>> {
  using type = std::pair<typename materialized<A>::type, typename materialized<B>::type>;
};
template <class R>
using materialized_t = typename materialized<std::remove_cvref_t<R>>::type;

template <class R>
materialized_t<R> materialize_element(R&& r) {
  using M = materialized_t<R>;
  if constexpr (std::is_same_v<M, std::remove_cvref_t<R>>) return std::forward<R>(r);
  else if constexpr (is_tuple_like_v<M>)
    return std::apply([](auto&&... parts) { return M{materialize_element(std::forward<decltype(parts)>(parts))...}; },
                      std::forward<R>(r));
  else return M(r);
}

template <class F, class E>
decltype(auto) invoke_on(F& f, E&& e) {
  if constexpr (std::is_invocable_v<F&, E&&>) return std::invoke(f, std::forward<E>(e));
  else if constexpr (is_tuple_like_v<std::remove_cvref_t<E>>) return std::apply(f, std::forward<E>(e));
  else static_assert(std::is_invocable_v<F&, E&&>, "fluxion::data::dataset::map / filter: f cannot be called with the element (nor with the parts of a tuple element)");
}

/// What a thread that makes elements for another thread uses when the elements hold no tensors of
/// an asynchronous device: no scope, nothing to wait for.
struct synchronous_elements {
  struct thread_scope {};
  static void fence() noexcept {}
};

/// The first of the candidates that is not synchronous_elements (the last when all are).
template <class First, class... Rest>
constexpr auto first_asynchronous(First first, Rest... rest) {
  if constexpr (!std::is_same_v<typename First::type, synchronous_elements> || sizeof...(Rest) == 0) return first;
  else return first_asynchronous(rest...);
}

/// How a thread makes elements of type E for another thread (dataset::prefetch): the device memory
/// of the first device with tensors in E whose work is asynchronous (fx::cuda), which gives the
/// thread_scope to make them in (fx::own_stream: a stream of the thread's own) and the fence() that
/// finishes them before they are handed over (backend/cuda/stream.hpp); else
/// synchronous_elements. As a std::type_identity.
template <class E>
constexpr auto element_producer() {
  if constexpr (is_tensor_v<E>) {
    using memory = ::fluxion::detail::device_memory<device_t<E>>;
    if constexpr (requires { typename memory::thread_scope; }) return std::type_identity<memory>{};
    else return std::type_identity<synchronous_elements>{};
  } else if constexpr (is_tuple_like_v<E>) {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return first_asynchronous(std::type_identity<synchronous_elements>{},
                                element_producer<std::tuple_element_t<I, E>>()...);
    }(std::make_index_sequence<std::tuple_size_v<E>>{});
  } else {
    return std::type_identity<synchronous_elements>{};
  }
}

template <class E>
inline constexpr bool is_pair_v = false;
template <class A, class B>
inline constexpr bool is_pair_v<std::pair<A, B>> = true;

/// The element with each cpu tensor in it copied to Device (tuples and pairs part by part; tensors
/// already there and other values as they are).
template <class Device, class E>
auto element_to_device(const E& e) {
  if constexpr (is_tensor_v<E>) {
    if constexpr (std::is_same_v<device_t<E>, cpu>) return ::fluxion::detail::device_copy<Device>(e);
    else return e;
  } else if constexpr (is_tuple_like_v<E>) {
    return std::apply(
        [](const auto&... parts) {
          // A pair stays a pair; any other tuple (three parts and more: (x, y, sample_weight)) a tuple.
          if constexpr (is_pair_v<E>) return std::pair{element_to_device<Device>(parts)...};
          else return std::tuple{element_to_device<Device>(parts)...};
        },
        e);
  } else {
    return e;
  }
}

template <class F, class E>
using map_result_t = materialized_t<decltype(invoke_on(std::declval<F&>(), std::declval<E>()))>;

/// Stacks n tensors of one shape into one of shape (n, ...).
template <class T, class D>
tensor<T, D> stack_tensors(std::vector<tensor<T, D>>& parts, const char* op) {
  static_assert(std::is_same_v<D, cpu>, "fluxion::data: batch stacks host (fluxion::cpu) tensors");
  const shape& first = parts.front().shape();
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].shape() != first)
      throw shape_error(std::string(op) + ": element " + std::to_string(i) + " of the batch has shape " +
                        to_string(parts[i].shape()) + " but element 0 has shape " + to_string(first) +
                        "; batch needs elements of one shape (map them to one shape first)");
  std::vector<index_t> dims{static_cast<index_t>(parts.size())};
  for (index_t d : first) dims.push_back(d);
  tensor<T, D> out{shape(dims)};
  const std::size_t n = static_cast<std::size_t>(first.size());
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (n) std::memcpy(out.mutable_data() + i * n, parts[i].data(), n * sizeof(T));
  return out;
}

template <class E>
E stack(std::vector<E>& parts, const char* op) {
  if constexpr (is_tensor_v<E>) {
    return stack_tensors(parts, op);
  } else if constexpr (is_tuple_like_v<E>) {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      auto column = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
        std::vector<std::remove_cvref_t<std::tuple_element_t<J, E>>> c;
        c.reserve(parts.size());
        for (auto& p : parts) c.push_back(std::move(std::get<J>(p)));
        return stack(c, op);
      };
      return E{column(std::integral_constant<std::size_t, I>{})...};
    }(std::make_index_sequence<std::tuple_size_v<E>>{});
  } else {
    static_assert(is_tensor_v<E>, "fluxion::data::dataset::batch: elements must be tensors, or tuples or pairs of "
                                  "tensors; map other elements (records, examples) to tensors first");
  }
}

}  // namespace detail

/// One pass over a dataset: next() returns the elements in order, then std::nullopt.
template <class Element>
class iterator {
 public:
  using next_fn = std::function<std::optional<Element>()>;
  iterator() = default;
  explicit iterator(next_fn next) : m_next(std::move(next)) {}
  /// The next element, or std::nullopt when the pass is over (and at every later call).
  std::optional<Element> next() {
    if (!m_next) return std::nullopt;
    auto e = m_next();
    if (!e) m_next = nullptr;  // releases the upstream (files, threads) at once
    return e;
  }

 private:
  next_fn m_next;
};

/// The input iterator range-for uses.
template <class Element>
class range_iterator {
 public:
  using value_type = Element;
  using difference_type = std::ptrdiff_t;
  range_iterator() = default;
  explicit range_iterator(iterator<Element> it) : m_it(std::make_shared<iterator<Element>>(std::move(it))) { ++*this; }
  Element& operator*() const { return **m_current; }
  Element* operator->() const { return &**m_current; }
  range_iterator& operator++() {
    *m_current = m_it->next();
    return *this;
  }
  void operator++(int) { ++*this; }
  friend bool operator==(const range_iterator& a, std::default_sentinel_t) { return !a.m_current || !*a.m_current; }

 private:
  std::shared_ptr<iterator<Element>> m_it;
  std::shared_ptr<std::optional<Element>> m_current = std::make_shared<std::optional<Element>>();
};

template <class Element>
class dataset {
 public:
  using element_type = Element;
  using next_fn = typename iterator<Element>::next_fn;
  /// Makes the next_fn of pass `pass`; called once per iteration.
  using open_fn = std::function<next_fn(std::uint64_t pass)>;

  /// A dataset from a function that starts a pass and returns its next() function: open(pass), or
  /// open() for a source whose passes are all alike.
  template <class F>
    requires std::is_invocable_r_v<next_fn, F&, std::uint64_t> || std::is_invocable_r_v<next_fn, F&>
  explicit dataset(F open, std::int64_t cardinality = unknown_cardinality) : m_cardinality(cardinality) {
    if constexpr (std::is_invocable_r_v<next_fn, F&, std::uint64_t>)
      m_open = std::make_shared<const open_fn>(std::move(open));
    else
      m_open = std::make_shared<const open_fn>([f = std::move(open)](std::uint64_t) mutable { return f(); });
  }

  /// Starts the next pass of this dataset object: 0, 1, 2, ...
  iterator<Element> open() const { return open(m_passes->fetch_add(1)); }
  /// Starts pass `pass`, the same elements in the same order whenever it is started.
  iterator<Element> open(std::uint64_t pass) const { return iterator<Element>((*m_open)(pass)); }
  range_iterator<Element> begin() const { return range_iterator<Element>(open()); }
  range_iterator<Element> begin(std::uint64_t pass) const { return range_iterator<Element>(open(pass)); }
  std::default_sentinel_t end() const { return {}; }

  std::int64_t cardinality() const noexcept { return m_cardinality; }

  /// Applies f to each element; a tuple element may be taken as separate arguments.
  template <class F>
  dataset<detail::map_result_t<F, Element>> map(F f) const {
    using R = detail::map_result_t<F, Element>;
    auto up = m_open;
    auto fn = std::make_shared<F>(std::move(f));
    return dataset<R>(
        [up, fn](std::uint64_t pass) -> typename dataset<R>::next_fn {
          return [next = (*up)(pass), fn]() mutable -> std::optional<R> {
            auto e = next();
            if (!e) return std::nullopt;
            return detail::materialize_element(detail::invoke_on(*fn, std::move(*e)));
          };
        },
        m_cardinality);
  }

  /// A uniform shuffle buffer of `buffer_size` elements, deterministic for the seed.
  dataset shuffle(std::size_t buffer_size, std::uint64_t seed, bool reshuffle_each_iteration = true) const {
    if (buffer_size == 0) throw invalid_argument("shuffle: buffer_size must be at least 1, got 0");
    auto up = m_open;
    return dataset(
        [up, buffer_size, seed, reshuffle_each_iteration](std::uint64_t upstream_pass) -> next_fn {
          const std::uint64_t pass = reshuffle_each_iteration ? upstream_pass : 0;
          struct state {
            next_fn next;
            std::vector<Element> buffer;
            random::generator gen;
            std::uint32_t pass;
            std::uint64_t drawn = 0;
            bool upstream_done = false;
          };
          // The low 32 bits of the pass pick Philox's attempt, the high ones (an endless repeat's
          // passes) perturb the key, so that passes below 2^32 keep the order they always had.
          const random::generator gen(seed + 0x9E3779B97F4A7C15ull * (pass >> 32));
          auto s = std::make_shared<state>(state{(*up)(upstream_pass), {}, gen, static_cast<std::uint32_t>(pass)});
          s->buffer.reserve(std::min<std::size_t>(buffer_size, 1 << 16));
          return [s, buffer_size]() -> std::optional<Element> {
            while (!s->upstream_done && s->buffer.size() < buffer_size) {
              auto e = s->next();
              if (!e) {
                s->upstream_done = true;
                s->next = nullptr;
                break;
              }
              s->buffer.push_back(std::move(*e));
            }
            if (s->buffer.empty()) return std::nullopt;
            // Block `drawn` of the stream for attempt `pass`: 64 bits, scaled to [0, size).
            const auto block = s->gen.block(s->drawn++, s->pass);
            const std::uint64_t bits = (static_cast<std::uint64_t>(block[1]) << 32) | block[0];
            const auto n = static_cast<unsigned __int128>(s->buffer.size());
            const auto i = static_cast<std::size_t>((static_cast<unsigned __int128>(bits) * n) >> 64);
            Element out = std::move(s->buffer[i]);
            if (!s->upstream_done) {
              if (auto e = s->next()) {
                s->buffer[i] = std::move(*e);
                return out;
              }
              s->upstream_done = true;
              s->next = nullptr;
            }
            if (i + 1 != s->buffer.size()) s->buffer[i] = std::move(s->buffer.back());
            s->buffer.pop_back();
            return out;
          };
        },
        m_cardinality);
  }

  /// Stacks `batch_size` consecutive elements along a new leading axis.
  dataset batch(std::int64_t batch_size, bool drop_remainder = false) const {
    if (batch_size < 1) throw invalid_argument("batch: batch_size must be at least 1, got " + std::to_string(batch_size));
    auto up = m_open;
    std::int64_t card = m_cardinality;
    if (card >= 0) card = drop_remainder ? card / batch_size : (card + batch_size - 1) / batch_size;
    return dataset(
        [up, batch_size, drop_remainder](std::uint64_t pass) -> next_fn {
          return [next = (*up)(pass), batch_size, drop_remainder]() mutable -> std::optional<Element> {
            if (!next) return std::nullopt;
            std::vector<Element> parts;
            parts.reserve(static_cast<std::size_t>(batch_size));
            while (static_cast<std::int64_t>(parts.size()) < batch_size) {
              auto e = next();
              if (!e) {
                next = nullptr;
                break;
              }
              parts.push_back(std::move(*e));
            }
            if (parts.empty() || (drop_remainder && static_cast<std::int64_t>(parts.size()) < batch_size))
              return std::nullopt;
            return detail::stack(parts, "batch");
          };
        },
        card);
  }

  /// `count` passes over this dataset, or endless ones when count is -1. A pass that yields
  /// nothing ends the repetition (no endless loop over an empty dataset).
  dataset repeat(std::int64_t count = -1) const {
    if (count < -1) throw invalid_argument("repeat: count must be -1 (forever) or at least 0, got " + std::to_string(count));
    auto up = m_open;
    std::int64_t card = m_cardinality;
    if (count == 0 || card == 0) card = 0;
    else if (count == -1) card = card == unknown_cardinality ? unknown_cardinality : infinite_cardinality;
    else if (card > 0) card *= count;
    return dataset(
        [up, count](std::uint64_t pass) -> next_fn {
          struct state {
            next_fn next;
            std::int64_t passes = 0;
            bool pass_empty = true;
            std::uint64_t first_upstream_pass;
          };
          // Pass p of a repeat(count) makes upstream passes p * count, p * count + 1, ...; an endless
          // repeat makes p << 32, (p << 32) + 1, ...
          auto s = std::make_shared<state>(state{nullptr, 0, true, count == -1 ? pass << 32 : pass * static_cast<std::uint64_t>(count)});
          return [s, up, count]() -> std::optional<Element> {
            for (;;) {
              if (!s->next) {
                if (count != -1 && s->passes >= count) return std::nullopt;
                if (s->passes > 0 && s->pass_empty) return std::nullopt;
                s->next = (*up)(s->first_upstream_pass + static_cast<std::uint64_t>(s->passes));
                ++s->passes;
                s->pass_empty = true;
              }
              if (auto e = s->next()) {
                s->pass_empty = false;
                return e;
              }
              s->next = nullptr;
            }
          };
        },
        card);
  }

  /// Keeps the elements of the upstream's pass 0 in memory once a pass has read it to the end, and
  /// replays them on every later pass (tf.data's cache() without a file): a source that decodes or
  /// decompresses (IDX .gz, CSV, TFRecord) is read once instead of once per epoch. It always reads
  /// the upstream's pass 0, so every pass, in any process, holds the same elements in the same
  /// order; put it before shuffle and random maps, which it would otherwise freeze, as in tf.data.
  /// Elements are kept as they are (a tensor is a shared handle, not a copy of its data). A pass
  /// that stops early (take, steps_per_epoch, an exception) keeps nothing, and the next pass reads
  /// the upstream again. Copies of the dataset share the cache.
  dataset cache() const {
    static_assert(std::is_copy_constructible_v<Element>, "fluxion::data::dataset::cache: elements must be copyable");
    struct shared {
      std::mutex mutex;
      std::shared_ptr<const std::vector<Element>> elements;  // set once a pass has read everything
    };
    auto up = m_open;
    auto cache = std::make_shared<shared>();
    return dataset(
        [up, cache](std::uint64_t) -> next_fn {
          std::shared_ptr<const std::vector<Element>> filled;
          {
            std::lock_guard<std::mutex> lk(cache->mutex);
            filled = cache->elements;
          }
          if (filled)
            return [filled, i = std::size_t{0}]() mutable -> std::optional<Element> {
              if (i == filled->size()) return std::nullopt;
              return (*filled)[i++];
            };
          auto collected = std::make_shared<std::vector<Element>>();
          return [next = (*up)(0), collected, cache]() mutable -> std::optional<Element> {
            if (!next) return std::nullopt;
            auto e = next();
            if (!e) {
              next = nullptr;
              std::lock_guard<std::mutex> lk(cache->mutex);
              if (!cache->elements) cache->elements = std::move(collected);
              return std::nullopt;
            }
            collected->push_back(*e);
            return e;
          };
        },
        m_cardinality);
  }

  /// The first `count` elements (all of them when count is -1).
  dataset take(std::int64_t count) const {
    if (count < -1) throw invalid_argument("take: count must be -1 (all) or at least 0, got " + std::to_string(count));
    if (count == -1) return *this;
    auto up = m_open;
    std::int64_t card = m_cardinality;
    if (card == infinite_cardinality || card > count) card = count;
    return dataset(
        [up, count](std::uint64_t pass) -> next_fn {
          return [next = count > 0 ? (*up)(pass) : next_fn{}, left = count]() mutable -> std::optional<Element> {
            if (left <= 0) {
              next = nullptr;
              return std::nullopt;
            }
            --left;
            return next();
          };
        },
        card);
  }

  /// Every num_shards-th element from element `index` on (elements i with i % num_shards == index),
  /// as tf.data's shard: the part of a dataset that one of num_shards processes trains on
  /// (`ds.shard(comm.size(), comm.rank())`, <fluxion/distributed.hpp>). Shard before shuffling and
  /// batching, so that the processes' parts are disjoint and, batched with drop_remainder, of the
  /// same length.
  dataset shard(std::int64_t num_shards, std::int64_t index) const {
    if (num_shards < 1) throw invalid_argument("shard: num_shards must be at least 1, got " + std::to_string(num_shards));
    if (index < 0 || index >= num_shards)
      throw out_of_range("shard: index = " + std::to_string(index) + " is not in [0, " + std::to_string(num_shards) + ")");
    if (num_shards == 1) return *this;
    auto up = m_open;
    std::int64_t card = m_cardinality;
    if (card >= 0) card = card > index ? (card - index + num_shards - 1) / num_shards : 0;
    return dataset(
        [up, num_shards, index](std::uint64_t pass) -> next_fn {
          return [next = (*up)(pass), num_shards, index, at = std::int64_t{0}]() mutable -> std::optional<Element> {
            while (next) {
              auto e = next();
              if (!e) {
                next = nullptr;
                break;
              }
              if (at++ % num_shards == index) return e;
            }
            return std::nullopt;
          };
        },
        card);
  }

  /// All but the first `count` elements (none when count is -1), as tf.data's skip: with take, the
  /// split of one dataset into two, `ds.take(n)` and `ds.skip(n)`.
  dataset skip(std::int64_t count) const {
    if (count < -1) throw invalid_argument("skip: count must be -1 (all) or at least 0, got " + std::to_string(count));
    if (count == 0) return *this;
    auto up = m_open;
    std::int64_t card = m_cardinality;
    if (count == -1) card = 0;
    else if (card >= 0) card = std::max<std::int64_t>(card - count, 0);
    return dataset(
        [up, count](std::uint64_t pass) -> next_fn {
          return [next = (*up)(pass), left = count]() mutable -> std::optional<Element> {
            if (!next) return std::nullopt;
            while (left != 0) {
              if (!next()) {  // the upstream ended inside the skipped part (or skip(-1) reached its end)
                next = nullptr;
                return std::nullopt;
              }
              if (left > 0) --left;
            }
            return next();
          };
        },
        card);
  }

  /// The elements for which pred(element) (or pred(parts...) for a tuple element) is true, in order,
  /// as tf.data's filter. The cardinality becomes unknown.
  template <class P>
  dataset filter(P pred) const {
    constexpr bool returns_bool =
        std::is_convertible_v<decltype(detail::invoke_on(std::declval<P&>(), std::declval<const Element&>())), bool>;
    static_assert(returns_bool,
                  "fluxion::data::dataset::filter: the predicate must return bool (or a value convertible to bool)");
    if constexpr (!returns_bool) return *this;  // the message above, and no other
    else return filtered(std::move(pred));
  }

 private:
  template <class P>
  dataset filtered(P pred) const {
    auto up = m_open;
    auto fn = std::make_shared<P>(std::move(pred));
    return dataset(
        [up, fn](std::uint64_t pass) -> next_fn {
          return [next = (*up)(pass), fn]() mutable -> std::optional<Element> {
            while (next) {
              auto e = next();
              if (!e) break;
              if (static_cast<bool>(detail::invoke_on(*fn, std::as_const(*e)))) return e;
            }
            next = nullptr;
            return std::nullopt;
          };
        },
        unknown_cardinality);
  }

 public:
  /// This dataset's elements, then other's, as tf.data's concatenate (pass n of each).
  dataset concatenate(const dataset& other) const {
    auto a = m_open;
    auto b = other.m_open;
    const std::int64_t x = m_cardinality, y = other.m_cardinality;
    std::int64_t card = unknown_cardinality;
    if (x == infinite_cardinality || y == infinite_cardinality) card = infinite_cardinality;
    else if (x >= 0 && y >= 0) card = x + y;
    return dataset(
        [a, b](std::uint64_t pass) -> next_fn {
          return [na = (*a)(pass), b, pass, nb = next_fn{}]() mutable -> std::optional<Element> {
            if (na) {
              if (auto e = na()) return e;
              na = nullptr;
              nb = (*b)(pass);  // the second starts once the first has ended
            }
            if (!nb) return std::nullopt;
            auto e = nb();
            if (!e) nb = nullptr;
            return e;
          };
        },
        card);
  }

  /// Pairs this dataset's elements with other's: std::tuple{a, b}, until either ends.
  template <class Other>
  dataset<std::tuple<Element, Other>> zip(const dataset<Other>& other) const {
    using R = std::tuple<Element, Other>;
    auto a = m_open;
    auto b = other.m_open;
    std::int64_t card;
    const std::int64_t x = m_cardinality, y = other.cardinality();
    if (x >= 0 && y >= 0) card = std::min(x, y);
    else if (x >= 0 && y == infinite_cardinality) card = x;
    else if (y >= 0 && x == infinite_cardinality) card = y;
    else if (x == infinite_cardinality && y == infinite_cardinality) card = infinite_cardinality;
    else card = unknown_cardinality;
    return dataset<R>(
        [a, b](std::uint64_t pass) -> typename dataset<R>::next_fn {
          return [na = (*a)(pass), nb = (*b)(pass)]() mutable -> std::optional<R> {
            if (!na) return std::nullopt;
            auto ea = na();
            std::optional<Other> eb;
            if (ea) eb = nb();
            if (!ea || !eb) {
              na = nullptr;
              nb = nullptr;
              return std::nullopt;
            }
            return R{std::move(*ea), std::move(*eb)};
          };
        },
        card);
  }

  /// Prepares up to `buffer_size` elements in the background while the consumer works: on a thread
  /// of its own, and on the thread pool's idle workers between the consumer's parallel regions
  /// (with every core computing, a thread of its own gets no core in time). When the consumer finds
  /// nothing ready and no one making it, it makes the element itself rather than wait. Elements come
  /// in the upstream's order whoever makes them.
  dataset prefetch(std::size_t buffer_size) const {
    if (buffer_size == 0) throw invalid_argument("prefetch: buffer_size must be at least 1, got 0");
    auto up = m_open;
    return dataset(
        [up, buffer_size](std::uint64_t pass) -> next_fn {
          auto s = std::make_shared<prefetch_state>(up, pass, buffer_size);
          s->start();
          // The state's destructor stops and joins the thread when the pass is dropped.
          return [s]() { return s->take(); };
        },
        m_cardinality);
  }

  /// prefetch(n) of the elements with their tensors copied to Device (fx::cuda), as tf.data's
  /// prefetch_to_device: the producer uploads each batch, so the training step finds it on the GPU.
  /// The upload is staged through pinned memory and queued on the producing thread's own stream
  /// (fx::own_stream), beside the training step's kernels; the producer waits for it before it
  /// hands the batch over.
  template <class Device>
  auto prefetch_to(std::size_t buffer_size) const {
    return map([](const Element& e) { return detail::element_to_device<Device>(e); }).prefetch(buffer_size);
  }

 private:
  template <class>
  friend class dataset;

  struct prefetch_state final : fluxion::detail::thread_pool::idle_task {
    prefetch_state(std::shared_ptr<const open_fn> up, std::uint64_t pass, std::size_t capacity)
        : m_up(std::move(up)), m_pass(pass), m_capacity(capacity) {}
    ~prefetch_state() { stop(); }

    void start() {
      fluxion::detail::thread_pool::instance().add_idle_task(this);
      m_thread = std::thread([this] {
#if defined(__linux__)
        // Only on a core that nothing else wants: never preempts the consumer or the workers.
        sched_param lowest{};
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &lowest);
#endif
        for (;;) {
          {
            std::unique_lock lock(m_mutex);
            // Woken when the consumer empties the queue, otherwise it looks every millisecond: a
            // wake-up on every take() cost the consumer 16-34 us (a futex wake across vCPUs).
            m_space.wait_for(lock, std::chrono::milliseconds(1),
                             [&] { return m_stopping || m_done || m_queue.size() < m_capacity; });
            if (m_stopping || m_done) return;
            if (m_queue.size() >= m_capacity) continue;
          }
          produce(/*wait=*/true, /*by_consumer=*/false);
        }
      });
    }

    bool run_once() noexcept override { return produce(/*wait=*/false, /*by_consumer=*/false); }

    /// Makes the next element if there is room for it, holding m_produce throughout so that
    /// elements enter the queue in the upstream's order. With wait = false it gives up at once when
    /// someone else is making one. Whether it made (or ended on) an element. An element made on
    /// another thread than the consumer's is made in that thread's scope for its device (fx::cuda:
    /// its own stream) and finished before it is handed over (element_producer).
    bool produce(bool wait, bool by_consumer) noexcept {
      std::unique_lock producing(m_produce, std::defer_lock);
      if (wait) producing.lock();
      else if (!producing.try_lock()) return false;
      {
        std::lock_guard lock(m_mutex);
        if (m_stopping || m_done || m_queue.size() >= m_capacity) return false;
      }
      std::exception_ptr error;
      std::optional<Element> e;
      try {
        using producer = typename decltype(detail::element_producer<Element>())::type;
        std::optional<typename producer::thread_scope> own;
        if (!by_consumer) own.emplace();
        if (!m_next) m_next = (*m_up)(m_pass);
        e = m_next();
        if (e && !by_consumer) producer::fence();
      } catch (...) {
        error = std::current_exception();
      }
      if (!e) m_next = nullptr;  // the pass is over (or failed): release the upstream's files now
      // Published after the catch block has ended, so that no producer holds a reference left to the
      // exception when the consumer rethrows it.
      std::lock_guard lock(m_mutex);
      if (e) {
        try {
          m_queue.push_back(std::move(*e));
        } catch (...) {
          error = std::current_exception();
        }
      }
      if (!e || error) {
        m_error = std::move(error);
        m_done = true;
        m_space.notify_all();  // the thread ends
      }
      m_ready.notify_all();
      return true;
    }

    std::optional<Element> take() {
      for (;;) {
        {
          std::lock_guard lock(m_mutex);
          if (!m_queue.empty()) {
            std::optional<Element> e(std::move(m_queue.front()));
            m_queue.pop_front();
            if (m_queue.empty()) m_space.notify_all();
            return e;
          }
          if (m_done) {
            if (m_error) std::rethrow_exception(std::exchange(m_error, nullptr));  // once; then the pass is over
            return std::nullopt;
          }
        }
        // Nothing ready: make it here unless a producer is making it already.
        if (produce(/*wait=*/false, /*by_consumer=*/true)) continue;
        std::unique_lock lock(m_mutex);
        m_ready.wait(lock, [&] { return !m_queue.empty() || m_done; });
      }
    }

    void stop() {
      {
        std::lock_guard lock(m_mutex);
        m_stopping = true;
        m_space.notify_all();
      }
      fluxion::detail::thread_pool::instance().remove_idle_task(this);  // waits for a worker inside produce()
      if (m_thread.joinable()) m_thread.join();
    }

    std::shared_ptr<const open_fn> m_up;
    std::uint64_t m_pass;
    std::size_t m_capacity;
    std::mutex m_produce;  // held while making an element
    next_fn m_next;        // the upstream's pass, opened by the first producer; under m_produce
    std::mutex m_mutex;    // the queue and the flags
    std::condition_variable m_ready, m_space;
    std::deque<Element> m_queue;
    std::exception_ptr m_error;
    bool m_done = false, m_stopping = false;
    std::thread m_thread;
  };

  std::shared_ptr<const open_fn> m_open;
  std::int64_t m_cardinality;
  std::shared_ptr<std::atomic<std::uint64_t>> m_passes = std::make_shared<std::atomic<std::uint64_t>>(0);
};

}  // namespace fluxion::data
