// Reversible residual blocks (RevNet, Gomez et al. 2017: the first reference text), whose backward
// pass rebuilds each block's input from its output instead of keeping it.
//
//   using residual = fx::nn::sequential_t<fx::nn::input<32, 32, 16>, fx::nn::batch_norm<>, fx::nn::relu,
//                                         fx::nn::conv2d<16, 3, fx::nn::same>>;
//   fx::nn::reversible_sequence<residual, residual, 9> stage;   // 9 blocks on (batch, 32, 32, 32)
//   fx::tensor<float> y = stage(x, /*training=*/true);          // under a tape: one entry, keeping y
//
// A block splits its input (batch, ..., C) along the channel (last) axis into x1 and x2 (C/2 each),
// and computes y1 = x1 + F(x2), y2 = x2 + G(y1), y = concat(y1, y2); F and G map (..., C/2) to
// (..., C/2) and are any layers or models (a sequential_t, a composite model). A
// reversible_sequence<F, G, N> is N such blocks, each with its own F and G.
//
// Under a gradient tape the sequence runs with every tape paused and records one entry that keeps
// only its output and its input (and reads of its trainable variables, which share their storage): the
// activations inside the blocks are never stored. The backward pass walks the blocks from the last,
// as the reference's backward_grads: from y and dy it recomputes G(y1) under a tape of its own,
// x2 = y2 - G(y1) and dx1 = dy1 + dG/dy1^T dy2 with G's variable gradients; then F(x2), x1 = y1 -
// F(x2), dx2 = dy2 + dF/dx2^T dx1 with F's; then moves on to the block before with (x, dx), freeing
// what it leaves behind. Activation memory so stays that of one block whatever the depth, for one
// more forward pass of F and G per block. The recomputation runs inside nn::recompute_scope, in
// which batch normalization does not update its moving statistics again (once per step).
//
// Reconstruction is exact in real arithmetic and close in floating point (differences of the order
// of the rounding error per block, growing with depth); the tests compare the gradients with
// ordinary backpropagation of the same blocks (set_reversible(false)). For an exact reversal,
// set_fixed_point(bits) puts the couplings on a fixed-point grid of step 2^-bits, as MacKay et al.
// (2018, "Reversible Recurrent Neural Networks") do: the halves and F's and G's outputs are rounded
// to the grid, so y1 = x1 + F(x2) is a sum of multiples of the step, exact in floating point while
// |y| < 2^(digits - bits) (float: 24 digits, so 16 bits cover |y| < 256 in steps of 1.5e-5), and
// y1 - F(x2) gives x1 back bit for bit. The rounding is part of the model (both paths run it; its
// gradient is the identity, straight through), and reconstruction_exact() says whether the last
// forward pass stayed in range (beyond it, the sums round as without the grid). The backward pass is
// first order: tapes that record the gradient computation itself (a gradient of a gradient) do not
// see through a reversible sequence.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../autodiff/record.hpp"
#include "../autodiff/tape.hpp"
#include "../expr/indexing.hpp"
#include "batch_norm.hpp"
#include "module.hpp"
#include "recompute.hpp"

namespace fluxion::nn {

template <class F, class G, int Blocks = 1, class T = float>
class reversible_sequence
    : public layer_base<reversible_sequence<F, G, Blocks, T>, T, typename detail::device_of<F>::type> {
  static_assert(Blocks >= 1, "fluxion::nn::reversible_sequence<F, G, Blocks>: give at least one block.");
  /// The blocks run where F's variables live (F and G are models of one device: fx::cuda with
  /// nn::input<...>::on<fx::cuda>).
  using Device = typename detail::device_of<F>::type;
  static_assert(std::is_same_v<Device, typename detail::device_of<G>::type>,
                "fluxion::nn::reversible_sequence<F, G>: F and G are on different devices; declare both on one.");
  using base = layer_base<reversible_sequence, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;  // on the device of F and G (models keep their own)
  static constexpr bool elementwise = false;
  static constexpr const char* base_name = "reversible";
  template <class U, class D = cpu>
  using rebind = reversible_sequence;

  /// The output has the input's shape; the channel (last) extent must be even.
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {  // auto: the shape chain instantiates the check
    constexpr index_t channels = static_shape<D...>::dims[sizeof...(D) - 1];
    static_assert(detail::check_extents<channels % 2 == 0, "reversible", "input channels", channels,
                                        "an even number of channels, got remainder", channels % 2>::value,
                  "fluxion::nn::reversible_sequence: the input's channel (last) extent must be even, to split "
                  "it into the halves x1 and x2.");
    return static_shape<D...>{};
  }

  struct block {
    F f;
    G g;
  };

  explicit reversible_sequence(std::string name = {}) : base(name.empty() ? base_name : std::move(name)), m_blocks(Blocks) {}
  /// Blocks whose F and G draw their variables from `gen`, in order (block 0's F, its G, block 1's F ...).
  explicit reversible_sequence(random::generator& gen, std::string name = {}) : reversible_sequence(std::move(name)) {
    initialize(gen);
  }

  void initialize(random::generator& gen) {
    for (block& b : m_blocks) {
      init_one(b.f, gen);
      init_one(b.g, gen);
    }
  }
  void build(const fluxion::shape&, random::generator& gen) { initialize(gen); }

  block& operator[](std::size_t i) { return m_blocks.at(i); }
  static constexpr int size() { return Blocks; }

  /// Whether the backward pass reconstructs inputs (true, the default) or the blocks are recorded by
  /// the tape as ordinary layers (false: ordinary backpropagation, for comparisons).
  bool reversible() const noexcept { return m_reversible; }
  void set_reversible(bool on) noexcept { m_reversible = on; }

  /// Exact reversal: the couplings' operands rounded to multiples of 2^-fraction_bits (0: off, the
  /// default). Both paths (reversible or not) then compute the same rounded model.
  void set_fixed_point(int fraction_bits) {
    constexpr int digits = std::numeric_limits<T>::digits;
    if (fraction_bits < 0 || fraction_bits >= digits)
      throw invalid_argument("reversible_sequence '" + this->m_name + "': set_fixed_point(" +
                             std::to_string(fraction_bits) + "): the fraction bits must be in [0, " +
                             std::to_string(digits) + ") for this element type (0 turns the grid off)");
    m_fraction_bits = fraction_bits;
    m_largest = 0;
  }
  int fixed_point() const noexcept { return m_fraction_bits; }
  /// With set_fixed_point: whether every coupling of the last forward pass stayed within
  /// |y| < 2^(digits - bits), so that the backward pass rebuilt the inputs bit for bit.
  bool reconstruction_exact() const noexcept {
    return m_fraction_bits > 0 && m_largest < std::ldexp(1.0, std::numeric_limits<T>::digits - m_fraction_bits);
  }
  /// The largest coupling output |y1|, |y2| over the blocks of the last forward pass on the grid
  /// (0 before one, and after set_fixed_point).
  double largest_magnitude() const noexcept { return m_largest; }

  template <class X>
  tensor<T, Device> operator()(X&& x, bool training = false) {
    const tensor<T, Device> in(fluxion::detail::as_expr<X>(std::forward<X>(x)));
    check_input(in.shape());
    if (!m_reversible || !detail::any_tape_recording()) return forward(in, training);
    // Read the trainable variables where the tapes see it (each tape then knows the entry depends on
    // them), run the blocks with every tape paused, and record one entry that keeps only the output
    // and the input.
    std::vector<tensor<T, Device>> reads;
    for (variable<T, Device>* v : this->trainable_variables()) reads.push_back(v->read_value());
    return detail::record_segment<T>(
        in, std::move(reads), [&] { return forward(in, training); },
        [this, training, in](const tensor<T, Device>& y, const tensor<T, Device>& dy, std::vector<tensor<T, Device>>& grads) {
          return backward(y, dy, training, grads, &in);
        });
  }

  /// The blocks' output without recording anything special (the tapes record the blocks' own
  /// statements, if they are not paused).
  tensor<T, Device> forward(const tensor<T, Device>& x, bool training) {
    // The halves pass from block to block as they are: one split and one concatenation per
    // sequence, not per block.
    auto halves = split(x, 2, -1);
    tensor<T, Device> h1 = on_grid(halves[0]), h2 = on_grid(halves[1]);
    std::vector<tensor<T, Device>> peaks;  // on a GPU, read once at the end: no wait per block
    m_largest = 0;
    const auto track = [&](const tensor<T, Device>& y) {  // (peaks only on a GPU: no explicit capture to go unused)
      if (m_fraction_bits == 0) return;
      if constexpr (std::is_same_v<Device, cpu>) {
        const T* p = y.data();
        T m = 0;
        for (index_t i = 0, n = y.size(); i < n; ++i) m = std::max(m, std::abs(p[i]));
        m_largest = std::max(m_largest, static_cast<double>(m));
      } else {
        detail::autodiff_paused quiet;
        peaks.emplace_back(reduce_max(abs(y)));
      }
    };
    for (block& b : m_blocks) {
      tensor<T, Device> y1 = add_on_grid(h1, b.f(h2, training));
      track(y1);
      h2 = add_on_grid(h2, b.g(y1, training));
      track(h2);
      h1 = std::move(y1);
    }
    for (const tensor<T, Device>& p : peaks) m_largest = std::max(m_largest, static_cast<double>(p.item()));
    return tensor<T, Device>(concat({h1, h2}, -1));
  }

  /// From the output y and its gradient dy: the gradient of the input, and in `grads` those of
  /// trainable_variables(), in that order. Runs F and G again (in nn::recompute_scope).
  /// With `input` (the sequence's input, which the tape entry keeps: one activation, whatever the
  /// depth), the first block uses it instead of its reconstruction: float rounding, amplified by
  /// batch norms over channels that vary little, made the first block's gradients the least
  /// accurate (RevNet-38-like, float: 1e-2 relative to ordinary backpropagation without it).
  tensor<T, Device> backward(tensor<T, Device> y, tensor<T, Device> dy, bool training, std::vector<tensor<T, Device>>& grads,
                     const tensor<T, Device>* input = nullptr) {
    detail::autodiff_paused outer;  // first order: enclosing tapes do not record the recomputation
    recompute_scope again;
    std::vector<std::vector<tensor<T, Device>>> per_block(m_blocks.size());
    // The halves of the output and of its gradient pass from block to block as they are.
    auto ys = split(y, 2, -1), dys = split(dy, 2, -1);
    y = tensor<T, Device>();
    dy = tensor<T, Device>();
    tensor<T, Device> y1 = std::move(ys[0]), y2 = std::move(ys[1]), d1 = std::move(dys[0]), d2 = std::move(dys[1]);
    for (std::size_t i = m_blocks.size(); i-- > 0;) {
      block& b = m_blocks[i];
      // G: x2 = y2 - G(y1), dx1 = dy1 + (dG/dy1)^T dy2.
      auto [gy1, g_grads] = detail::run_and_differentiate<T>(b.g, y1, d2, training);
      tensor<T, Device> x2 = i == 0 && input ? on_grid(split(*input, 2, -1)[1]) : off_grid(y2, gy1);
      y2 = tensor<T, Device>();
      d1 = tensor<T, Device>(d1 + g_grads[0]);  // dx1
      // F: x1 = y1 - F(x2), dx2 = dy2 + (dF/dx2)^T dx1.
      auto [fx2, f_grads] = detail::run_and_differentiate<T>(b.f, x2, d1, training);
      d2 = tensor<T, Device>(d2 + f_grads[0]);  // dx2
      auto& mine = per_block[i];
      mine.assign(std::make_move_iterator(f_grads.begin() + 1), std::make_move_iterator(f_grads.end()));
      mine.insert(mine.end(), std::make_move_iterator(g_grads.begin() + 1), std::make_move_iterator(g_grads.end()));
      if (i > 0) {  // x = (x1, x2), the block before's output
        y1 = off_grid(y1, fx2);
        y2 = std::move(x2);
      }
    }
    grads.clear();
    for (auto& g : per_block)
      for (auto& t : g) grads.push_back(std::move(t));
    return tensor<T, Device>(concat({d1, d2}, -1));
  }

  template <class V>
  void for_each_variable(const std::string& prefix, V&& f) {
    for (std::size_t i = 0; i < m_blocks.size(); ++i) {
      const std::string p = prefix + "block_" + std::to_string(i) + "/";
      m_blocks[i].f.for_each_variable(p + "f/", f);
      m_blocks[i].g.for_each_variable(p + "g/", f);
    }
  }

 private:
  template <class L>
  static void init_one(L& layer, random::generator& gen) {
    if constexpr (requires { layer.initialize(gen); }) layer.initialize(gen);
  }

  void check_input(const fluxion::shape& s) const {
    if (s.rank() < 2 || s[s.rank() - 1] % 2 != 0)
      throw shape_error("reversible_sequence '" + this->m_name + "': the input " + to_string(s) +
                        " must be (batch, ..., channels) with an even number of channels");
  }

  /// Whether a tape or forward accumulator of this thread records statements now (not paused).
  static bool autodiff_records() {
    if (detail::nothing_records()) return false;
    if (detail::any_tape_recording()) return true;
    // Forward accumulators, counted the same with or without forward mode in this unit (expr/evaluate.hpp).
    return fluxion::detail::autodiff_state::accumulators > 0 && fluxion::detail::autodiff_state::accumulators_paused == 0;
  }
  /// q(v): v rounded to the nearest multiple of the grid's step (ties to even, in the default
  /// rounding mode).
  /// On the cpu it is a plain loop, not a fused statement: a program pays no expression
  /// instantiations for the grid (examples/revnet.cpp compiled 8 s slower with the statement).
  tensor<T, Device> grid(const tensor<T, Device>& v) const {
    const T scale = std::ldexp(T(1), m_fraction_bits), step = std::ldexp(T(1), -m_fraction_bits);
    if constexpr (std::is_same_v<Device, cpu>) {
      tensor<T, Device> out(v.shape());
      const T* in = v.data();
      T* o = out.mutable_data();
      for (index_t i = 0, n = v.size(); i < n; ++i) o[i] = std::nearbyint(in[i] * scale) * step;
      return out;
    } else {
      return tensor<T, Device>(round(v * scale) * step);
    }
  }
  /// v rounded to the fixed-point grid (v itself without one). While autodiff records, the
  /// rounding is v + (q(v) - v) with the difference a constant: the identity to autodiff (straight
  /// through: tapes and forward accumulators), and bit for bit q(v), since q(v) - v is exact
  /// (|q(v) - v| <= step / 2 and q(v) within a factor 2 of v, or 0) and so is the sum.
  tensor<T, Device> on_grid(const tensor<T, Device>& v) const {
    if (m_fraction_bits == 0) return v;
    if (!autodiff_records()) return grid(v);
    tensor<T, Device> offset;
    {
      detail::autodiff_paused constant;
      offset = tensor<T, Device>(grid(v) - v);
    }
    return tensor<T, Device>(v + offset);
  }
  /// x + q(f), x on the grid: exact while |x + q(f)| < 2^(digits - bits).
  tensor<T, Device> add_on_grid(const tensor<T, Device>& x, const tensor<T, Device>& f) const {
    return tensor<T, Device>(x + on_grid(f));
  }
  /// y - q(f): the reconstruction (x1 = y1 - F(x2), x2 = y2 - G(y1)), which runs with autodiff
  /// paused.
  tensor<T, Device> off_grid(const tensor<T, Device>& y, const tensor<T, Device>& f) const {
    return m_fraction_bits == 0 ? tensor<T, Device>(y - f) : tensor<T, Device>(y - grid(f));
  }

  std::vector<block> m_blocks;
  bool m_reversible = true;
  int m_fraction_bits = 0;
  double m_largest = 0;
};

/// One reversible block: y1 = x1 + F(x2), y2 = x2 + G(y1).
template <class F, class G, class T = float>
using reversible = reversible_sequence<F, G, 1, T>;

}  // namespace fluxion::nn
