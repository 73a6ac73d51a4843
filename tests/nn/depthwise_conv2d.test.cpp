// fx::nn::depthwise_conv2d and fx::nn::separable_conv2d: PyTorch's conv2d with groups = channels
// (float: output and the gradients of input, kernels and bias), gradients against finite
// differences (double), Keras's shapes, parameter counts, variable names and initializers in a
// sequential model, a small MobileNet-style model that learns, and errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/fluxion.hpp>
#include <fluxion/testing/check_gradients.hpp>

#include <cmath>
#include <vector>

#include "kernel_layer_check.hpp"
#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE_TEMPLATE("depthwise_conv2d: forward and backward equal PyTorch's grouped conv2d", L,
                   nn::depthwise_conv2d<3, nn::valid, 2, 1, 2>, nn::depthwise_conv2d<3, nn::same, 1, 2>) {
  constexpr bool strided = std::is_same_v<L, nn::depthwise_conv2d<3, nn::valid, 2, 1, 2>>;
  const std::string prefix = strided ? "depthwise_strided" : "depthwise_dilated_same";
  const fx::tensor<float> x = peer::load(prefix + "_x");
  L layer;
  layer.build(fx::shape(x.shape().begin() + 1, x.shape().end()));
  layer.depthwise_kernel().assign(peer::load(prefix + "_kernel"));
  layer.bias().assign(peer::load(prefix + "_bias"));
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  const fx::tensor<float> y = layer(x);
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load(prefix + "_w"));
  peer::check_close(y, peer::load(prefix + "_y"), "y");
  peer::check_close(tape.gradient(s, x), peer::load(prefix + "_dx"), "d x");
  const auto g = tape.gradient(s, layer.trainable_variables());
  peer::check_close(g[0], peer::load(prefix + "_dkernel"), "d kernel");
  peer::check_close(g[1], peer::load(prefix + "_dbias"), "d bias");
}

TEST_CASE("separable_conv2d: forward and backward equal PyTorch's grouped conv2d and 1x1 conv2d") {
  const fx::tensor<float> x = peer::load("separable_x");
  nn::separable_conv2d<4, 3, nn::valid, 1, 1, 2> layer;
  layer.build(fx::shape{6, 6, 3});
  layer.depthwise_kernel().assign(peer::load("separable_depthwise_kernel"));
  layer.pointwise_kernel().assign(peer::load("separable_pointwise_kernel"));
  layer.bias().assign(peer::load("separable_bias"));
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  const fx::tensor<float> y = layer(x);
  const fx::tensor<float> s = fx::reduce_sum(y * peer::load("separable_w"));
  peer::check_close(y, peer::load("separable_y"), "y");
  peer::check_close(tape.gradient(s, x), peer::load("separable_dx"), "d x");
  const auto g = tape.gradient(s, layer.trainable_variables());  // Keras's order
  peer::check_close(g[0], peer::load("separable_ddepthwise_kernel"), "d depthwise kernel");
  peer::check_close(g[1], peer::load("separable_dpointwise_kernel"), "d pointwise kernel");
  peer::check_close(g[2], peer::load("separable_dbias"), "d bias");
}

TEST_CASE("depthwise_conv2d and separable_conv2d: gradients against finite differences") {
  nn::depthwise_conv2d<3, nn::same, 2, 1, 2, double> strided;
  kernel_layer_check::check_layer_gradients(strided, {2, 5, 6, 3}, 1);
  nn::depthwise_conv2d<2, nn::valid, 1, 2, 1, double> dilated;
  kernel_layer_check::check_layer_gradients(dilated, {1, 6, 5, 2}, 2);

  nn::separable_conv2d<3, 3, nn::same, 2, 1, 2, double> sep;
  fx::random::generator gen{3};
  sep.build(fx::shape{5, 5, 2}, gen);
  const fx::tensor<double> x = fx::random::normal<double>({2, 5, 5, 2}, gen);
  const fx::tensor<double> d = sep.depthwise_kernel().peek(), p = sep.pointwise_kernel().peek();
  const fx::tensor<double> b = fx::random::normal<double>({3}, gen);
  auto r = fx::testing::check_gradients(
      [&](const auto& xi, const auto& di, const auto& pi, const auto& bi) {
        sep.depthwise_kernel().assign(di);
        sep.pointwise_kernel().assign(pi);
        sep.bias().assign(bi);
        return sep(xi);
      },
      fx::testing::check_options{.reverse = true, .forward = false}, x, d, p, b);
  CHECK_MESSAGE(r.ok, r.report);
}

TEST_CASE("depthwise_conv2d and separable_conv2d: Keras's shapes, parameters, names and initializers") {
  fx::random::generator gen{66};
  // A MobileNet block: depthwise 3x3 at stride 2, then 1x1 to 16 channels; then a separable one.
  auto net = nn::sequential(gen, nn::input<12, 12, 8>{}, nn::depthwise_conv2d<3, nn::same, 2>{}, nn::relu{},
                            nn::conv2d<16, 1>{}, nn::separable_conv2d<4, 3, nn::valid, 1, 1, 2>{});
  static_assert(std::is_same_v<decltype(net)::output_shape_t, nn::static_shape<4, 4, 4>>);
  static_assert(std::is_same_v<decltype(nn::depthwise_conv2d<3, nn::valid, 1, 1, 3>::output_shape(
                                   nn::static_shape<5, 7, 2>{})),
                               nn::static_shape<3, 5, 6>>);
  CHECK(net.summary() ==
        "layer                      output shape          params\n"
        "depthwise_conv2d           (batch, 6, 6, 8)      80\n"
        "relu                       (batch, 6, 6, 8)      0\n"
        "conv2d                     (batch, 6, 6, 16)     144\n"
        "separable_conv2d           (batch, 4, 4, 4)      420\n"
        "total trainable parameters: 644\n");
  auto& dw = net.layer<0>();
  CHECK(dw.depthwise_kernel().shape() == fx::shape{3, 3, 8, 1});
  CHECK(dw.depthwise_kernel().name() == "depthwise_conv2d/depthwise_kernel");
  const float limit = std::sqrt(6.f / (3 * 3 * 8 + 3 * 3 * 1));
  for (float v : dw.depthwise_kernel().peek().to_vector()) CHECK(std::abs(v) <= limit);
  CHECK(dw.bias().peek().to_vector() == std::vector<float>(8, 0.f));
  auto& sep = net.layer<3>();
  CHECK(sep.depthwise_kernel().shape() == fx::shape{3, 3, 16, 2});
  CHECK(sep.pointwise_kernel().shape() == fx::shape{1, 1, 32, 4});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"depthwise_conv2d/depthwise_kernel", "depthwise_conv2d/bias",
                                          "conv2d/kernel", "conv2d/bias", "separable_conv2d/depthwise_kernel",
                                          "separable_conv2d/pointwise_kernel", "separable_conv2d/bias"});
  const float plimit = std::sqrt(6.f / (32 + 4));
  for (float v : sep.pointwise_kernel().peek().to_vector()) CHECK(std::abs(v) <= plimit);
  const fx::tensor<float> x = fx::random::normal<float>({2, 12, 12, 8}, gen);
  CHECK(net(x).shape() == fx::shape{2, 4, 4, 4});

  CHECK_THROWS_WITH_AS(dw(fx::zeros<float>({2, 12, 12, 3})),
                       "depthwise_conv2d 'depthwise_conv2d': the input has 3 channels, the layer was built for 8 "
                       "(input shape (2, 12, 12, 3))",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(sep(fx::zeros<float>({2, 12, 12})),
                       "separable_conv2d 'separable_conv2d': expects input of shape (batch, height, width, channels), "
                       "got (2, 12, 12)",
                       fx::shape_error);
  nn::separable_conv2d<4, 3> unbuilt;
  CHECK_THROWS_WITH_AS(unbuilt.pointwise_kernel(),
                       "separable_conv2d 'separable_conv2d': pointwise_kernel does not exist before the layer is "
                       "built (call it once)",
                       fx::error);
  nn::depthwise_conv2d<3> unbuilt_dw;
  CHECK_THROWS_WITH_AS(unbuilt_dw.depthwise_kernel(),
                       "depthwise_conv2d 'depthwise_conv2d': depthwise_kernel does not exist before the layer is "
                       "built (call it once)",
                       fx::error);
}

TEST_CASE("depthwise_conv2d and separable_conv2d take Keras's depthwise_* and pointwise_* options") {
  namespace init = nn::initializers;
  namespace reg = nn::regularizers;
  namespace con = nn::constraints;
  // A double input: sequential makes each layer again for double from its options, which must keep
  // every one of them, the pointwise ones too.
  auto net = nn::sequential(
      nn::typed_input<double, 6, 6, 4>{},
      nn::depthwise_conv2d<3, nn::same>{{.depthwise_initializer = init::constant(0.25),
                                          .bias_initializer = init::constant(-1),
                                          .depthwise_regularizer = reg::l1(0.1),
                                          .bias_regularizer = reg::l2(0.2),
                                          .depthwise_constraint = con::max_norm(3),
                                          .name = "dw"}},
      nn::separable_conv2d<5, 3, nn::same>{{.use_bias = false,
                                            .depthwise_initializer = init::constant(0.5),
                                            .pointwise_initializer = init::constant(2),
                                            .depthwise_regularizer = reg::l2(0.3),
                                            .pointwise_regularizer = reg::l1_l2(0.4, 0.5),
                                            .depthwise_constraint = con::unit_norm(),
                                            .pointwise_constraint = con::non_neg(),
                                            .name = "sep"}});
  auto& dw = net.layer<0>();
  auto& sep = net.layer<1>();
  CHECK(dw.depthwise_kernel().peek().to_vector() == std::vector<double>(36, 0.25));
  CHECK(dw.bias().peek().to_vector() == std::vector<double>(4, -1.0));
  CHECK(sep.depthwise_kernel().peek().to_vector() == std::vector<double>(36, 0.5));
  CHECK(sep.pointwise_kernel().peek().to_vector() == std::vector<double>(20, 2.0));
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"dw/depthwise_kernel", "dw/bias", "sep/depthwise_kernel",
                                          "sep/pointwise_kernel"});
  CHECK(dw.depthwise_kernel().regularizer() == fx::regularizer{0.1, 0});
  CHECK(dw.bias().regularizer() == fx::regularizer{0, 0.2});
  CHECK(sep.depthwise_kernel().regularizer() == fx::regularizer{0, 0.3});
  CHECK(sep.pointwise_kernel().regularizer() == fx::regularizer{0.4, 0.5});
  CHECK(dw.depthwise_kernel().constraint() == con::max_norm(3));
  CHECK(!dw.bias().constraint());
  CHECK(sep.depthwise_kernel().constraint() == con::unit_norm());
  CHECK(sep.pointwise_kernel().constraint() == con::non_neg());
  // The penalty: each variable's l1 sum|w| + l2 sum w^2, added up by a loop.
  double want = 0;
  for (auto* v : net.trainable_variables())
    for (double w : v->peek().to_vector()) want += v->regularizer().l1 * std::abs(w) + v->regularizer().l2 * w * w;
  CHECK(net.regularization_loss().item() == doctest::Approx(want).epsilon(1e-12));
  // The options come back as they went in, under the layer's name.
  const nn::separable_conv2d_options o = sep.options();
  CHECK(!o.use_bias);
  CHECK(o.pointwise_regularizer == fx::regularizer{0.4, 0.5});
  CHECK(o.pointwise_constraint == con::non_neg());
  CHECK(o.depthwise_constraint == con::unit_norm());
  CHECK(o.name == "sep");
  CHECK(dw.options().depthwise_regularizer == fx::regularizer{0.1, 0});
  // The optimizer applies the pointwise constraint after its update: a step that pushes every
  // pointwise weight below zero leaves them at zero (non_neg), not negative.
  fx::optim::sgd opt{10.0};
  const fx::tensor<double> x = fx::ones<double>({1, 6, 6, 4});
  {
    fx::gradient_tape tape;
    const fx::tensor<double> loss = fx::reduce_sum(net(x, true));
    opt.apply_gradients(tape.gradient(loss, net.trainable_variables()), net.trainable_variables());
  }
  CHECK(sep.pointwise_kernel().peek().to_vector() == std::vector<double>(20, 0.0));
  // Bad options name the option by Keras's name.
  using depthwise = nn::depthwise_conv2d<3>;
  using separable = nn::separable_conv2d<4, 3>;
  CHECK_THROWS_WITH_AS(depthwise({.depthwise_regularizer = {0, -2}}),
                       "depthwise_conv2d 'depthwise_conv2d': depthwise_regularizer.l2 = -2.000000 must be finite and "
                       "not negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(separable({.pointwise_regularizer = {-1, 0}, .name = "block"}),
                       "separable_conv2d 'block': pointwise_regularizer.l1 = -1.000000 must be finite and not negative",
                       fx::invalid_argument);
  CHECK_THROWS_WITH_AS(separable({.use_bias = false, .bias_constraint = con::non_neg()}),
                       "separable_conv2d 'separable_conv2d': a bias_constraint with use_bias = false has no bias to "
                       "act on",
                       fx::invalid_argument);
}

TEST_CASE("depthwise_conv2d: a small MobileNet-style model learns, and initialize redraws every kernel") {
  fx::random::generator gen{7};
  auto net = nn::sequential(gen, nn::input<8, 8, 3>{}, nn::conv2d<8, 3, nn::same>{}, nn::relu{},
                            nn::depthwise_conv2d<3, nn::same, 2>{}, nn::relu{},
                            nn::separable_conv2d<8, 3, nn::same>{}, nn::relu{}, nn::global_avg_pool2d{},
                            nn::dense<2>{});
  // Two classes: is the image's mean brightness positive?
  const fx::tensor<float> x = fx::random::normal<float>({64, 8, 8, 3}, gen);
  std::vector<std::int32_t> labels;
  const auto xv = x.to_vector();
  for (int n = 0; n < 64; ++n) {
    double sum = 0;
    for (int i = 0; i < 8 * 8 * 3; ++i) sum += xv[static_cast<std::size_t>(n * 192 + i)];
    labels.push_back(sum > 0 ? 1 : 0);
  }
  const auto y = fx::from_vector(labels, {64});
  fx::optim::adam opt({.learning_rate = 0.01});
  auto loss_of = [&] {
    return fx::tensor<float>(fx::losses::sparse_softmax_cross_entropy(net(x, true), y)).item();
  };
  const float before = loss_of();
  for (int step = 0; step < 60; ++step) {
    fx::gradient_tape tape;
    const fx::tensor<float> loss = fx::losses::sparse_softmax_cross_entropy(net(x, true), y);
    opt.apply_gradients(tape.gradient(loss, net.trainable_variables()), net.trainable_variables());
  }
  const float after = loss_of();
  CHECK(after < 0.5f * before);
  const auto old = net.layer<4>().pointwise_kernel().peek().to_vector();
  net.initialize(gen);
  CHECK(net.layer<4>().pointwise_kernel().peek().to_vector() != old);
  CHECK(net.layer<4>().bias().peek().to_vector() == std::vector<float>(8, 0.f));
}
