// Second derivatives through batch_norm (training), group_norm and layer_norm, which a program gets with
// FLUXION_MAX_DERIVATIVE_ORDER 2 (a gradient penalty, a Hessian-vector product): an outer tape's
// gradient of the inner tape's gradient against central differences of the inner gradient
// (double). With the default settings these layers use hand-written backward passes that read the
// batch's, group's or row's statistics as constants; at order 2 the tape differentiates their
// statements.
#define FLUXION_MAX_DERIVATIVE_ORDER 2
#define FLUXION_FORWARD_MODE 0
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

/// Checks d/dx sum(v * d/dx sum(w * f(x))) (a Hessian-vector product) against central differences
/// of the inner gradient, element by element.
template <class F>
void check_second_derivative(F f, const fx::tensor<double>& x, std::uint64_t seed) {
  fx::random::generator gen{seed};
  const fx::tensor<double> w = fx::random::normal<double>(x.shape(), gen);
  const fx::tensor<double> v = fx::random::normal<double>(x.shape(), gen);
  auto inner_gradient = [&](const fx::tensor<double>& at) {
    fx::gradient_tape tape;
    tape.watch(at);
    return fx::tensor<double>(tape.gradient(fx::reduce_sum(f(at) * w), at));
  };
  fx::tensor<double> hv;
  {
    fx::gradient_tape outer;
    outer.watch(x);
    fx::tensor<double> g;
    {
      fx::gradient_tape inner;
      inner.watch(x);
      g = inner.gradient(fx::reduce_sum(f(x) * w), x);
    }
    hv = outer.gradient(fx::reduce_sum(g * v), x);
  }
  REQUIRE(hv.shape() == x.shape());
  const std::vector<double> xv = x.to_vector(), got = hv.to_vector();
  const double h = 1e-5;
  for (std::size_t i = 0; i < xv.size(); ++i) {
    std::vector<double> plus = xv, minus = xv;
    plus[i] += h;
    minus[i] -= h;
    const double up = fx::reduce_sum(inner_gradient(fx::from_vector(plus, x.shape())) * v).item();
    const double down = fx::reduce_sum(inner_gradient(fx::from_vector(minus, x.shape())) * v).item();
    CHECK_MESSAGE(got[i] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-5).scale(1), "element " << i);
  }
}

}  // namespace

TEST_CASE("batch_norm and group_norm: second derivatives at order 2 against differences of the gradient") {
  fx::random::generator gen{11};
  nn::batch_norm<-1, double> bn;
  bn.build(fx::shape{3}, gen);
  bn.gamma().assign(fx::random::uniform<double>({3}, gen, 0.5, 1.5));
  bn.set_update_moving_averages(false);
  check_second_derivative([&](const fx::tensor<double>& x) { return bn(x, /*training=*/true); },
                          fx::random::normal<double>({4, 2, 3}, gen, 0.5, 2.0), 12);
  nn::group_norm<2, double> gn;
  gn.build(fx::shape{4}, gen);
  gn.gamma().assign(fx::random::uniform<double>({4}, gen, 0.5, 1.5));
  check_second_derivative([&](const fx::tensor<double>& x) { return gn(x); },
                          fx::random::normal<double>({2, 3, 4}, gen, 0.5, 2.0), 13);
}

TEST_CASE("layer_norm: second derivatives at order 2, with and without rms_scaling") {
  fx::random::generator gen{14};
  for (bool rms : {false, true}) {
    CAPTURE(rms);
    nn::layer_norm<double> ln{{.rms_scaling = rms}};
    ln.build(fx::shape{5}, gen);
    ln.gamma().assign(fx::random::uniform<double>({5}, gen, 0.5, 1.5));
    if (!rms) ln.beta().assign(fx::random::normal<double>({5}, gen));
    check_second_derivative([&](const fx::tensor<double>& x) { return ln(x); },
                            fx::random::normal<double>({2, 2, 5}, gen, 0.5, 2.0), 15);
  }
}
