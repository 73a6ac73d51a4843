// fx::nn::group_norm: Keras's GroupNormalization over the last (channel) axis, and instance_norm.
//
//   auto net = fx::nn::sequential(fx::nn::input<32, 32, 3>{},
//                                 fx::nn::conv2d<64, 3, fx::nn::same>{}, fx::nn::group_norm<32>{}, fx::nn::relu{},
//                                 ...);
//   fx::nn::group_norm<8> gn;                  // 8 groups; epsilon 1e-3, as Keras
//   fx::tensor<float> y = gn(x);               // x: (batch, ..., channels), same shape out
//   gn.gamma().shape();                        // (channels): ones; gn.beta(): zeros
//   fx::nn::instance_norm<> in;                // group_norm<-1>: one group per channel
//
// The channels are split into Groups groups of channels / Groups neighbours (Keras's and PyTorch's
// grouping), and each example's group is normalized with its own mean and biased variance over its
// channels and every axis between the batch and the channels (the image's height and width, a
// sequence's steps): y = gamma (x - mean) / sqrt(var + epsilon) + beta, the same in training and
// inference, so unlike batch_norm it does not depend on the batch (Wu and He, 2018; the
// normalization of diffusion models' U-Nets and of small-batch detection). Groups = 1 normalizes
// over all of an example, Groups = -1 (Keras's groups=-1) over each channel alone: instance
// normalization (instance_norm). Groups must divide the channels: in a sequential model that is a
// static_assert naming both numbers; a layer used alone throws fluxion::shape_error when it builds.
//
// How it runs: with the default autodiff settings (order 1, no forward mode), on the cpu, one
// kernel (nn/channel_norm.hpp) reads x once for each (example, group)'s mean and variance (Welford's
// update down the positions, chunk by chunk) and once to write y = x scale + shift, its inner loop
// over the channels, and the backward pass, written by hand (fx::custom_gradient), reads x and dy
// once for the two per-channel sums, of dy and of dy (x - mean), and once for dx = dy scale + x b +
// c. Elsewhere (fx::cuda, and other autodiff settings) statements compute the same: per-channel
// means over the positions, then each group's mean and, centered on it, its variance, a small
// statement for each example's per-channel scale gamma / sqrt(var + epsilon) and shift beta -
// mean scale, and one fused statement for y (the statements that read per-channel values see rows
// of several positions, up to 512 values, since a statement pays for each row); with other
// autodiff settings the tape differentiates them. The activation that follows in a sequential
// model is applied to the output.
//
// Keras's other arguments are nn::group_norm_options, as layer_norm's: center = false leaves no beta
// and scale = false no gamma, the two initializers, and gamma's and beta's regularizers and
// constraints. Only the last axis can be the channel axis (fluxion's layers are NHWC).
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "../autodiff/custom_gradient.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "channel_norm.hpp"
#include "module.hpp"

namespace fluxion::nn {

/// Keras's GroupNormalization arguments beyond the groups (a template argument) and the axis (the
/// last), in its order, with its defaults:
///
///   fx::nn::group_norm<32>{{.epsilon = 1e-5}}                     // PyTorch's GroupNorm epsilon
///   fx::nn::group_norm<8>{{.gamma_initializer = fx::nn::initializers::zeros()}}
struct group_norm_options {
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  initializer beta_initializer = initializers::zeros();
  initializer gamma_initializer = initializers::ones();
  regularizer beta_regularizer = {};
  regularizer gamma_regularizer = {};
  constraint beta_constraint = {};
  constraint gamma_constraint = {};
  std::string name = {};
};

namespace detail {
/// gamma (x - mean) / sqrt(var + eps) + beta of x (batch, positions, channels), each example's
/// group statistics over the positions and the group's channels, with a hand-written backward
/// pass (fx::custom_gradient) of three passes over x: the tape's rules for the statements that
/// compute it took eight, and the layer's training pass 1.7 times as long. With the default
/// autodiff settings only (order 1, no forward mode): otherwise the tape's rules, which give
/// second derivatives and tangents (stop 77; until then the hand-written pass served every
/// setting, and a gradient of a gradient missed the statistics' terms). A function of T and
/// Device only, so that every group_norm<Groups> of a program shares its code (Config keeps
/// programs built with other autodiff settings, core/config.hpp, from linking another's copy).
/// relu: the activation that follows is relu, applied here (on the cpu by the kernel, without a
/// pass of its own).
template <class T, class Device, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> group_normalize(const tensor<T, Device>& flat, variable<T, Device>& gamma_variable,
                                variable<T, Device>& beta_variable, index_t groups, T eps, bool relu) {
  auto activated = [relu](tensor<T, Device> y) { return relu ? tensor<T, Device>(fluxion::relu(y)) : y; };
  const index_t batch = flat.shape()[0], positions = flat.shape()[1], channels = flat.shape()[2];
  const index_t per_group = channels / groups;
  // (batch, 1, channels) -> (batch, groups, 1): each group's mean of per-channel values.
  // (The helpers are generic lambdas, instantiated only where called: the cpu's kernel path below
  // compiles none of their statements.)
  auto to_groups = [=](const auto& c_in) {
    const tensor<T, Device> c = c_in;
    return tensor<T, Device>(reduce_mean(fluxion::reshape(c, {batch, groups, per_group}), {2}, keepdims));
  };
  // The statements that read a per-(example, channel) value at every position see x as (batch,
  // positions / tile, tile * channels) and that value repeated tile times: rows of tile * channels
  // values instead of channels, since a statement pays for each row (seeking every operand). tile:
  // the largest divisor of the positions with rows of at most 512 values (1 when the positions are
  // prime). At (16, 1024, 128) rows of 512 took 0.65-0.7 of the time of rows of 128 for the output
  // statement and 0.83-0.87 for the variances; rows of 4096 were slower than 128 (their operands
  // leave L1).
  const index_t tile = row_tile(positions, channels);
  const std::vector<index_t> tiled_shape{batch, positions / tile, tile * channels};
  // (batch, groups, k) -> (batch, 1, tile * channels), k = 1 (repeated over the group) or per_group.
  auto to_tiled = [=](const auto& g_in) {
    const tensor<T, Device> g = g_in;
    return tensor<T, Device>(fluxion::reshape(fluxion::broadcast_to(fluxion::reshape(g, {batch, 1, groups, g.shape()[2]}),
                                                  {batch, tile, groups, per_group}),
                                     {batch, 1, tile * channels}));
  };
  // A (batch, 1, tile * channels) mean over each row -> (batch, 1, channels): the mean over the tile.
  auto untile_mean = [=](const auto& t_in) {
    const tensor<T, Device> t = t_in;
    return tensor<T, Device>(reduce_mean(fluxion::reshape(t, {batch, tile, channels}), {1}, keepdims));
  };
  // The forward statements on x and gamma and beta (tensors, or the variables, which the tape then
  // records): x as rows, each group's mean and rstd, gamma by group, the tiled scale, and y. Names
  // qualified: in a generic lambda nvcc finds the layer nn::reshape first.
  auto normalized = [=](const tensor<T, Device>& x, const auto& gamma, const auto& beta) {
    // Per-channel means over the positions (one vector pass with the channels kept), then each
    // group's: a reduction over positions and the group's channels at once, axes 1 and 3 of a
    // (batch, positions, groups, per_group) view, took 15 times longer.
    const tensor<T, Device> xt = fluxion::reshape(x, tiled_shape);
    const tensor<T, Device> mean = to_groups(reduce_mean(x, {1}, keepdims));
    const tensor<T, Device> variance =
        to_groups(untile_mean(reduce_mean(square(xt - to_tiled(mean)), {1}, keepdims)));
    const tensor<T, Device> rstd = rsqrt(variance + eps);                                     // (batch, groups, 1)
    const tensor<T, Device> gamma_g = fluxion::reshape(gamma, {groups, per_group});
    const tensor<T, Device> scale = rstd * gamma_g;                                           // (batch, groups, per_group)
    const tensor<T, Device> shift = fluxion::reshape(beta, {groups, per_group}) - mean * scale;
    const tensor<T, Device> scale_t = to_tiled(scale);  // read by the backward pass too
    tensor<T, Device> y = fluxion::reshape(xt * scale_t + to_tiled(shift), {batch, positions, channels});
    return std::tuple{xt, mean, rstd, gamma_g, scale_t, std::move(y)};
  };
#if FLUXION_MAX_DERIVATIVE_ORDER != 1 || FLUXION_FORWARD_MODE
  // The same statements, recorded: the tape's rules differentiate them to any order (the
  // hand-written pass below reads the statistics as constants, so a gradient of its gradient
  // would miss their terms), and forward mode sees them. The same values, bit for bit.
  return activated(std::get<5>(normalized(flat, gamma_variable, beta_variable)));
#else
  if constexpr (std::is_same_v<Device, cpu>) {
    // On the cpu one kernel (nn/channel_norm.hpp) runs each pass: x read once for the statistics
    // and once for y, x and dy once for the sums and once for dx, within rounding of the
    // statements' values below (which other devices run).
    const channel_norm<T> k{batch, positions, channels, groups};
    return relu ? channel_normalize<true>(k, flat, gamma_variable, beta_variable, eps)
                : channel_normalize<false>(k, flat, gamma_variable, beta_variable, eps);
  } else {
    auto f = custom_gradient([=](const tensor<T, Device>& x, const tensor<T, Device>& gamma,
                                 const tensor<T, Device>& beta) {
      auto values = normalized(x, gamma, beta);  // named one by one: clang before 16 cannot capture a binding
      const tensor<T, Device> xt = std::get<0>(values), mean = std::get<1>(values), rstd = std::get<2>(values);
      const tensor<T, Device> gamma_g = std::get<3>(values), scale_t = std::get<4>(values);
      tensor<T, Device> y = std::move(std::get<5>(values));
      auto backward = [=](const tensor<T, Device>& dy) {
        // Per-channel sums over the positions of dy and dy x, then the group sums of
        // gamma dy and gamma dy x; dx = dy scale + x b + c per group (the usual formula, with
        // x_hat = (x - mean) rstd and M = positions * per_group values a group):
        //   dx = rstd (gamma dy - sum(gamma dy) / M - x_hat sum(gamma dy x_hat) / M).
        const tensor<T, Device> sum_dy = fluxion::reshape(reduce_sum(dy, {1}), {batch, groups, per_group});
        const tensor<T, Device> sum_dyx = fluxion::reshape(reduce_sum(dy * x, {1}), {batch, groups, per_group});
        const tensor<T, Device> a = reduce_sum(gamma_g * sum_dy, {2}, keepdims);   // sum gamma dy
        const tensor<T, Device> b = reduce_sum(gamma_g * sum_dyx, {2}, keepdims);  // sum gamma dy x
        const T inv_m = T(1) / static_cast<T>(positions * per_group);
        const tensor<T, Device> x_coef = -(rstd * rstd * rstd) * (b - mean * a) * inv_m;
        const tensor<T, Device> offset = -rstd * a * inv_m - mean * x_coef;
        tensor<T, Device> dx = fluxion::reshape(fluxion::reshape(dy, tiled_shape) * scale_t + xt * to_tiled(x_coef) + to_tiled(offset),
                                       {batch, positions, channels});
        tensor<T, Device> dgamma = fluxion::reshape(reduce_sum((sum_dyx - mean * sum_dy) * rstd, {0}), {channels});
        tensor<T, Device> dbeta = fluxion::reshape(reduce_sum(sum_dy, {0}), {channels});
        return std::tuple{std::move(dx), std::move(dgamma), std::move(dbeta)};
      };
      return std::pair{std::move(y), backward};
    });
    return activated(f(flat, gamma_variable, beta_variable));
  }
#endif
}
}  // namespace detail

template <int Groups = 32, class T = float, class Device = cpu>
class group_norm : public detail::affine_norm<group_norm<Groups, T, Device>, T, Device, group_norm_options> {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::group_norm<Groups, T>: T must be a floating-point type.");
  static_assert(Groups > 0 || Groups == -1,
                "fluxion::nn::group_norm<Groups>: Groups must be positive, or -1 for one group per channel "
                "(instance normalization, nn::instance_norm).");
  using base = detail::affine_norm<group_norm<Groups, T, Device>, T, Device, group_norm_options>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "group_normalization";
  static constexpr const char* layer_text = "group_norm";
  template <class U, class D = cpu>
  using rebind = group_norm<Groups, U, D>;
  /// The per-example output shape is the input's; the groups must divide its channels (the last axis).
  template <index_t... D>
  static auto output_shape(static_shape<D...>) {  // auto: sequential's decltype runs the check
    if constexpr (sizeof...(D) >= 1) {  // nn::input<> is refused where it is written
      constexpr index_t channels = static_shape<D...>::dims[sizeof...(D) - 1];
      constexpr index_t groups = Groups == -1 ? channels : Groups;
      static_assert(detail::check_extents<(groups > 0 && channels % groups == 0), "group_norm", "channels", channels,
                                          "groups", groups>::value,
                    "fluxion::nn::group_norm<Groups>: the groups must divide the channels (the input's last axis) "
                    "into groups of equal size; choose Groups among the channel count's divisors, or -1 for one "
                    "group per channel.");
    }
    return static_shape<D...>{};
  }

  /// Keras's defaults: epsilon 1e-3, gamma ones, beta zeros.
  group_norm() : group_norm(group_norm_options{}) {}
  template <layer_name S>
  explicit group_norm(S&& name) : group_norm(group_norm_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: group_norm<32>{{.epsilon = 1e-5, .center = false}}.
  explicit group_norm(group_norm_options options) : base(std::move(options), [](group_norm_options&) {}) {}
  /// The same layer for another element type or device; the variables are created when it is built.
  template <class U, class D>
    requires(!std::is_same_v<group_norm<Groups, U, D>, group_norm>)
  explicit group_norm(const group_norm<Groups, U, D>& other) : group_norm(other.options()) {}

  /// The number of groups: Groups, or the channel count for -1 (0 until the layer is built).
  index_t groups() const noexcept { return Groups == -1 ? this->m_channels : Groups; }

  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() < 1) throw shape_error(this->text() + ": the input needs a channel axis after the batch axis");
    const index_t channels = per_example[per_example.rank() - 1];
    const index_t groups = Groups == -1 ? channels : Groups;
    if (channels == 0 || channels % groups != 0)
      throw shape_error(this->text() + ": " + std::to_string(groups) + " groups do not divide the input's " +
                        std::to_string(channels) + " channels (its last axis) into groups of equal size");
    this->build_gamma_beta(channels, gen);
  }

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::group_norm: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as group_norm<Groups, T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::group_norm: the input is on another device than the layer's variables; move it "
                  "with fluxion::to<Device>, or declare the layer as group_norm<Groups, T, Device>.");
    const tensor<T, Device> xt = this->checked_input(e, "channels");
    const fluxion::shape& s = xt.shape();
    const index_t batch = s[0], channels = this->m_channels, groups = this->groups();
    const index_t positions = batch == 0 ? 0 : s.size() / (batch * channels);  // the axes between
    const T eps = static_cast<T>(this->m_options.epsilon);
    const tensor<T, Device> flat = reshape(xt, {batch, positions, channels});
    // A relu after the layer is applied by group_normalize (on the cpu, by the kernel's passes).
    constexpr bool relu = detail::is_relu_epilogue<Epilogue>();
    tensor<T, Device> y = detail::group_normalize(flat, *this->m_gamma, *this->m_beta, groups, eps, relu);
    if constexpr (!relu) y = epilogue(y);
    return reshape(y, s.to_vector());
  }

};

/// Instance normalization: each example's channel normalized alone over the axes between the batch
/// and the channels (Ulyanov et al., 2016; style transfer), Keras's GroupNormalization(groups=-1)
/// and PyTorch's InstanceNorm2d(affine=True).
template <class T = float, class Device = cpu>
using instance_norm = group_norm<-1, T, Device>;

}  // namespace fluxion::nn
