// fx::softmax, fx::log_softmax, fx::gelu, Keras's other activations and the activation layers:
// gradients against finite differences (double), values and gradients against PyTorch (float),
// TensorFlow's gradients at the kinks, NaN, stability at large inputs.
#define FLUXION_FORWARD_MODE 0
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <cmath>
#include <limits>
#include <utility>

#include "peer.hpp"
#include "reverse_only.hpp"
#include "../test_util.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
using test::reverse_only;

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
  check_activation(nn::elu{}, "elu");
  check_activation(nn::elu{0.5}, "elu_half");
  check_activation(nn::selu{}, "selu");
  check_activation(nn::leaky_relu{}, "leaky_relu");  // Keras's layer default, 0.3
  check_activation(nn::relu6{}, "relu6");
  check_activation(nn::silu{}, "silu");
  check_activation(nn::swish{}, "silu");
  check_activation(nn::softplus{}, "softplus");
  check_activation(nn::softsign{}, "softsign");
  check_activation(nn::mish{}, "mish");
}

TEST_CASE("activations: TensorFlow's gradients at the kinks, NaN, and finite values and gradients at +-100") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const fx::tensor<double> x = fx::from_vector(std::vector<double>{0, 6, -100, 100, nan}, {5});
  auto value_and_gradient = [&](auto f) {
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<double> y = f(x);
    return std::pair{y.to_vector(), tape.gradient(fx::reduce_sum(y), x).to_vector()};
  };
  {
    auto [y, g] = value_and_gradient([](const auto& a) { return fx::leaky_relu(a); });  // alpha 0.2
    CHECK(y[0] == 0);
    CHECK(g[0] == doctest::Approx(0.2));
    CHECK(y[2] == doctest::Approx(-20));
    CHECK(std::isnan(y[4]));
  }
  {
    auto [y, g] = value_and_gradient([](const auto& a) { return fx::elu(a, 0.5); });
    CHECK(g[0] == doctest::Approx(0.5));
    CHECK(y[2] == doctest::Approx(-0.5));
    CHECK(g[2] == doctest::Approx(0.5 * std::exp(-100.0)));
    CHECK(y[3] == 100);
    CHECK(g[3] == 1);  // the unused branch reads min(x, 0): no 0 * inf
    CHECK(std::isnan(y[4]));
  }
  {
    auto [y, g] = value_and_gradient([](const auto& a) { return fx::relu6(a); });
    CHECK(y[1] == 6);
    CHECK(g[0] == 0);
    CHECK(g[1] == 0);
    CHECK(y[3] == 6);
    CHECK(std::isnan(y[4]));
  }
  {
    auto [y, g] = value_and_gradient([](const auto& a) { return fx::selu(a); });
    CHECK(y[3] == doctest::Approx(105.07009873554805));
    CHECK(y[2] == doctest::Approx(-1.7580993408473766));
    CHECK(g[3] == doctest::Approx(1.0507009873554805));
    CHECK(std::isnan(y[4]));
  }
  for (auto [name_, f] : {std::pair<const char*, fx::tensor<double> (*)(const fx::tensor<double>&)>{
                             "silu", [](const fx::tensor<double>& a) { return fx::tensor<double>(fx::silu(a)); }},
                         {"softsign", [](const fx::tensor<double>& a) { return fx::tensor<double>(fx::softsign(a)); }},
                         {"mish", [](const fx::tensor<double>& a) { return fx::tensor<double>(fx::mish(a)); }},
                         {"softplus", [](const fx::tensor<double>& a) { return fx::tensor<double>(fx::softplus(a)); }}}) {
    const char* name = name_;  // clang 14 cannot capture a structured binding (CAPTURE)
    CAPTURE(name);
    auto [y, g] = value_and_gradient(f);
    for (int i = 0; i < 4; ++i) {
      CHECK(std::isfinite(y[static_cast<std::size_t>(i)]));
      CHECK(std::isfinite(g[static_cast<std::size_t>(i)]));
    }
    CHECK(std::isnan(y[4]));
  }
  CHECK_THROWS_WITH_AS(nn::leaky_relu{std::numeric_limits<double>::infinity()},
                       "leaky_relu: alpha must be finite, got inf", fx::invalid_argument);
}

TEST_CASE("activations: layers in a sequential model take Keras's names and fuse into the dense statement") {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<6>{}, nn::dense<8>{}, nn::leaky_relu{0.1}, nn::dense<8>{}, nn::elu{},
                            nn::dense<8>{}, nn::swish{}, nn::dense<4>{}, nn::mish{});
  const std::string summary = net.summary();
  for (const char* name : {"leaky_relu ", "elu ", "silu ", "mish "}) CHECK_MESSAGE(summary.find(name) != std::string::npos, summary);
  const fx::tensor<double> x = fx::random::normal<double>({5, 6}, gen);
  const fx::tensor<float> xf = fx::cast<float>(x);
  // The model equals the functions applied by hand.
  auto& d0 = net.layer<0>();
  auto& d2 = net.layer<2>();
  auto& d4 = net.layer<4>();
  auto& d6 = net.layer<6>();
  fx::tensor<float> h = fx::leaky_relu(fx::matmul(xf, d0.kernel()) + d0.bias(), 0.1);
  h = fx::elu(fx::matmul(h, d2.kernel()) + d2.bias());
  h = fx::silu(fx::matmul(h, d4.kernel()) + d4.bias());
  h = fx::mish(fx::matmul(h, d6.kernel()) + d6.bias());
  const auto want = h.to_vector();
  const auto got = fx::tensor<float>(net(xf)).to_vector();
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-5));
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

TEST_CASE("softmax: its hand-written gradient against finite differences along any axis, of an expression and a "
          "variable; rows of one class, all -inf, +inf; errors") {
  // Stop 89: softmax_of's passes and its custom gradient dx = y (dy - sum(dy y)) (the default
  // settings; activations_second_order.test.cpp checks the other path).
  // Rows shorter than four vectors and longer (on the cpu: two ways of computing the value), and
  // every axis of a rank-3 tensor.
  const fx::tensor<double> x = test::random_tensor<double>({3, 4, 5}, 41, -3.0, 3.0);
  for (fx::index_t cols : {1, 7, 16, 40}) {
    CAPTURE(cols);
    const fx::tensor<double> rows = test::random_tensor<double>({3, cols}, 40, -3.0, 3.0);
    auto r = fx::testing::check_gradients([&](const auto& a) { return fx::softmax(a); }, reverse_only, rows);
    CHECK_MESSAGE(r.ok, r.report);
    const auto got = fx::softmax(rows).to_vector();
    const auto want = fx::tensor<double>(fx::exp(rows - fx::reduce_logsumexp(rows, -1, fx::keepdims))).to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-14));
  }
  for (int axis : {0, 1, 2, -1, -3}) {
    CAPTURE(axis);
    auto r = fx::testing::check_gradients([&](const auto& a) { return fx::softmax(a, axis); }, reverse_only, x);
    CHECK_MESSAGE(r.ok, r.report);
    // Against the composition it replaces, and each row summing to one.
    const fx::tensor<double> y = fx::softmax(x, axis);
    const fx::tensor<double> want = fx::exp(x - fx::reduce_logsumexp(x, axis, fx::keepdims));
    const auto got = y.to_vector(), w = want.to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(w[i]).epsilon(1e-14));
    const fx::tensor<double> ones = fx::reduce_sum(y, axis);
    for (double v : ones.to_vector()) CHECK(v == doctest::Approx(1.0).epsilon(1e-15));
  }
  // An expression operand, and a second use of the result in the same loss.
  auto r = fx::testing::check_gradients(
      [](const auto& a, const auto& b) {
        const auto p = fx::softmax(a * b + b);
        return p * p + fx::log(p);
      },
      reverse_only, test::random_tensor<double>({4, 6}, 42), test::random_tensor<double>({6}, 43));
  CHECK_MESSAGE(r.ok, r.report);
  // A variable, through a tape.
  fx::variable<double> v(test::random_tensor<double>({2, 3}, 44));
  fx::gradient_tape tape;
  const fx::tensor<double> w = test::random_tensor<double>({2, 3}, 45);
  const fx::tensor<double> loss = fx::reduce_sum(fx::softmax(v) * w);
  const fx::tensor<double> g = tape.gradient(loss, v);
  const fx::tensor<double> p = fx::softmax(v.read_value());
  const fx::tensor<double> want = p * (w - fx::reduce_sum(p * w, -1, fx::keepdims));
  const auto gv = g.to_vector(), wv = want.to_vector();
  REQUIRE(gv.size() == wv.size());
  for (std::size_t i = 0; i < gv.size(); ++i) CHECK(gv[i] == doctest::Approx(wv[i]).epsilon(1e-14));

  // One class: 1. All -inf: NaN, as PyTorch (0 / 0). +inf: NaN (inf / inf). NaN spreads
  // along its row only. No rows: an empty result.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const fx::tensor<double> one = fx::softmax(test::random_tensor<double>({3, 1}, 46));
  for (double e : one.to_vector()) CHECK(e == 1.0);
  const fx::tensor<double> odd = fx::from_vector(std::vector<double>{-inf, -inf, 0, inf, 1, nan, 2, 3, 1, -inf}, {5, 2});
  const auto o = fx::softmax(odd).to_vector();
  CHECK(std::isnan(o[0]));
  CHECK(std::isnan(o[1]));
  CHECK(o[2] == 0.0);  // the finite class beside +inf: its limit
  CHECK(std::isnan(o[3]));
  CHECK(std::isnan(o[4]));
  CHECK(std::isnan(o[5]));
  CHECK(o[6] == doctest::Approx(1 / (1 + std::exp(1.0))));
  CHECK(o[8] == 1.0);
  CHECK(o[9] == 0.0);
  CHECK(fx::softmax(fx::tensor<double>(fx::shape{0, 4})).shape() == fx::shape{0, 4});
  CHECK_THROWS_WITH_AS((void)fx::softmax(x, 3), doctest::Contains("softmax"), std::exception);
  CHECK_THROWS_WITH_AS((void)fx::softmax(x, -4), doctest::Contains("softmax"), std::exception);
}

TEST_CASE("rescaling: Keras's x * scale + offset, first or fused after a layer, gradients, errors") {
  fx::random::generator gen{21};
  const fx::tensor<double> x = fx::random::uniform<double>({2, 3, 4}, gen, 0.0, 255.0);
  const nn::rescaling unit{1.0 / 127.5, -1.0};
  const auto y = fx::tensor<double>(unit(x)).to_vector(), xs = x.to_vector();
  for (std::size_t i = 0; i < y.size(); ++i) CHECK(y[i] == doctest::Approx(xs[i] * (1.0 / 127.5) - 1.0).epsilon(1e-15));
  CHECK(unit.scale() == 1.0 / 127.5);
  CHECK(unit.offset() == -1.0);
  auto r = fx::testing::check_gradients([&](const auto& a) { return unit(a); }, reverse_only, x);
  CHECK_MESSAGE(r.ok, r.report);

  // First in a model (pixels 0-255), and fused into a dense statement after it.
  auto net = nn::sequential(gen, nn::typed_input<double, 3, 4>{}, nn::rescaling{1.0 / 255}, nn::flatten{},
                            nn::dense<5, double>{}, nn::rescaling{2.0, 0.5, "scores"});
  CHECK(net.summary().find("rescaling ") != std::string::npos);
  CHECK(net.summary().find("scores ") != std::string::npos);
  auto& d = net.layer<2>();
  const fx::tensor<double> flat = fx::reshape(x, {2, 12});
  const fx::tensor<double> want = (fx::matmul(flat / 255.0, d.kernel()) + d.bias()) * 2.0 + 0.5;
  const auto got = net(x).to_vector(), w = want.to_vector();
  REQUIRE(got.size() == w.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(w[i]).epsilon(1e-13));
  // The gradients reach the dense layer through both rescalings.
  fx::gradient_tape tape;
  fx::tensor<double> loss = fx::reduce_sum(fx::square(net(x, true)));
  auto vars = net.trainable_variables();
  auto g = tape.gradient(loss, vars);
  const fx::tensor<double> want_db = fx::reduce_sum(2.0 * 2.0 * want, {0});
  const auto gb = g[1].to_vector(), wb = want_db.to_vector();
  for (std::size_t i = 0; i < gb.size(); ++i) CHECK(gb[i] == doctest::Approx(wb[i]).epsilon(1e-12));

  CHECK_THROWS_WITH_AS(nn::rescaling(std::nan("")), doctest::Contains("rescaling 'rescaling': scale = nan"),
                       fx::invalid_argument);
  CHECK_THROWS_AS(nn::rescaling(1.0, INFINITY), fx::invalid_argument);
}
