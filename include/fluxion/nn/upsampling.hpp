// Keras's spatial resizing layers over NHWC input, the plumbing of decoders and U-Nets:
//
//   fx::nn::upsampling2d<2> up;                 // (batch, 7, 7, c) -> (batch, 14, 14, c): each pixel repeated 2x2
//   fx::nn::upsampling2d<2, 3> wide;            // -> (batch, 14, 21, c)
//   fx::nn::upsampling2d<2, 2, fx::nn::bilinear> smooth;   // bilinear interpolation, Keras's "bilinear"
//   fx::nn::zero_padding2d<1> pad;              // (batch, 28, 28, c) -> (batch, 30, 30, c): zeros around
//   fx::nn::zero_padding2d<1, 2> pad_hw;        // one row above and below, two columns left and right
//   fx::nn::cropping2d<2> crop;                 // (batch, 28, 28, c) -> (batch, 24, 24, c)
//
// upsampling2d is Keras's UpSampling2D. Its default interpolation, nearest, is the input as a
// (batch, h, 1, w, 1, c) view broadcast to (batch, h, SizeH, w, SizeW, c), one copy; its gradient
// sums each block. With `bilinear` it is Keras's interpolation="bilinear" (tf.image.resize with
// half-pixel centers, PyTorch's interpolate with align_corners=False): output row o reads input
// rows floor(s) and floor(s) + 1 (clamped to the image) with weights 1 - f and f, where
// s = (o + 0.5) / SizeH - 0.5 and f = s - floor(s); columns likewise. It runs as two statements,
// rows then columns, each the sum of two weighted gathers, so its gradient is gather's (a sum of
// the weighted rows) and it is differentiable to any order, on any device. zero_padding2d (ZeroPadding2D) is fx::pad with zeros; cropping2d
// (Cropping2D) a slice. Each is one statement, differentiable to any order, on any device.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../expr/indexing.hpp"
#include "../expr/remap.hpp"
#include "../tensor/creation.hpp"
#include "module.hpp"

namespace fluxion::nn {

namespace detail {
/// Throws unless `s` is (batch, height, width, channels).
inline void require_image(const char* layer, const std::string& name, const fluxion::shape& s) {
  if (s.rank() != 4)
    throw shape_error(std::string(layer) + " '" + name + "': expects input of shape (batch, height, width, channels), got " +
                      to_string(s));
}

/// The statement of every upsampling2d layer of element type T (one instance per program).
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> upsampling2d_forward(const tensor<T, Device>& x, index_t sh, index_t sw) {
  const fluxion::shape& s = x.shape();
  const index_t b = s[0], h = s[1], w = s[2], c = s[3];
  return tensor<T, Device>(fluxion::reshape(
      fluxion::broadcast_to(fluxion::reshape(x, {b, h, 1, w, 1, c}), fluxion::shape{b, h, sh, w, sw, c}),
      {b, h * sh, w * sw, c}));
}

/// The two source positions and weights of each of `size * scale` outputs along one axis of
/// `size` inputs (bilinear, half-pixel centers): indices (n), and the upper tap's weights shaped
/// `weight_shape` (the lower tap's is 1 - that, formed in the statement: three uploads, not four).
template <class T, class Device>
struct bilinear_taps {
  tensor<std::int32_t, Device> lo, hi;
  tensor<T, Device> w_hi;
  bilinear_taps(index_t size, index_t scale, const fluxion::shape& weight_shape) {
    const index_t n = size * scale;
    std::vector<std::int32_t> l(static_cast<std::size_t>(n)), h(l.size());
    std::vector<T> wh(l.size());
    for (index_t o = 0; o < n; ++o) {
      const double src = (static_cast<double>(o) + 0.5) / static_cast<double>(scale) - 0.5;
      const double f0 = std::floor(src);
      const index_t i0 = static_cast<index_t>(f0);
      const auto k = static_cast<std::size_t>(o);
      l[k] = static_cast<std::int32_t>(std::clamp<index_t>(i0, 0, size - 1));
      h[k] = static_cast<std::int32_t>(std::clamp<index_t>(i0 + 1, 0, size - 1));
      wh[k] = static_cast<T>(src - f0);
    }
    lo = fluxion::detail::device_copy<Device>(from_vector(l, {n}));
    hi = fluxion::detail::device_copy<Device>(from_vector(h, {n}));
    w_hi = fluxion::detail::device_copy<Device>(from_vector(wh, weight_shape));
  }
};

/// upsampling2d with bilinear interpolation: rows, then columns, each one statement.
template <class T, int Config = fluxion::detail::autodiff_config, class Device = cpu>
tensor<T, Device> upsampling2d_bilinear(const tensor<T, Device>& x, index_t sh, index_t sw) {
  const fluxion::shape& s = x.shape();
  const bilinear_taps<T, Device> rows(s[1], sh, {1, s[1] * sh, 1, 1}), cols(s[2], sw, {1, 1, s[2] * sw, 1});
  const tensor<T, Device> tall(fluxion::gather(x, rows.lo, 1) * (T(1) - rows.w_hi) +
                               fluxion::gather(x, rows.hi, 1) * rows.w_hi);
  return tensor<T, Device>(fluxion::gather(tall, cols.lo, 2) * (T(1) - cols.w_hi) +
                           fluxion::gather(tall, cols.hi, 2) * cols.w_hi);
}

/// The per-example (height, width, channels) check of the spatial layers.
template <fixed_string Layer, index_t... D>
constexpr bool image_rank() {
  static_assert(check_extents<sizeof...(D) == 3, Layer, "input rank", sizeof...(D), "rank", 3>::value,
                "fluxion::nn: upsampling2d, zero_padding2d and cropping2d take (height, width, channels) per "
                "example (rank 3); reshape the input first, e.g. with fluxion::nn::reshape<28, 28, 1>.");
  return sizeof...(D) == 3;
}
}  // namespace detail

/// How upsampling2d fills the new pixels: Keras's UpSampling2D interpolation.
enum class interpolation { nearest, bilinear };
inline constexpr interpolation nearest = interpolation::nearest;
inline constexpr interpolation bilinear = interpolation::bilinear;

/// Keras's UpSampling2D: each pixel repeated SizeH times down and SizeW times across (nearest),
/// or bilinear interpolation between the pixels (Mode = bilinear).
template <index_t SizeH, index_t SizeW = SizeH, interpolation Mode = interpolation::nearest>
struct upsampling2d : stateless_layer<upsampling2d<SizeH, SizeW, Mode>> {
  static_assert(SizeH > 0 && SizeW > 0, "fluxion::nn::upsampling2d<SizeH, SizeW>: the sizes must be positive.");
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "up_sampling2d";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    if constexpr (detail::image_rank<"upsampling2d", D...>()) {
      constexpr std::array<index_t, 3> in{D...};
      return static_shape<in[0] * SizeH, in[1] * SizeW, in[2]>{};
    } else {
      return static_shape<1, 1, 1>{};
    }
  }

  explicit upsampling2d(std::string n = {}) : stateless_layer<upsampling2d>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    const auto in = fluxion::detail::materialize(fluxion::detail::as_expr<X>(std::forward<X>(x)));
    detail::require_image("upsampling2d", this->m_name, in.shape());
    if constexpr (Mode == interpolation::bilinear) return detail::upsampling2d_bilinear(in, SizeH, SizeW);
    else return detail::upsampling2d_forward(in, SizeH, SizeW);
  }
};

/// Keras's ZeroPadding2D: PadH rows of zeros above and below, PadW columns left and right.
template <index_t PadH, index_t PadW = PadH>
struct zero_padding2d : stateless_layer<zero_padding2d<PadH, PadW>> {
  static_assert(PadH >= 0 && PadW >= 0, "fluxion::nn::zero_padding2d<PadH, PadW>: the padding must not be negative.");
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "zero_padding2d";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    if constexpr (detail::image_rank<"zero_padding2d", D...>()) {
      constexpr std::array<index_t, 3> in{D...};
      return static_shape<in[0] + 2 * PadH, in[1] + 2 * PadW, in[2]>{};
    } else {
      return static_shape<1, 1, 1>{};
    }
  }

  explicit zero_padding2d(std::string n = {})
      : stateless_layer<zero_padding2d>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    detail::require_image("zero_padding2d", this->m_name, e.shape());
    using T = value_type_t<decltype(e)>;
    return tensor<T, device_t<decltype(e)>>(fluxion::pad(std::move(e), {{0, 0}, {PadH, PadH}, {PadW, PadW}, {0, 0}}));
  }
};

/// Keras's Cropping2D: CropH rows off the top and the bottom, CropW columns off the left and right.
template <index_t CropH, index_t CropW = CropH>
struct cropping2d : stateless_layer<cropping2d<CropH, CropW>> {
  static_assert(CropH >= 0 && CropW >= 0, "fluxion::nn::cropping2d<CropH, CropW>: the cropping must not be negative.");
  static constexpr bool elementwise = false;
  static constexpr bool device_generic = true;
  static constexpr const char* base_name = "cropping2d";

  template <index_t... D>
  static auto output_shape(static_shape<D...>) {
    if constexpr (detail::image_rank<"cropping2d", D...>()) {
      constexpr std::array<index_t, 3> in{D...};
      static_assert(detail::check_extents<(in[0] > 2 * CropH), "cropping2d", "input height", in[0],
                                          "more than twice CropH", 2 * CropH>::value &&
                        detail::check_extents<(in[1] > 2 * CropW), "cropping2d", "input width", in[1],
                                              "more than twice CropW", 2 * CropW>::value,
                    "fluxion::nn::cropping2d<CropH, CropW>: the cropping leaves nothing of the input.");
      return static_shape<in[0] - 2 * CropH, in[1] - 2 * CropW, in[2]>{};
    } else {
      return static_shape<1, 1, 1>{};
    }
  }

  explicit cropping2d(std::string n = {}) : stateless_layer<cropping2d>(n.empty() ? base_name : std::move(n)) {}

  template <class X>
  auto operator()(X&& x, bool /*training*/ = false) const {
    auto e = fluxion::detail::as_expr<X>(std::forward<X>(x));
    const fluxion::shape s = e.shape();
    detail::require_image("cropping2d", this->m_name, s);
    if (s[1] <= 2 * CropH || s[2] <= 2 * CropW)
      throw shape_error("cropping2d '" + this->m_name + "': cropping " + std::to_string(CropH) + " rows and " +
                        std::to_string(CropW) + " columns from each side leaves nothing of input " + to_string(s));
    using T = value_type_t<decltype(e)>;
    return tensor<T, device_t<decltype(e)>>(
        fluxion::slice(std::move(e), {0, CropH, CropW, 0}, {s[0], s[1] - 2 * CropH, s[2] - 2 * CropW, s[3]}));
  }
};

}  // namespace fluxion::nn
