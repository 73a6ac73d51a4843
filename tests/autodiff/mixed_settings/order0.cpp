// The unit without autodiff of tests/autodiff/mixed_settings (see shared.hpp and order1.cpp).
#define FLUXION_MAX_DERIVATIVE_ORDER 0
#define FLUXION_FORWARD_MODE 0
#include "shared.hpp"

#include <array>
#include <exception>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace mixed_settings {

fx::tensor<double> affine(const fx::tensor<double>& x) { return fx::eval(x * 2.0 + 1.0); }

fx::tensor<double> dense_inference(const fx::tensor<double>& x) {
  nn::dense<2, double> layer;
  layer.build(fx::shape{3});
  layer.kernel().assign(fx::tensor<double>({{1.0, 0.5}, {-1.0, 2.0}, {0.25, 0.0}}));
  return layer(x);
}

fx::tensor<double> lstm_inference(const fx::tensor<double>& x) {
  fx::random::generator gen{5};
  nn::lstm<3, true, double> layer;
  layer.build(fx::shape{x.shape()[1], x.shape()[2]}, gen);
  return layer(x);
}

fx::tensor<double> batch_norm_training(const fx::tensor<double>& x) {
  nn::batch_norm<-1, double> layer;
  layer.build(fx::shape{x.shape()[1]});
  return layer(x, true);
}

fx::tensor<double> segment_maxima(const fx::tensor<double>& x) {
  return fx::eval(fx::unsorted_segment_max(x, fx::tensor<std::int64_t>({0, 0, 1}), 2));
}

fx::tensor<double> only_here(const fx::tensor<double>& x) { return fx::eval(fx::exp(x) * 3.0 - x); }

std::string gradient_in_this_unit() {
  const fx::tensor<double> x({0.5, -1.0});
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> y = fx::eval(fx::sin(x) * x);
  try {
    const fx::tensor<double> g = tape.gradient(y, x);
    return g.is_none() ? "no error: none" : "no error";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace mixed_settings
