// The recording hook: what happens when a statement is materialized while a gradient tape or a
// forward accumulator is alive. Included at the end of expr/evaluate.hpp, so that every
// materialization can be offered to autodiff without the core naming any autodiff type.

#include "../expr/evaluate.hpp"  // first, outside the guard: see "Include order" in expr/evaluate.hpp
#ifndef FLUXION_AUTODIFF_RECORD_HPP
#define FLUXION_AUTODIFF_RECORD_HPP
#pragma once

#include <cstdint>
#include <type_traits>

#include "backprop.hpp"
#include "leaves.hpp"
#include "forward.hpp"
#include "tape.hpp"

namespace fluxion::autodiff {

/// The tape's sink: hands each tracked leaf its gradient, summed to the leaf's shape.
struct tape_sink {
  const gradient_tape& tape;
  gradient_store& store;
  /// Whether a tensor's gradient can reach a watched source: kernels skip operands that cannot.
  bool wants(std::uint64_t id) const { return tape.tracks(id); }
  template <class T, class D, class G>
  void leaf(const tensor<T, D>& t, const G& g) {
    if (!tape.tracks(t.id())) return;
    if constexpr (!std::is_same_v<value_type_t<G>, T>) {  // a float leaf in a double statement
      leaf(t, cast<T>(g));
    } else {
      // One kernel per gradient expression type: `g` is materialized as it is, or summed down to
      // the leaf's shape in one fused reduction. Accumulating adds tensors (autodiff/tape.hpp).
      store.add<order_v<G>>(t.id(), reduce_to(g, t.shape()));
    }
  }
  /// A slice's gradient scattered into the leaf's shape (backward of a strided slice): added into
  /// that region of the leaf's gradient in place when it can be; false means "add it whole".
  template <class T, class D, class P>
  bool add_scattered(const tensor<T, D>& t, const P& scattered) {
    if (!tape.tracks(t.id())) return true;
    if constexpr (!std::is_same_v<value_type_t<P>, T>) return false;
    else return store.add_region(t.id(), scattered);
  }
};

}  // namespace fluxion::autodiff

namespace fluxion::detail {

template <int Config, class E, class T, class Device>
void on_materialize(const E& e, const tensor<T, Device>& out) {
  for (gradient_tape* tape : tape_stack::tapes) {
    if (!tape->recording() || tape->tracks(out.id())) continue;
    if (!autodiff::reads_any(e, autodiff::member_test<gradient_tape, &gradient_tape::tracks>{*tape})) continue;
    const std::uint64_t out_id = out.id();
    constexpr int order = autodiff::order_v<E>;
    if constexpr (order < Config / 2) {  // Config / 2: FLUXION_MAX_DERIVATIVE_ORDER
      tape->record(out_id, [e, tape, out_id](autodiff::gradient_store& store) {
        const tensor<T, Device>* g = store.find<T, Device>(out_id);
        if (!g) return;
        const tensor<T, Device> grad = *g;  // the store may rehash while we add to it
        autodiff::tape_sink sink{*tape, store};
        autodiff::backward<E>::run(e, autodiff::as_order<order + 1>(grad), sink);
      });
    } else {
      tape->record(out_id, [out_id](autodiff::gradient_store& store) {
        if (store.find<T, Device>(out_id))
          autodiff::throw_order_exceeded("gradient_tape", Config / 2);
      });
    }
  }
}

#if FLUXION_FORWARD_MODE
template <int Config, class E, class T, class Device>
void on_materialize_forward(const E& e, const tensor<T, Device>& out) {
  autodiff::offer_to_accumulators<Config>(e, out);
}
#endif

}  // namespace fluxion::detail

#endif  // FLUXION_AUTODIFF_RECORD_HPP
