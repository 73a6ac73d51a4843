// fx::nn::batch_norm<Axis>: Keras's BatchNormalization over the channel axis (the last by default).
//
//   fx::nn::batch_norm<> bn;                          // momentum 0.99, epsilon 1e-3, as Keras
//   fx::nn::batch_norm<> last{{.gamma_initializer = fx::nn::initializers::zeros()}};  // Keras's arguments
//   fx::tensor<float> y = bn(x, /*training=*/true);   // x: (batch, C) or (batch, H, W, C)
//   fx::tensor<float> z = bn(x);                      // inference: the moving statistics
//   bn.moving_mean().peek();                          // updated by the training call above
//
// Training normalizes with the batch's mean and biased variance over every axis but the channel
// axis, y = gamma (x - mean) / sqrt(var + epsilon) + beta, and is differentiable through those
// statistics. It then updates the moving statistics, moving = moving * momentum + batch * (1 -
// momentum), as Keras does (with the biased variance: PyTorch uses the unbiased one there), with
// every tape and forward accumulator paused: the moving statistics are state, not part of the
// computation, and the update is never recorded. gamma and beta are trainable; moving_mean and
// moving_variance are not (non_trainable_variables()).
//
// Keras's other arguments are nn::batch_norm_options: center = false leaves no beta and scale =
// false no gamma (beta() and gamma() throw; the statement adds a constant 0 and multiplies by a
// constant 1, which no tape watches), the four initializers, and gamma's and beta's regularizers and
// constraints (kept on the variables, as a dense layer's kernel's).
//
// With the default autodiff settings (order 1, no forward mode) a training call on the cpu runs
// one kernel (nn/channel_norm.hpp): x read once for the statistics (Welford's update down the
// positions) and once for y, and a backward pass written by hand that reads x and dy once for the
// per-channel sums and once for dx; elsewhere, statements (see batch_normalize).
//
// Inference is one fused statement over x: x * scale + shift, with scale = gamma * rsqrt(
// moving_variance + epsilon) and shift = beta - moving_mean * scale computed first from the
// per-channel vectors, as Keras's fused inference does.
//
// A block that recomputes its forward pass (a reversible block's backward pass, gradient
// checkpointing) must not update the moving statistics twice: inside an nn::recompute_scope (which
// those use) training calls leave them alone; bn.call(x, true, /*update_moving_averages=*/false) or
// bn.set_update_moving_averages(false) switch the updates off by hand.
#pragma once

#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../autodiff/custom_gradient.hpp"
#include "../autodiff/forward.hpp"
#include "../autodiff/tape.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "channel_norm.hpp"
#include "module.hpp"

namespace fluxion::nn {

namespace detail {

/// While alive, every gradient tape (and forward accumulator) of this thread is paused: what is
/// materialized in its scope is invisible to autodiff.
class autodiff_paused {
 public:
  // The same class with or without forward mode in this unit: the linker keeps one copy of its
  // members for the whole program (expr/evaluate.hpp's autodiff_state).
  autodiff_paused() { ++fluxion::detail::autodiff_state::accumulators_paused; }
  ~autodiff_paused() { --fluxion::detail::autodiff_state::accumulators_paused; }
  autodiff_paused(const autodiff_paused&) = delete;
  autodiff_paused& operator=(const autodiff_paused&) = delete;

 private:
  fluxion::detail::all_tapes_paused m_tapes;
};

/// The shape that puts a per-channel vector of `channels` on `axis` of a rank-`rank` input.
inline fluxion::shape channel_broadcast_shape(int rank, int axis, index_t channels) {
  fluxion::shape s;
  for (int d = 0; d < rank; ++d) s.push_back(d == axis ? channels : 1);
  return s;
}

/// batch_norm's statements on `x` (its channels on `axis`), the activation that follows applied in
/// the same pass: training normalizes with the batch's statistics (recorded) and, with `update`,
/// moves the moving ones with every tape paused; inference is x * scale + shift from the moving
/// statistics. A function of T, Device and the epilogue only, so that the library holds the float
/// cpu ones (nn/prebuilt.hpp) for every batch_norm<Axis> of a program; Config keeps programs built
/// with other autodiff settings (core/config.hpp) from linking another's copy.
template <class T, class Device, class Epilogue, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> batch_normalize(const tensor<T, Device>& x, int axis, bool training, bool update,
                                  variable<T, Device>& gamma, variable<T, Device>& beta,
                                  variable<T, Device>& moving_mean, variable<T, Device>& moving_variance, T eps,
                                  T momentum, const Epilogue& epilogue) {
  const fluxion::shape& s = x.shape();
  const index_t channels = s[axis];
  if (axis == s.rank() - 1 && channels > 0 && s.size() > 0) {
    // Channels last (fluxion's layout): the statements that read per-channel values see x as rows
    // of tile neighbouring positions' channels, tile * channels values (at most 512), and those
    // values repeated tile times, since a statement pays for each row (seeking every operand): at
    // (64, 28, 28, 32), rows of 512 took a third of the time of rows of 32 for x scale + shift.
    // tile: the largest divisor of the positions (1 when they are prime).
    const index_t positions = s.size() / channels;
    const index_t tile = row_tile(positions, channels);
    const std::vector<index_t> row_dims = {positions / tile, tile * channels};  // x seen as rows
    // A per-channel tensor or variable -> (1, tile * channels); recorded as the statements are.
    // (fluxion::reshape: in a generic lambda nvcc finds the layer nn::reshape first.)
    auto tiled = [tile, channels](const auto& c) {
      return tensor<T, Device>(fluxion::reshape(fluxion::broadcast_to(fluxion::reshape(c, {1, channels}), {tile, channels}), {1, tile * channels}));
    };
    auto untiled = [dims = s.to_vector()](const tensor<T, Device>& t) { return fluxion::reshape(t, dims); };
    if (!training) {
      const tensor<T, Device> scale = gamma * rsqrt(moving_variance.peek() + eps);
      const tensor<T, Device> shift = beta - moving_mean.peek() * scale;
      const tensor<T, Device> xt = fluxion::reshape(x, row_dims);
      return untiled(tensor<T, Device>(epilogue(xt * tiled(scale) + tiled(shift))));
    }
    std::vector<int> reduced;
    for (int d = 0; d < s.rank() - 1; ++d) reduced.push_back(d);
    tensor<T, Device> mean, variance, y;
#if FLUXION_MAX_DERIVATIVE_ORDER == 1 && !FLUXION_FORWARD_MODE
    // The backward pass written by hand (fx::custom_gradient), three passes over x and dy: the
    // per-channel sums of dy and dy x, then dx = dy scale + x a + c, with xhat = (x - mean) rstd:
    //   dx = gamma rstd (dy - sum(dy) / n - xhat sum(dy xhat) / n).
    // The tape's rules for the same statements took twice as long (5.7 against 2.7 ms at (64, 28,
    // 28, 32), one thread). It reads the batch's statistics as constants, so a gradient of this
    // gradient would miss their terms: with FLUXION_MAX_DERIVATIVE_ORDER above 1 (or 0), or with
    // forward mode, the tape differentiates the statements instead. Here nothing inside is offered
    // to autodiff (custom_gradient records the whole), so its statements instantiate their kernels
    // only, none of their backward functions.
    if constexpr (std::is_same_v<Device, cpu>) {
      // On the cpu one kernel (nn/channel_norm.hpp) runs each pass: x read once for the
      // statistics and once for y, x and dy once for the sums and once for dx (the statements
      // below read them eight times), within rounding of the statements' values.
      // (One "example" of every position, a group per channel; mean and variance are (1, channels).)
      // A relu after the layer is applied by the kernel: no pass of its own forward or backward.
      constexpr bool relu = is_relu_epilogue<Epilogue>();
      y = channel_normalize<relu>(channel_norm<T>{1, positions, channels, channels}, x, gamma, beta, eps, &mean,
                                  &variance);
      mean = fluxion::reshape(mean, {channels});
      variance = fluxion::reshape(variance, {channels});
    } else {
      auto eval = [](const auto& e) { return fluxion::detail::materialize_unrecorded(e); };
      auto tiled_value = [tile, channels, eval](const tensor<T, Device>& c) {
        return eval(fluxion::reshape(fluxion::broadcast_to(fluxion::reshape(c, {1, channels}), {tile, channels}), {1, tile * channels}));
      };
      auto untile_sum_value = [tile, channels, eval](const tensor<T, Device>& t) {
        return eval(reduce_sum(eval(fluxion::reshape(t, {tile, channels})), {0}));
      };
      const T inv_n = T(1) / static_cast<T>(positions);
      const std::vector<index_t> dims = s.to_vector();
      auto normalize = custom_gradient([&](const tensor<T, Device>& xin, const tensor<T, Device>& g,
                                           const tensor<T, Device>& b) {
        const tensor<T, Device> x_rows = eval(fluxion::reshape(xin, row_dims));
        mean = eval(reduce_mean(xin, reduced));
        variance = eval(untile_sum_value(eval(reduce_mean(square(x_rows - tiled_value(mean)), {0}))) *
                        (T(1) / static_cast<T>(tile)));
        const tensor<T, Device> rstd = eval(rsqrt(variance + eps)), scale = eval(g * rsqrt(variance + eps));
        const tensor<T, Device> scale_t = tiled_value(scale);
        tensor<T, Device> out = eval(fluxion::reshape(eval(x_rows * scale_t + tiled_value(eval(b - mean * scale))), dims));
        auto backward = [=, m = mean](const tensor<T, Device>& dy) {
          const tensor<T, Device> dy_rows = eval(fluxion::reshape(dy, row_dims));
          tensor<T, Device> sum_dy = untile_sum_value(eval(reduce_sum(dy_rows, {0})));
          const tensor<T, Device> sum_dyx = untile_sum_value(eval(reduce_sum(dy_rows * x_rows, {0})));
          tensor<T, Device> dgamma = eval((sum_dyx - m * sum_dy) * rstd);
          const tensor<T, Device> a = eval(-scale * rstd * dgamma * inv_n);
          const tensor<T, Device> c = eval(-scale * sum_dy * inv_n - m * a);
          tensor<T, Device> dx = eval(fluxion::reshape(eval(dy_rows * scale_t + x_rows * tiled_value(a) + tiled_value(c)), dims));
          return std::tuple{std::move(dx), std::move(dgamma), std::move(sum_dy)};
        };
        return std::pair{std::move(out), backward};
      });
      y = normalize(x, gamma, beta);
    }
    if constexpr (!std::is_same_v<Epilogue, identity> && !(std::is_same_v<Device, cpu> && is_relu_epilogue<Epilogue>()))
      y = tensor<T, Device>(epilogue(y));
#else
    // The same statements, recorded: the same values, bit for bit, as the hand-written pass's.
    // A (1, tile * channels) sum over the rows -> (channels): the sum over the tile.
    auto untile_sum = [tile, channels](const tensor<T, Device>& t) {
      return tensor<T, Device>(reduce_sum(fluxion::reshape(t, {tile, channels}), {0}));
    };
    const tensor<T, Device> xt = fluxion::reshape(x, row_dims);
    mean = reduce_mean(x, reduced);  // (channels)
    variance = untile_sum(reduce_mean(square(xt - tiled(mean)), {0})) * (T(1) / static_cast<T>(tile));  // biased, as Keras
    const tensor<T, Device> scale = gamma * rsqrt(variance + eps);
    y = untiled(tensor<T, Device>(epilogue(xt * tiled(scale) + tiled(tensor<T, Device>(beta - mean * scale)))));
#endif
    if (update) {
      autodiff_paused quiet;
      moving_mean.assign(moving_mean.peek() * momentum + mean * (T(1) - momentum));
      moving_variance.assign(moving_variance.peek() * momentum + variance * (T(1) - momentum));
    }
    return y;
  }
  const std::vector<index_t> channel_shape = channel_broadcast_shape(s.rank(), axis, channels).to_vector();
  if (!training) {
    const tensor<T, Device> scale = gamma * rsqrt(moving_variance.peek() + eps);
    const tensor<T, Device> shift = beta - moving_mean.peek() * scale;
    return tensor<T, Device>(epilogue(x * fluxion::reshape(scale, channel_shape) + fluxion::reshape(shift, channel_shape)));
  }
  std::vector<int> reduced;
  for (int d = 0; d < s.rank(); ++d)
    if (d != axis) reduced.push_back(d);
  const tensor<T, Device> mean = reduce_mean(x, reduced, keepdims);
  const tensor<T, Device> variance = reduce_mean(square(x - mean), reduced, keepdims);  // biased, as Keras
  tensor<T, Device> y = epilogue((x - mean) * (rsqrt(variance + eps) * fluxion::reshape(gamma, channel_shape)) +
                                 fluxion::reshape(beta, channel_shape));
  if (update) {
    autodiff_paused quiet;
    moving_mean.assign(moving_mean.peek() * momentum + fluxion::reshape(mean, {channels}) * (T(1) - momentum));
    moving_variance.assign(moving_variance.peek() * momentum + fluxion::reshape(variance, {channels}) * (T(1) - momentum));
  }
  return y;
}

}  // namespace detail

/// Keras's BatchNormalization arguments beyond the axis, in its order, with its defaults:
///
///   fx::nn::batch_norm<>{{.momentum = 0.9, .epsilon = 1e-5}}            // PyTorch's BatchNorm2d
///   fx::nn::batch_norm<>{{.gamma_initializer = fx::nn::initializers::zeros()}}  // a residual branch's last
///   fx::nn::batch_norm<>{{.scale = false}}                             // before a relu: no gamma
///
/// center = false: no beta variable (zeros are added); scale = false: no gamma (the input is
/// multiplied by ones). The regularizers and constraints are gamma's and beta's
/// (variable::regularizer(), variable::constraint()), as a dense layer's kernel's.
struct batch_norm_options {
  double momentum = 0.99;
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  initializer beta_initializer = initializers::zeros();
  initializer gamma_initializer = initializers::ones();
  initializer moving_mean_initializer = initializers::zeros();
  initializer moving_variance_initializer = initializers::ones();
  regularizer beta_regularizer = {};
  regularizer gamma_regularizer = {};
  constraint beta_constraint = {};
  constraint gamma_constraint = {};
  std::string name = {};
};

template <int Axis = -1, class T = float, class Device = cpu>
class batch_norm : public layer_base<batch_norm<Axis, T, Device>, T, Device> {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::batch_norm<Axis, T>: T must be a floating-point type.");
  static_assert(Axis != 0,
                "fluxion::nn::batch_norm<Axis>: axis 0 is the batch axis; give the channel axis, counted with the "
                "batch axis (-1, the last, for (batch, ..., channels) input).");
  using base = layer_base<batch_norm<Axis, T, Device>, T, Device>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "batch_normalization";
  template <class U, class D = cpu>
  using rebind = batch_norm<Axis, U, D>;
  /// The per-example output shape is the input's; the channel axis must exist.
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {  // auto: sequential's decltype runs the check
    constexpr int rank = static_cast<int>(sizeof...(D)) + 1;  // with the batch axis
    constexpr int axis = Axis < 0 ? Axis + rank : Axis;
    static_assert(detail::check_extents<(axis >= 1 && axis < rank), "batch_norm", "channel axis", Axis,
                                        "input rank (with the batch axis)", rank>::value,
                  "fluxion::nn::batch_norm<Axis>: the channel axis is outside the input's axes; Axis counts the "
                  "batch axis (as Keras's axis): -1 is the last, 1 the first after the batch.");
    return static_shape<D...>{};
  }

  /// Keras's defaults: momentum 0.99, epsilon 1e-3.
  batch_norm() : batch_norm(batch_norm_options{}) {}
  /// A template, so that batch_norm<>{{}} (an empty braced list deduces nothing) takes the options,
  /// Keras's defaults, and not a momentum of 0.
  template <class M>
    requires std::is_arithmetic_v<M>
  explicit batch_norm(M momentum, double epsilon = 1e-3, std::string name = {})
      : batch_norm(batch_norm_options{.momentum = static_cast<double>(momentum), .epsilon = epsilon, .name = std::move(name)}) {}
  template <layer_name S>
  explicit batch_norm(S&& name) : batch_norm(batch_norm_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: batch_norm<>{{.momentum = 0.9, .scale = false}}.
  explicit batch_norm(batch_norm_options options)
      : base(options.name.empty() ? base_name : options.name), m_options(std::move(options)) {
    detail::check_norm_options("batch_norm '" + this->m_name + "'", m_options);
    if (!(m_options.momentum >= 0.0 && m_options.momentum <= 1.0))
      throw invalid_argument("batch_norm '" + this->m_name + "': momentum = " + std::to_string(m_options.momentum) +
                             " is not in [0, 1]");
  }
  /// The same layer for another element type or device (a sequential model re-declares its layers
  /// for the model's type and device): the settings carry over, the variables are created when it
  /// is built.
  template <class U, class D>
    requires(!std::is_same_v<U, T> || !std::is_same_v<D, Device>)
  explicit batch_norm(const batch_norm<Axis, U, D>& other) : batch_norm(other.options()) {
    m_update = other.update_moving_averages();
  }

  /// The options the layer was made with, under its current name.
  batch_norm_options options() const {
    batch_norm_options o = m_options;
    o.name = this->m_name;
    return o;
  }
  double momentum() const noexcept { return m_options.momentum; }
  double epsilon() const noexcept { return m_options.epsilon; }
  /// Whether training calls update the moving statistics (true unless switched off).
  bool update_moving_averages() const noexcept { return m_update; }
  void set_update_moving_averages(bool on) noexcept { m_update = on; }

  bool built() const noexcept { return m_gamma.has_value(); }
  /// Creates the variables for inputs whose per-example shape is `per_example`.
  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    const int axis = channel_axis(per_example.rank() + 1, [&] { return "(batch, " + to_string(per_example).substr(1); });
    m_channels = per_example[axis - 1];
    detail::built_or_none(m_gamma, m_beta, m_moving_mean, m_moving_variance, [&] {
      auto [gamma_beta, mean, variance] = initial_values(gen);
      detail::emplace_gamma_beta(m_gamma, m_beta, std::move(gamma_beta), this->m_name, m_options);
      m_moving_mean.emplace(std::move(mean), this->m_name + "/moving_mean", false);
      m_moving_variance.emplace(std::move(variance), this->m_name + "/moving_variance", false);
    });
  }
  /// Draws new initial values (the same shapes and variables).
  void initialize(random::generator& gen) {
    if (!built()) return;
    auto [gamma_beta, mean, variance] = initial_values(gen);
    m_gamma->assign(gamma_beta.first);
    m_beta->assign(gamma_beta.second);
    m_moving_mean->assign(mean);
    m_moving_variance->assign(variance);
  }

  /// The normalized input; a training call updates the moving statistics unless that is switched
  /// off. A sequential model passes the activation that follows as the epilogue (one fused pass).
  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool training = false, const Epilogue& epilogue = {}) {
    return call(std::forward<X>(x), training, m_update, std::move(epilogue));
  }
  /// As operator(), with the update of the moving statistics chosen for this call.
  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> call(X&& x, bool training, bool update, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::batch_norm: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as batch_norm<Axis, T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::batch_norm: the input is on another device than the layer's variables; move it "
                  "with fluxion::to<Device>, or declare the layer as batch_norm<Axis, T, Device>.");
    const fluxion::shape s = e.shape();
    const int axis = channel_axis(s.rank(), [&] { return to_string(s); });
    if (!built()) build(fluxion::shape(std::vector<index_t>(s.begin() + 1, s.end())));
    if (s[axis] != m_channels)
      throw shape_error("batch_norm '" + this->m_name + "': the input has " + std::to_string(s[axis]) +
                        " channels on axis " + std::to_string(axis) + ", the layer was built for " +
                        std::to_string(m_channels) + " (input shape " + to_string(s) + ")");
    const tensor<T, Device> xt = fluxion::detail::materialize_asserted<T, Device>(e);
    return detail::batch_normalize(xt, axis, training, update && !recompute_scope::active(), *m_gamma, *m_beta,
                                   *m_moving_mean, *m_moving_variance, static_cast<T>(m_options.epsilon),
                                   static_cast<T>(m_options.momentum), epilogue);
  }

  variable<T, Device>& gamma() {
    detail::require_norm_variable(m_options.scale, "batch_norm '" + this->m_name + "'", "gamma", "scale");
    return this->require_built(m_gamma, "batch_norm", "gamma");
  }
  variable<T, Device>& beta() {
    detail::require_norm_variable(m_options.center, "batch_norm '" + this->m_name + "'", "beta", "center");
    return this->require_built(m_beta, "batch_norm", "beta");
  }
  variable<T, Device>& moving_mean() { return this->require_built(m_moving_mean, "batch_norm", "moving_mean"); }
  variable<T, Device>& moving_variance() {
    return this->require_built(m_moving_variance, "batch_norm", "moving_variance");
  }

  /// gamma, beta (trainable), moving_mean, moving_variance (not trainable), in Keras's order.
  template <class F>
  void for_each_variable(const std::string& prefix, F&& f) {
    if (m_options.scale) this->visit(prefix, f, m_gamma, "gamma");
    if (m_options.center) this->visit(prefix, f, m_beta, "beta");
    this->visit(prefix, f, m_moving_mean, "moving_mean");
    this->visit(prefix, f, m_moving_variance, "moving_variance");
  }

 private:
  /// The channel axis of a rank-`rank` input (batch axis included); `shape_text` describes it.
  template <class ShapeText>
  int channel_axis(int rank, ShapeText shape_text) const {
    const int axis = Axis < 0 ? Axis + rank : Axis;
    if (rank < 2 || axis < 1 || axis >= rank)
      throw shape_error("batch_norm '" + this->m_name + "': expects input of shape (batch, ..., channels) with the "
                        "channel axis " + std::to_string(Axis) + ", got " + shape_text());
    return axis;
  }
  /// gamma, beta, moving mean and moving variance drawn from the options' initializers; gamma ones
  /// with scale = false and beta zeros with center = false (constants the statement reads).
  std::tuple<std::pair<tensor<T, Device>, tensor<T, Device>>, tensor<T, Device>, tensor<T, Device>> initial_values(
      random::generator& gen) const {
    auto gamma_beta = detail::initial_gamma_beta<T, Device>(m_options, m_channels, gen);  // first: Keras's order
    const fluxion::shape s{m_channels};
    auto mean = detail::draw_weight<T, Device>(m_options.moving_mean_initializer, s, gen);
    return {std::move(gamma_beta), std::move(mean), detail::draw_weight<T, Device>(m_options.moving_variance_initializer, s, gen)};
  }
  batch_norm_options m_options;
  bool m_update = true;
  index_t m_channels = 0;
  std::optional<variable<T, Device>> m_gamma, m_beta, m_moving_mean, m_moving_variance;
};

}  // namespace fluxion::nn
