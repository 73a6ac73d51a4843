// fx::nn::dense: gradients against finite differences (double), forward and backward against
// PyTorch (float), lazy building, rank-3 input, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "fused_inference.hpp"
#include "peer.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
using test::reverse_only;
}

TEST_CASE("dense: gradients with respect to the input, kernel and bias") {
  fx::random::generator gen{5};
  nn::dense<3, double> layer;
  layer.build(fx::shape{4}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 4}, gen);
  const fx::tensor<double> k = layer.kernel().peek(), b = layer.bias().peek() + 0.5;
  auto r = fx::testing::check_gradients(
      [&](const auto& xi, const auto& ki, const auto& bi) {
        layer.kernel().assign(ki);
        layer.bias().assign(bi);
        return layer(xi);
      },
      reverse_only, x, k, b);
  CHECK_MESSAGE(r.ok, r.report);
  // Rank 3: applied along the last axis.
  const fx::tensor<double> x3 = fx::random::normal<double>({2, 3, 4}, gen);
  auto r3 = fx::testing::check_gradients([&](const auto& xi) { return layer(xi); }, reverse_only, x3);
  CHECK_MESSAGE(r3.ok, r3.report);
}

TEST_CASE("dense: forward and backward equal PyTorch's") {
  nn::dense<5> layer;
  layer.build(fx::shape{6});
  layer.kernel().assign(peer::load("dense_kernel"));
  layer.bias().assign(peer::load("dense_bias"));
  const fx::tensor<float> x = peer::load("dense_x");
  fx::gradient_tape tape;
  tape.watch(x);
  fx::tensor<float> y = layer(x);
  fx::tensor<float> s = fx::reduce_sum(y * peer::load("dense_w"));
  auto vars = layer.trainable_variables();
  auto g = tape.gradient(s, std::vector<const fx::variable<float>*>{vars[0], vars[1]});
  peer::check_close(y, peer::load("dense_y"), "y");
  peer::check_close(g[0], peer::load("dense_dkernel"), "d kernel");
  peer::check_close(g[1], peer::load("dense_dbias"), "d bias");
}

TEST_CASE("dense: built on first call, named, with clear errors") {
  nn::dense<4> layer;
  CHECK_FALSE(layer.built());
  CHECK(layer.trainable_variables().empty());
  CHECK_THROWS_WITH_AS(layer.kernel(), "dense 'dense': kernel does not exist before the layer is built (call it once)",
                       fx::error);
  fx::tensor<float> y = layer(fx::ones<float>({3, 7}));
  CHECK(y.shape() == fx::shape{3, 4});
  CHECK(layer.kernel().shape() == fx::shape{7, 4});
  std::vector<std::string> names;
  for (auto* v : layer.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"dense/kernel", "dense/bias"});
  CHECK_THROWS_WITH_AS(layer(fx::ones<float>({3, 8})), "dense 'dense': expects input of shape (batch, ..., 7), got (3, 8)",
                       fx::shape_error);
  nn::dense<2> named{"logits"};
  named(fx::ones<float>({1, 3}));
  CHECK(named.kernel().name() == "logits/kernel");
}

TEST_CASE("dense: the tape sees a layer's variables, and an unseen one is reported by name") {
  nn::dense<2> a, b;
  const fx::tensor<float> x = fx::ones<float>({1, 3});
  a(x);
  b(x);
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(a(x));
  auto vars = b.trainable_variables();  // the loss does not read b
  auto grads = tape.gradient(loss, vars);
  CHECK(grads[0].is_none());
  CHECK_THROWS_WITH_AS(vars[0]->assign_sub(grads[0]),
                       doctest::Contains("assign_sub: the update for variable 'dense/kernel' of shape (3, 2) is none "
                                         "(TensorFlow's None)"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(vars[0]->assign(grads[0]), doctest::Contains("assign: the update for variable 'dense/kernel'"),
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(vars[0]->assign_sub(0.1f * grads[0]), doctest::Contains("multiply: an operand is none"),
                       fx::invalid_argument);
}

TEST_CASE_TEMPLATE("dense: inference applies bias and relu in the GEMM, with the taped statement's numbers", T, float,
                   double) {
  // A batch-1 layer in column panels and chunks of k (the few-rows path), a few rows of 10 units,
  // a batch of 10 units (the narrow path), a general product, and rank-3 input.
  auto check = [](auto layer, fx::shape in) {
    fx::random::generator gen{6};
    layer.build(fx::shape{in[in.rank() - 1]}, gen);
    layer.bias().assign(fx::random::normal<T>(layer.bias().shape(), gen));
    fused_inference::check_matches_taped(layer, fx::random::normal<T>(in, gen));
  };
  check(nn::dense<1100, T>{}, {1, 1200});
  check(nn::dense<10, T>{}, {3, 700});
  check(nn::dense<10, T>{}, {64, 30});
  check(nn::dense<70, T>{}, {40, 90});
  check(nn::dense<5, T>{}, {2, 3, 8});
}
