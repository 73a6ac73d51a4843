// fx::nn::layer_norm: Keras's LayerNormalization over the last axis.
//
//   fx::nn::layer_norm ln;                            // epsilon 1e-3, as Keras
//   fx::tensor<float> y = ln(x);                      // x: (batch, ..., features), same shape out
//   ln.gamma().shape();                               // (features): ones; ln.beta(): zeros
//
// Each example's last axis is normalized with its own mean and biased variance, y = gamma (x -
// mean) / sqrt(var + epsilon) + beta, the same in training and inference: two reductions, then one
// fused statement (with the default autodiff settings a relu that follows in a sequential model
// runs in the cpu kernel's passes and other activations are a statement of their own; otherwise
// the activation is the statement's epilogue). With the default
// settings the backward pass is written by hand, and on the cpu one kernel runs each pass over
// the rows (layer_norm_rows and layer_normalize below).
//
// Keras's other arguments are nn::layer_norm_options: center = false leaves no beta and scale =
// false no gamma (beta() and gamma() throw; the statement adds a constant 0 and multiplies by a
// constant 1, which no tape watches), the two initializers, and gamma's and beta's regularizers and
// constraints (kept on the variables). rms_scaling = true is Keras 3's RMS normalization (RMSNorm,
// as LLaMA's): y = gamma x / sqrt(mean(x^2) + epsilon), with gamma only (center and scale are
// ignored, as Keras ignores them: no beta variable), one reduction and one statement: layer_norm's
// statements with a mean of zeros.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../autodiff/custom_gradient.hpp"
#include "../backend/cpu/detail/simd_ops.hpp"
#include "../backend/cpu/thread_pool.hpp"
#include "../expr/elementwise.hpp"
#include "../expr/reduce.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "module.hpp"

namespace fluxion::nn {

/// Keras's LayerNormalization arguments beyond the axis (the last), in its order, with its defaults:
///
///   fx::nn::layer_norm{{.epsilon = 1e-6}}
///   fx::nn::layer_norm{{.rms_scaling = true}}                 // RMSNorm: gamma x / rms(x)
///   fx::nn::layer_norm{{.center = false, .gamma_regularizer = fx::nn::regularizers::l2(1e-4)}}
struct layer_norm_options {
  double epsilon = 1e-3;
  bool center = true;
  bool scale = true;
  bool rms_scaling = false;
  initializer beta_initializer = initializers::zeros();
  initializer gamma_initializer = initializers::ones();
  regularizer beta_regularizer = {};
  regularizer gamma_regularizer = {};
  constraint beta_constraint = {};
  constraint gamma_constraint = {};
  std::string name = {};
};

namespace detail {

/// layer_norm's rows on the cpu, each row read into L1 once a pass: the forward pass (the row's
/// mean and variance, then y = (x - mean) rstd gamma + beta) and the backward pass (the row's two
/// sums, then dx, and gamma's and beta's sums), where the statements stream every operand once per
/// statement. rms: the mean is 0 and the variance the mean square, with no mean(dxhat) term.
/// Tasks hold a fixed number of rows (at most 64 tasks), whatever the thread count, and gamma's and
/// beta's sums add the tasks' partial sums in task order: the results are the same for any number
/// of threads.
template <class T>
struct layer_norm_rows {
  using ops = fluxion::detail::kernels::simd_ops<T>;
  index_t rows, n;
  bool rms;

  index_t rows_per_task() const { return std::max<index_t>({1, (rows + 63) / 64, 16384 / std::max<index_t>(1, n)}); }
  index_t tasks() const { return (rows + rows_per_task() - 1) / rows_per_task(); }
  template <class Body>
  void for_tasks(Body&& body) const {
    const index_t per = rows_per_task();  // one task runs on the calling thread (parallel_for)
    fluxion::detail::parallel_for(tasks(),
                                  [&](index_t task) { body(task, task * per, std::min(rows, (task + 1) * per)); });
  }
  /// The sum over a row of f(ops, i), a vector (or, at the tail, a value) of terms at i.
  template <class F>
  T row_sum(F&& f) const {
    typename ops::batch acc = ops::splat(T(0));
    T tail = T(0);
    fluxion::detail::kernels::for_each_channel_chunk<T>(n, [&](auto o, index_t i) {
      if constexpr (std::is_same_v<decltype(o), ops>)
        acc += f(o, i);
      else
        tail += f(o, i);
    });
    return ops::sum(acc) + tail;
  }

  /// A row's output before a fused relu at i, ((x - mean) rstd) gamma + beta, rounded once in its
  /// last step: the backward pass recomputes it for relu's mask and gets the forward pass's bits.
  template <class O>
  static auto pre_activation(O o, const T* xr, const T* g, const T* b, index_t i, T m, T rs) {
    return o.fma((o.loadu(xr + i) - o.splat(m)) * o.splat(rs), o.loadu(g + i), o.loadu(b + i));
  }

  /// y, and each row's mean and rstd; with Relu, y is relu's of the normalization.
  template <bool Relu = false>
  void forward(const T* x, const T* g, const T* b, T eps, T* y, T* mean, T* rstd) const {
    const T inv_n = T(1) / static_cast<T>(n);
    for_tasks([&](index_t, index_t begin, index_t end) {
      for (index_t r = begin; r < end; ++r) {
        const T* xr = x + r * n;
        T* yr = y + r * n;
        const T m = rms ? T(0) : row_sum([&](auto o, index_t i) { return o.loadu(xr + i); }) * inv_n;
        const T v = row_sum([&](auto o, index_t i) {
                      const auto d = o.loadu(xr + i) - o.splat(m);
                      return d * d;
                    }) *
                    inv_n;
        const T rs = T(1) / std::sqrt(v + eps);
        fluxion::detail::kernels::for_each_channel_chunk<T>(n, [&](auto o, index_t i) {
          const auto z = pre_activation(o, xr, g, b, i, m, rs);
          if constexpr (Relu)
            o.storeu(yr + i, o.relu(z));
          else
            o.storeu(yr + i, z);
        });
        mean[r] = m;
        rstd[r] = rs;
      }
    });
  }

  /// dx, and gamma's and beta's gradients (each n), from dy and the forward pass's statistics. With
  /// Relu (forward<true>), dy is first masked where the recomputed pre-activation is not positive.
  template <bool Relu = false>
  void backward(const T* x, const T* dy, const T* g, const T* b, const T* mean, const T* rstd, T* dx, T* dg,
                T* db) const {
    const T inv_n = T(1) / static_cast<T>(n);
    const index_t count = tasks();
    std::vector<T> partial(static_cast<std::size_t>(2 * count * n), T(0));  // per task: gamma's, beta's
    for_tasks([&](index_t task, index_t begin, index_t end) {
      T* pg = partial.data() + 2 * task * n;
      T* pb = pg + n;
      for (index_t r = begin; r < end; ++r) {
        const T* xr = x + r * n;
        const T* dyr = dy + r * n;
        T* dxr = dx + r * n;
        const T m = mean[r], rs = rstd[r];
        auto grad = [&](auto o, index_t i) {  // dy, masked with Relu
          if constexpr (Relu)
            return fluxion::detail::kernels::where_positive(pre_activation(o, xr, g, b, i, m, rs), o.loadu(dyr + i));
          else
            return o.loadu(dyr + i);
        };
        const T a = rms ? T(0) : row_sum([&](auto o, index_t i) { return grad(o, i) * o.loadu(g + i); }) * inv_n;
        const T c = row_sum([&](auto o, index_t i) {
                      return grad(o, i) * o.loadu(g + i) * (o.loadu(xr + i) - o.splat(m));
                    }) *
                    inv_n * rs * rs;
        fluxion::detail::kernels::for_each_channel_chunk<T>(n, [&](auto o, index_t i) {
          const auto d = grad(o, i), xc = o.loadu(xr + i) - o.splat(m);
          o.storeu(dxr + i, (d * o.loadu(g + i) - o.splat(a) - xc * o.splat(c)) * o.splat(rs));
          o.storeu(pg + i, o.loadu(pg + i) + d * xc * o.splat(rs));
          o.storeu(pb + i, o.loadu(pb + i) + d);
        });
      }
    });
    for (index_t j = 0; j < n; ++j) {
      dg[j] = T(0);
      db[j] = T(0);
    }
    for (index_t task = 0; task < count; ++task)
      for (index_t j = 0; j < n; ++j) {
        dg[j] += partial[static_cast<std::size_t>(2 * task * n + j)];
        db[j] += partial[static_cast<std::size_t>((2 * task + 1) * n + j)];
      }
  }
};

/// layer_norm's statement on `x` over its last axis, the activation that follows applied in the
/// same pass (with `rms`, x / rms(x) * gamma). A function of T, Device and the epilogue only, so
/// that the library holds the float cpu ones (nn/prebuilt.hpp); Config as batch_normalize's.
template <class T, class Device, class Epilogue, int Config = fluxion::detail::autodiff_config>
tensor<T, Device> layer_normalize(const tensor<T, Device>& x, variable<T, Device>& gamma, variable<T, Device>& beta,
                                  T eps, bool rms, const Epilogue& epilogue) {
#if FLUXION_MAX_DERIVATIVE_ORDER == 1 && !FLUXION_FORWARD_MODE
  if (x.size() == 0) return x;  // nothing to normalize (and no row length to divide by)
  {
    // The backward pass written by hand (fx::custom_gradient), as batch_norm's, over the rows of
    // the last axis, with xhat = (x - mean) rstd and dxhat = dy gamma:
    //   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dgamma = sum(dy xhat),  dbeta = sum(dy).
    // On the cpu the row kernel runs both passes; elsewhere five statements over x and dy, where
    // the tape's rules for the forward statements took about twice as long. RMS normalization is
    // the same with a mean of zeros (x - 0 is x), the mean square as the variance, beta's zeros
    // added and no mean(dxhat) term, so that a program compiles one set of kernels for both (a -0
    // output of RMS's is +0).
    // It reads each row's statistics as constants, so with FLUXION_MAX_DERIVATIVE_ORDER above 1
    // (or 0), or with forward mode, the tape differentiates the statements after the #else
    // instead: the same statements as the device path's, bit for bit, and the cpu kernel's values
    // within rounding. Nothing here is offered to autodiff: the statements compile their kernels
    // only (had the recorded ones been compiled too, a program would take 8 CPU s more).
    const std::vector<index_t> dims = x.shape().to_vector();
    const index_t features = dims.back();
    const std::vector<index_t> flat = {x.size() / features, features};
    if constexpr (std::is_same_v<Device, cpu>) {
      // The rows in one pass each way (layer_norm_rows), within rounding of the statements below.
      // A relu after the layer runs in the kernel's passes (no pass of its own either way).
      constexpr bool relu = is_relu_epilogue<Epilogue>();
      const layer_norm_rows<T> k{flat[0], features, rms};
      auto normalize = custom_gradient([&](const tensor<T>& xin, const tensor<T>& g, const tensor<T>& b) {
        tensor<T> out{xin.shape()}, mean{fluxion::shape{flat[0]}}, rstd{fluxion::shape{flat[0]}};
        k.template forward<relu>(xin.data(), g.data(), b.data(), eps, out.mutable_data(), mean.mutable_data(),
                                 rstd.mutable_data());
        auto backward = [=](const tensor<T>& dy) {
          tensor<T> dx{xin.shape()}, dg{fluxion::shape{features}}, db{fluxion::shape{features}};
          k.template backward<relu>(xin.data(), dy.data(), g.data(), b.data(), mean.data(), rstd.data(),
                                    dx.mutable_data(), dg.mutable_data(), db.mutable_data());
          return std::tuple{std::move(dx), std::move(dg), std::move(db)};
        };
        return std::pair{std::move(out), backward};
      });
      tensor<T> y = normalize(x, gamma, beta);
      if constexpr (!std::is_same_v<Epilogue, identity> && !relu) y = tensor<T>(epilogue(y));
      return y;
    } else {
      auto eval = [](const auto& e) { return fluxion::detail::materialize_unrecorded(e); };
      auto normalize =
          custom_gradient([&](const tensor<T, Device>& xin, const tensor<T, Device>& g, const tensor<T, Device>& b) {
            const tensor<T, Device> x2 = eval(fluxion::reshape(xin, flat));
            const tensor<T, Device> mean = rms ? zeros<T, Device>({flat[0], 1}) : eval(reduce_mean(x2, -1, keepdims));
            const tensor<T, Device> variance = eval(reduce_mean(square(x2 - mean), -1, keepdims));
            tensor<T, Device> out = eval(fluxion::reshape(eval((x2 - mean) * rsqrt(variance + eps) * g + b), dims));
            auto backward = [=](const tensor<T, Device>& dy) {
              const tensor<T, Device> dy2 = eval(fluxion::reshape(dy, flat));
              const tensor<T, Device> rstd = eval(rsqrt(variance + eps));
              const tensor<T, Device> a = rms ? mean : eval(reduce_mean(dy2 * g, -1, keepdims));
              const tensor<T, Device> c = eval(eval(reduce_mean(dy2 * g * (x2 - mean), -1, keepdims)) * rstd * rstd);
              tensor<T, Device> dx = eval(fluxion::reshape(eval((dy2 * g - a - (x2 - mean) * c) * rstd), dims));
              tensor<T, Device> dg = eval(reduce_sum(dy2 * (x2 - mean) * rstd, {0}));
              tensor<T, Device> db = rms ? zeros<T, Device>({features}) : eval(reduce_sum(dy2, {0}));
              return std::tuple{std::move(dx), std::move(dg), std::move(db)};
            };
            return std::pair{std::move(out), backward};
          });
      tensor<T, Device> y = normalize(x, gamma, beta);
      if constexpr (!std::is_same_v<Epilogue, identity>) y = tensor<T, Device>(epilogue(y));
      return y;
    }
  }
#else
  std::vector<index_t> row_stats = x.shape().to_vector();  // (..., 1)
  if (!row_stats.empty()) row_stats.back() = 1;
  const tensor<T, Device> mean =
      rms ? zeros<T, Device>(fluxion::shape(row_stats)) : tensor<T, Device>(reduce_mean(x, -1, keepdims));
  const tensor<T, Device> variance = reduce_mean(square(x - mean), -1, keepdims);
  return tensor<T, Device>(epilogue((x - mean) * rsqrt(variance + eps) * gamma + beta));
#endif
}

}  // namespace detail

template <class T = float, class Device = cpu>
class layer_norm : public detail::affine_norm<layer_norm<T, Device>, T, Device, layer_norm_options> {
  static_assert(std::is_floating_point_v<T>, "fluxion::nn::layer_norm<T>: T must be a floating-point type.");
  using base = detail::affine_norm<layer_norm<T, Device>, T, Device, layer_norm_options>;

 public:
  static constexpr bool names_itself = true;
  static constexpr bool device_generic = true;
  static constexpr bool elementwise = false;
  /// Keras's supports_masking: a sequential model passes a mask through this layer (it keeps the time axis).
  static constexpr bool supports_masking = true;
  static constexpr bool takes_epilogue = true;
  static constexpr const char* base_name = "layer_normalization";
  static constexpr const char* layer_text = "layer_norm";
  template <class U, class D = cpu>
  using rebind = layer_norm<U, D>;
  template <index_t... D>
  static static_shape<D...> output_shape(static_shape<D...>) {
    return {};
  }

  layer_norm() : layer_norm(layer_norm_options{}) {}
  /// A template, so that layer_norm{{}} takes the options (Keras's defaults), not an epsilon of 0.
  template <class E>
  requires std::is_arithmetic_v<E>
  explicit layer_norm(E epsilon, std::string name = {})
      : layer_norm(layer_norm_options{.epsilon = static_cast<double>(epsilon), .name = std::move(name)}) {}
  template <layer_name S>
  explicit layer_norm(S&& name) : layer_norm(layer_norm_options{.name = std::string(std::forward<S>(name))}) {}
  /// Keras's arguments: layer_norm{{.epsilon = 1e-6, .rms_scaling = true}}. With rms_scaling, Keras
  /// ignores center and scale: the layer has gamma and no beta.
  explicit layer_norm(layer_norm_options options)
      : base(std::move(options), [this](layer_norm_options& o) {
          if (!o.rms_scaling) return;
          if (o.beta_regularizer || o.beta_constraint)
            throw invalid_argument(this->text() +
                                   ": a beta_regularizer or beta_constraint with rms_scaling = true has "
                                   "no beta to act on (RMS normalization scales by gamma only)");
          o.center = false;
          o.scale = true;
        }) {}
  /// The same layer for another element type; the variables are created when it is built.
  template <class U, class D>
  requires(!std::is_same_v<layer_norm<U, D>, layer_norm>) explicit layer_norm(const layer_norm<U, D>& other)
      : layer_norm(other.options()) {}

  void build(const fluxion::shape& per_example, random::generator& gen = random::global_generator()) {
    if (per_example.rank() < 1) throw shape_error(this->text() + ": the input needs at least one axis of features");
    this->build_gamma_beta(per_example[per_example.rank() - 1], gen);
  }

  template <class X, class Epilogue = detail::identity>
  tensor<T, Device> operator()(X&& x, bool /*training*/ = false, const Epilogue& epilogue = {}) {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    static_assert(std::is_same_v<value_type_t<decltype(e)>, T>,
                  "fluxion::nn::layer_norm: the input's element type differs from the layer's; convert it with "
                  "fluxion::cast<T>, or declare the layer as layer_norm<T>.");
    static_assert(std::is_same_v<device_t<decltype(e)>, Device>,
                  "fluxion::nn::layer_norm: the input is on another device than the layer's variables; move it "
                  "with fluxion::to<Device>, or declare the layer as layer_norm<T, Device>.");
    const tensor<T, Device> xt = this->checked_input(e, "features");
    return detail::layer_normalize(xt, *this->m_gamma, *this->m_beta, static_cast<T>(this->m_options.epsilon),
                                   this->m_options.rms_scaling, epilogue);
  }
};

}  // namespace fluxion::nn
