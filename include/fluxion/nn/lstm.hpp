// fx::nn::lstm<Units, ReturnSequences>: Keras's LSTM (tanh activation, sigmoid recurrent
// activation, gates in Keras's order i, f, c, o).
//
//   fx::nn::lstm<32> rnn;                            // the last output: (batch, time, features) -> (batch, 32)
//   fx::tensor<float> h = rnn(x);
//   fx::nn::lstm<32, true> seq;                      // every output: -> (batch, time, 32)
//   rnn.kernel().shape();                            // (features, 128): glorot-uniform
//   rnn.recurrent_kernel().shape();                  // (32, 128): orthogonal; rnn.bias(): (128)
//
// The bias starts at zeros with its forget block at ones (Keras's unit_forget_bias). The input
// projection of every time step is one GEMM up front, x (batch * time, features) times the kernel
// plus the bias. Each step is then one GEMM h @ recurrent_kernel and one fused cell pass
// (nn/lstm_cell.hpp) that adds that step's rows and computes
//   c = sigmoid(z_f) * c + sigmoid(z_i) * tanh(z_c),   h = sigmoid(z_o) * tanh(c)
// from the pre-activation z (batch, 4 units), keeping the gates for the backward pass. The state
// starts at zeros. The whole sequence is one tape entry, whose backward pass runs a cell pass and
// a GEMM per step (backpropagation through time) and one GEMM for the recurrent kernel's gradient.
// That backward pass is not itself differentiable, so a sequence that more than one tape records
// (nested tapes, for second derivatives), or that a forward accumulator sees, takes the same steps
// as statements instead (a tape never records its own backward pass, so one persistent tape can
// take the fused cell): z as the sum of a slice and a GEMM, then two fused
// statements over slices of z, each a tape entry, so that the C++ loop over time steps is
// differentiated as it ran, to any order. So does an empty batch.
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "../expr/elementwise.hpp"
#include "../expr/indexing.hpp"
#include "../expr/matmul.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "initializers.hpp"
#include "lstm_cell.hpp"
#include "module.hpp"

namespace fluxion::nn {

namespace detail {

/// The tape that may record a fused sequence reading `projected` and `r`, in `tape`: false where
/// the statements must run instead (see the top of this file).
template <class T, class Device>
bool fused_lstm_applies(const tensor<T, Device>& projected, const tensor<T, Device>& r, gradient_tape*& tape) {
#if FLUXION_FORWARD_MODE
  if (!fluxion::detail::accumulator_stack::accumulators.empty()) return false;
#endif
  tape = nullptr;
  for (gradient_tape* t : fluxion::detail::tape_stack::tapes) {
    if (!t->recording() || !(t->tracks(projected.id()) || t->tracks(r.id()))) continue;
    if (tape) return false;
    tape = t;
  }
  return true;
}

/// The whole sequence through the fused cell (Device is not the cpu): projected is (batch * steps,
/// 4 units), row b * steps + t; r the recurrent kernel's value (units, 4 units).
template <class T, bool ReturnSequences, class Device>
tensor<T, Device> lstm_fused(const tensor<T, Device>& projected, const tensor<T, Device>& r, index_t batch,
                             index_t steps, index_t units, gradient_tape* tape) {
  using cells = lstm_cells<Device>;
  using eval = fluxion::detail::evaluator<Device>;
  const index_t bu = batch * units, g4 = 4 * units, origin = 0;
  // h_0 .. h_steps and c_0 .. c_steps, each (batch, units); h_0 = c_0 = 0.
  tensor<T, Device> hs = zeros<T, Device>({steps + 1, batch, units}), cs = zeros<T, Device>({steps + 1, batch, units});
  tensor<T, Device> gates(fluxion::shape{steps, batch, g4}), recurrent(fluxion::shape{batch, g4});
  tensor<T, Device> y(ReturnSequences ? fluxion::shape{batch, steps, units} : fluxion::shape{batch, units});
  T *h = hs.mutable_data(), *c = cs.mutable_data(), *z = recurrent.mutable_data();
  for (index_t t = 0; t < steps; ++t) {
    if (t > 0) eval::matmul(false, false, 1, batch, g4, units, h + t * bu, &origin, r.data(), &origin, z);
    const bool out = ReturnSequences || t == steps - 1;
    cells::run(batch, units, lstm_cell_forward<T>{t > 0 ? z : nullptr, projected.data(), c + t * bu,
                                       gates.mutable_data() + t * batch * g4, c + (t + 1) * bu, h + (t + 1) * bu,
                                       out ? y.mutable_data() : nullptr, units, steps, t, ReturnSequences ? steps : 1,
                                       ReturnSequences ? t : 0});
  }
  if (!tape) return y;
  const std::uint64_t out_id = y.id();
  if constexpr (fluxion::max_derivative_order < 1) {
    tape->record(out_id, [out_id](autodiff::gradient_store& store) {
      if (store.find<T, Device>(out_id)) autodiff::throw_order_exceeded("gradient_tape", 0);
    });
  } else {
    tape->record(out_id, [tape, out_id, projected, r, hs, cs, gates, batch, steps, units](autodiff::gradient_store& store) {
      const tensor<T, Device>* found = store.find<T, Device>(out_id);
      if (!found) return;
      const tensor<T, Device> dy = *found;  // the store may rehash while we add to it
      const index_t bu = batch * units, g4 = 4 * units, origin = 0;
      tensor<T, Device> dz(fluxion::shape{steps, batch, g4}), dprojected(fluxion::shape{batch * steps, g4});
      tensor<T, Device> dc = zeros<T, Device>({batch, units}), dh(fluxion::shape{batch, units}), dr(r.shape());
      const T* c = cs.data();
      for (index_t t = steps - 1; t >= 0; --t) {
        const bool in = ReturnSequences || t == steps - 1;
        cells::run(batch, units, lstm_cell_backward<T>{gates.data() + t * batch * g4, c + (t + 1) * bu, c + t * bu,
                                            in ? dy.data() : nullptr, t < steps - 1 ? dh.data() : nullptr,
                                            dc.mutable_data(), dz.mutable_data() + t * batch * g4,
                                            dprojected.mutable_data(), units, steps, t, ReturnSequences ? steps : 1,
                                            ReturnSequences ? t : 0});
        if (t > 0)  // dh_t = dz_t @ R^T, for step t - 1
          eval::matmul(false, true, 1, batch, units, g4, dz.data() + t * batch * g4, &origin, r.data(), &origin,
                       dh.mutable_data());
      }
      // dR = sum over t of h_t^T dz_t: h_0 .. h_{steps-1} and dz are both (steps * batch) rows.
      eval::matmul(true, false, 1, units, g4, steps * batch, hs.data(), &origin, dz.data(), &origin, dr.mutable_data());
      autodiff::tape_sink sink{*tape, store};
      sink.leaf(projected, dprojected);
      sink.leaf(r, dr);
    });
  }
  return y;
}

/// The statements of every LSTM layer of element type T (one instance per program; see
/// dense_forward in nn/dense.hpp). x is (batch, time, features), already checked.
template <class T, bool ReturnSequences, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> lstm_forward(const tensor<T, Device>& e, const variable<T, Device>& kernel,
                               const variable<T, Device>& recurrent_kernel, const variable<T, Device>& bias,
                               index_t units) {
  const fluxion::shape& s = e.shape();
  const index_t batch = s[0], steps = s[1], features = s[2];
  // Row b * steps + t holds example b at step t.
  const tensor<T, Device> projected = matmul(reshape(e, {-1, features}), kernel) + bias;
  {
    const tensor<T, Device>& r = recurrent_kernel.read_value();
    gradient_tape* tape = nullptr;
    if (batch > 0 && fused_lstm_applies(projected, r, tape))
      return lstm_fused<T, ReturnSequences>(projected, r, batch, steps, units, tape);
  }
  tensor<T, Device> h = zeros<T, Device>({batch, units}), c = zeros<T, Device>({batch, units});
  std::vector<tensor<T, Device>> outputs;
  for (index_t t = 0; t < steps; ++t) {
    const tensor<T, Device> z =
        strided_slice(projected, {t, 0}, {fluxion::end, fluxion::end}, {steps, 1}) + matmul(h, recurrent_kernel);
    auto gate = [&](index_t k) { return slice(z, {0, k * units}, {batch, units}); };
    c = fluxion::sigmoid(gate(1)) * c + fluxion::sigmoid(gate(0)) * fluxion::tanh(gate(2));
    h = fluxion::sigmoid(gate(3)) * fluxion::tanh(c);
    if constexpr (ReturnSequences) outputs.push_back(h);
  }
  if constexpr (ReturnSequences) return tensor<T, Device>(stack(std::move(outputs), 1));
  else return h;
}
}  // namespace detail

template <index_t Units, bool ReturnSequences = false, class T = float, class Device = cpu>
class lstm : public layer_base<lstm<Units, ReturnSequences, T, Device>, T, Device> {
  static_assert(Units > 0, "fluxion::nn::lstm<Units>: Units must be positive.");
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::lstm<Units, ReturnSequences, T>: T must be a "
                                             "floating-point type.");
  using base = layer_base<lstm<Units, ReturnSequences, T, Device>, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "lstm";
  static constexpr index_t units = Units;
  static constexpr bool return_sequences = ReturnSequences;
  template <class U, class D = cpu>
  using rebind = lstm<Units, ReturnSequences, U, D>;
  /// (time, features) per example becomes (Units), or (time, Units) with ReturnSequences.
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    static_assert(detail::check_extents<sizeof...(D) == 2, "lstm", "input rank", sizeof...(D), "rank", 2>::value,
                  "fluxion::nn::lstm: the input must be (time, features) per example (rank 2); reshape it first, "
                  "e.g. with fluxion::nn::reshape<Time, Features>.");
    if constexpr (sizeof...(D) == 2 && ReturnSequences) {
      return static_shape<std::array<index_t, 2>{D...}[0], Units>{};
    } else {
      return static_shape<Units>{};
    }
  }

  explicit lstm(std::string name = {}) : base(name.empty() ? base_name : std::move(name)) {}

  bool built() const noexcept { return m_kernel.has_value(); }
  /// Creates the variables for inputs of per-example shape (time, features).
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() != 2)
      throw shape_error("lstm '" + this->m_name + "': expects (batch, time, features) input, got (batch, " +
                        to_string(per_example).substr(1));
    m_in = per_example[1];
    m_kernel.emplace(initial_kernel(gen), this->m_name + "/kernel");
    m_recurrent_kernel.emplace(initial_recurrent_kernel(gen), this->m_name + "/recurrent_kernel");
    m_bias.emplace(initial_bias(), this->m_name + "/bias");
  }
  void initialize(random::generator& gen) {
    if (!built()) return;
    m_kernel->assign(initial_kernel(gen));
    m_recurrent_kernel->assign(initial_recurrent_kernel(gen));
    m_bias->assign(initial_bias());
  }

  /// The last hidden state (batch, Units), or every one (batch, time, Units) with ReturnSequences.
  template <class X>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::lstm: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as lstm<Units, ReturnSequences, T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::lstm: the input is on another device than the layer's variables; move it with "
                  "fluxion::to<Device>, or declare the layer with that device.");
    const fluxion::shape s = e.shape();
    if (s.rank() != 3)
      throw shape_error("lstm '" + this->m_name + "': expects input of shape (batch, time, features), got " +
                        to_string(s));
    if (!built()) build(fluxion::shape{s[1], s[2]});
    if (s[2] != m_in || s[1] < 1)
      throw shape_error("lstm '" + this->m_name + "': expects input of shape (batch, time >= 1, " +
                        std::to_string(m_in) + "), got " + to_string(s));
    return detail::lstm_forward<T, ReturnSequences>(fluxion::detail::materialize(e), *m_kernel, *m_recurrent_kernel,
                                                    *m_bias, Units);
  }

  variable<T, Device>& kernel() { return this->require_built(m_kernel, "lstm", "kernel"); }
  variable<T, Device>& recurrent_kernel() {
    return this->require_built(m_recurrent_kernel, "lstm", "recurrent_kernel");
  }
  variable<T, Device>& bias() { return this->require_built(m_bias, "lstm", "bias"); }

  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    this->visit(prefix, f, m_kernel, "kernel");
    this->visit(prefix, f, m_recurrent_kernel, "recurrent_kernel");
    this->visit(prefix, f, m_bias, "bias");
  }

 private:
  // Drawn on the host (the same values on every device), then copied to Device.
  tensor<T, Device> initial_kernel(random::generator& gen) const {
    return fluxion::detail::device_copy<Device>(detail::glorot_uniform<T>({m_in, 4 * Units}, m_in, 4 * Units, gen));
  }
  static tensor<T, Device> initial_recurrent_kernel(random::generator& gen) {
    return fluxion::detail::device_copy<Device>(initializers::orthogonal<T>({Units, 4 * Units}, gen));
  }
  static tensor<T, Device> initial_bias() {  // zeros, the forget gate's block at ones
    std::vector<T> b(static_cast<std::size_t>(4 * Units), T(0));
    std::fill(b.begin() + Units, b.begin() + 2 * Units, T(1));
    return fluxion::detail::device_copy<Device>(from_vector(b, {4 * Units}));
  }
  index_t m_in = 0;
  std::optional<variable<T, Device>> m_kernel, m_recurrent_kernel, m_bias;
};

}  // namespace fluxion::nn
