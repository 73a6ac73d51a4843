// fx::softmax, fx::log_softmax, fx::gelu and the activation layers: gradients against finite
// differences (double), values and gradients against PyTorch (float), stability at large inputs.
#define FLUXION_FORWARD_MODE 0
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
const fx::testing::check_options reverse_only{.reverse = true, .forward = false};

template <class Layer>
void check_activation(Layer layer, const std::string& label) {
  fx::random::generator gen{8};
  const fx::tensor<double> x = fx::random::normal<double>({3, 4}, gen, 0.0, 2.0);
  auto r = fx::testing::check_gradients([&](const auto& a) { return layer(a); }, reverse_only, x);
  CHECK_MESSAGE(r.ok, (label + ": " + r.report));
  const fx::tensor<float> xf = peer::load("act_" + label + "_x");
  fx::gradient_tape tape;
  tape.watch(xf);
  fx::tensor<float> y = layer(xf);
  auto g = tape.gradient(fx::reduce_sum(y * peer::load("act_" + label + "_w")), xf);
  peer::check_close(y, peer::load("act_" + label + "_y"), label + " y");
  peer::check_close(g, peer::load("act_" + label + "_dx"), label + " dx");
}
}  // namespace

TEST_CASE("activations: gradients, and PyTorch's values and gradients") {
  check_activation(nn::relu{}, "relu");
  check_activation(nn::sigmoid{}, "sigmoid");
  check_activation(nn::tanh{}, "tanh");
  check_activation(nn::softmax{}, "softmax");
  check_activation(nn::log_softmax{}, "log_softmax");
  check_activation(nn::gelu{}, "gelu");
}

TEST_CASE("softmax and log_softmax: stable at large inputs, along any axis") {
  const fx::tensor<float> x = fx::from_vector(std::vector<float>{1e4f, 0.f, -1e4f, 3.f, 3.f, 3.f}, {2, 3});
  const auto p = fx::tensor<float>(fx::softmax(x)).to_vector();
  CHECK(p[0] == 1.f);
  CHECK(p[1] == 0.f);
  CHECK(p[3] == doctest::Approx(1.f / 3));
  const auto lp = fx::tensor<float>(fx::log_softmax(x)).to_vector();
  CHECK(lp[0] == 0.f);
  CHECK(lp[2] == doctest::Approx(-2e4f));
  const auto col = fx::tensor<float>(fx::softmax(x, 0)).to_vector();
  CHECK(col[0] == 1.f);
  CHECK(col[1] + col[4] == doctest::Approx(1.f));
}
