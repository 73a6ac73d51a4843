// fx::nn::initializer and the layers' options (Keras's kernel_initializer, bias_initializer,
// use_bias): each initializer's draw against its formula (the limits exactly, the moments within a
// few standard errors of 200 000 draws), Keras's fans, the default kernel bitwise the old
// glorot-uniform draw, use_bias = false (no variable, the output x W exactly), the options kept
// when a sequential model rebuilds its layers for double, and the errors.
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace initializers_test {

namespace fx = fluxion;
namespace nn = fluxion::nn;
namespace init = fluxion::nn::initializers;

namespace {

/// The draw every layer made before stop 74: U(-l, l), l = sqrt(6 / (fan_in + fan_out)) in double,
/// rounded to float.
fx::tensor<float> old_glorot(const fx::shape& s, double fan_in, double fan_out, fx::random::generator& gen) {
  const float limit = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
  return fx::random::uniform<float>(s, gen, -limit, limit);
}

struct moments {
  double mean = 0, stddev = 0, lo = 0, hi = 0;
};
moments of(const std::vector<double>& v) {
  moments m{0, 0, v[0], v[0]};
  for (double x : v) m.mean += x, m.lo = std::min(m.lo, x), m.hi = std::max(m.hi, x);
  m.mean /= static_cast<double>(v.size());
  for (double x : v) m.stddev += (x - m.mean) * (x - m.mean);
  m.stddev = std::sqrt(m.stddev / static_cast<double>(v.size() - 1));
  return m;
}

// A (fan_in = 3 * 3 * 40 = 360, fan_out = 3 * 3 * 60 = 540) kernel of 3 * 3 * 40 * 60 values.
const fx::shape conv_kernel{3, 3, 40, 60};
constexpr double fan_in = 360, fan_out = 540;

}  // namespace

TEST_CASE("initializers: Keras's fans of a shape") {
  CHECK(nn::initializer::fans(fx::shape{784, 10}) == std::pair{784.0, 10.0});
  CHECK(nn::initializer::fans(conv_kernel) == std::pair{fan_in, fan_out});
  CHECK(nn::initializer::fans(fx::shape{7}) == std::pair{7.0, 7.0});
  CHECK(nn::initializer::fans(fx::shape{}) == std::pair{1.0, 1.0});
}

TEST_CASE("initializers: the variance-scaling family draws with Keras's limits and standard deviations") {
  struct expected {
    nn::initializer init;
    double variance;  // of the draw
    double bound;     // every |value| below it
  };
  const double avg = (fan_in + fan_out) / 2;
  const std::vector<expected> cases = {
      {init::glorot_uniform(), 1 / avg, std::sqrt(3 / avg)},
      {init::glorot_normal(), 1 / avg, 2 * std::sqrt(1 / avg) / 0.87962566103423978},
      {init::he_uniform(), 2 / fan_in, std::sqrt(6 / fan_in)},
      {init::he_normal(), 2 / fan_in, 2 * std::sqrt(2 / fan_in) / 0.87962566103423978},
      {init::lecun_uniform(), 1 / fan_in, std::sqrt(3 / fan_in)},
      {init::lecun_normal(), 1 / fan_in, 2 * std::sqrt(1 / fan_in) / 0.87962566103423978},
      {init::variance_scaling(3.0, init::fan_mode::fan_out, init::distribution::untruncated_normal), 3 / fan_out, 1e9},
      {init::variance_scaling(0.5, init::fan_mode::fan_avg, init::distribution::uniform), 0.5 / avg, std::sqrt(1.5 / avg)},
  };
  for (const auto& c : cases) {
    CAPTURE(c.init.name());
    fx::random::generator gen{11};
    // 216 000 draws: ten kernels of the shape whose fans are tested.
    std::vector<double> all;
    for (int i = 0; i < 10; ++i) {
      const auto v = c.init.operator()<double>(conv_kernel, gen).to_vector();
      all.insert(all.end(), v.begin(), v.end());
    }
    const moments m = of(all);
    const double sd = std::sqrt(c.variance), n = static_cast<double>(all.size());
    CHECK(std::abs(m.mean) < 5 * sd / std::sqrt(n));
    CHECK(m.stddev == doctest::Approx(sd).epsilon(0.01));  // the sample's relative error ~ 1/sqrt(2n) = 0.0015
    CHECK(std::max(-m.lo, m.hi) <= c.bound);
    if (c.bound < 1e9) CHECK(std::max(-m.lo, m.hi) > 0.97 * c.bound);  // the limits are reached
  }
}

TEST_CASE("initializers: constant, random and identity draws") {
  fx::random::generator gen{3};
  CHECK(init::zeros().operator()<float>(fx::shape{2, 3}, gen).to_vector() == std::vector<float>(6, 0.f));
  CHECK(init::ones().operator()<float>(fx::shape{4}, gen).to_vector() == std::vector<float>(4, 1.f));
  CHECK(init::constant(0.25).operator()<double>(fx::shape{3}, gen).to_vector() == std::vector<double>(3, 0.25));
  CHECK(init::identity(2).operator()<float>(fx::shape{2, 3}, gen).to_vector() == std::vector<float>{2, 0, 0, 0, 2, 0});
  const moments u = of(init::random_uniform(-1, 3).operator()<double>(fx::shape{100000}, gen).to_vector());
  CHECK(u.lo >= -1);
  CHECK(u.hi < 3);
  CHECK(u.mean == doctest::Approx(1).epsilon(0.01));
  const moments g = of(init::random_normal(0.5, 0.1).operator()<double>(fx::shape{100000}, gen).to_vector());
  CHECK(g.mean == doctest::Approx(0.5).epsilon(0.002));
  CHECK(g.stddev == doctest::Approx(0.1).epsilon(0.01));
  const moments t = of(init::truncated_normal(0, 0.05).operator()<double>(fx::shape{100000}, gen).to_vector());
  CHECK(t.lo >= -0.1);
  CHECK(t.hi <= 0.1);
  CHECK(t.stddev == doctest::Approx(0.05 * 0.87962566103423978).epsilon(0.01));
  // orthogonal as a value: the function template's draw.
  fx::random::generator g1{8}, g2{8};
  CHECK(init::orthogonal(1.5).operator()<double>(fx::shape{4, 6}, g1).to_vector() ==
        init::orthogonal<double>(fx::shape{4, 6}, g2, 1.5).to_vector());
  // Drawing nothing: zeros, ones, constant and identity leave the generator where it was.
  fx::random::generator a{9}, b{9};
  (void)init::constant(1).operator()<float>(fx::shape{5}, a);
  CHECK(fx::random::uniform<float>({4}, a).to_vector() == fx::random::uniform<float>({4}, b).to_vector());
}

TEST_CASE("initializers: the layers' default kernel is the glorot-uniform draw of before, bitwise") {
  fx::random::generator g1{21}, g2{21};
  nn::dense<7> fc;
  fc.build(fx::shape{5}, g1);
  CHECK(fc.kernel().peek().to_vector() == old_glorot({5, 7}, 5, 7, g2).to_vector());
  CHECK(fc.bias().peek().to_vector() == std::vector<float>(7, 0.f));
  nn::conv2d<6, 3> conv;
  conv.build(fx::shape{8, 8, 4}, g1);
  CHECK(conv.kernel().peek().to_vector() ==
        old_glorot({3, 3, 4, 6}, 36, 54, g2).to_vector());
}

TEST_CASE("initializers: each layer draws its kernel and bias from its options") {
  const nn::layer_options options{.kernel_initializer = init::constant(0.5), .bias_initializer = init::constant(-1)};
  auto check = [](auto& layer, fx::index_t kernel_size, fx::index_t bias_size) {
    CAPTURE(layer.name());
    CHECK(layer.kernel().peek().to_vector() == std::vector<float>(static_cast<std::size_t>(kernel_size), 0.5f));
    CHECK(layer.bias().peek().to_vector() == std::vector<float>(static_cast<std::size_t>(bias_size), -1.f));
  };
  nn::dense<3> fc{options};
  fc.build(fx::shape{4});
  check(fc, 12, 3);
  nn::conv1d<3, 2> c1{options};
  c1.build(fx::shape{10, 4});
  check(c1, 24, 3);
  nn::conv2d<3, 2> c2{options};
  c2.build(fx::shape{6, 6, 4});
  check(c2, 48, 3);
  nn::conv2d_transpose<3, 2> ct{options};
  ct.build(fx::shape{6, 6, 4});
  check(ct, 48, 3);
  // Keras's names for the depthwise layers' kernels (depthwise_conv2d_options, separable_conv2d_options).
  nn::depthwise_conv2d<3> dw{{.depthwise_initializer = init::constant(0.5), .bias_initializer = init::constant(-1)}};
  dw.build(fx::shape{6, 6, 4});
  check(dw, 36, 4);
  nn::separable_conv2d<5, 3> sep{{.depthwise_initializer = init::constant(0.5),
                                  .pointwise_initializer = init::constant(2),
                                  .bias_initializer = init::constant(-1)}};
  sep.build(fx::shape{6, 6, 4});
  check(sep, 36, 5);
  CHECK(sep.pointwise_kernel().peek().to_vector() == std::vector<float>(20, 2.f));
  // initialize() draws them again from the same options.
  fc.kernel().assign(fx::zeros<float>({4, 3}));
  fx::random::generator gen{1};
  fc.initialize(gen);
  check(fc, 12, 3);
}

TEST_CASE("initializers: embedding, LSTM, GRU and attention take Keras's initializers; their defaults are unchanged") {
  fx::random::generator g1{6}, g2{6};
  nn::embedding<10, 4> table;
  table.build({}, g1);
  CHECK(table.embeddings().peek().to_vector() == fx::random::uniform<float>({10, 4}, g2, -0.05f, 0.05f).to_vector());
  nn::embedding<10, 4> custom{{.embeddings_initializer = init::constant(0.5), .name = "words"}};
  custom.build();
  CHECK(custom.name() == "words");
  CHECK(custom.embeddings().peek().to_vector() == std::vector<float>(40, 0.5f));

  nn::lstm<3> plain;
  plain.build(fx::shape{5, 2}, g1);
  CHECK(plain.bias().peek().to_vector() == std::vector<float>{0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0});
  CHECK(plain.kernel().peek().to_vector() == old_glorot({2, 12}, 2, 12, g2).to_vector());
  CHECK(plain.recurrent_kernel().peek().to_vector() == init::orthogonal<float>({3, 12}, g2).to_vector());
  nn::lstm<3> lstm{{.kernel_initializer = init::ones(), .recurrent_initializer = init::zeros(),
                    .bias_initializer = init::constant(0.25)}};
  lstm.build(fx::shape{5, 2});
  CHECK(lstm.kernel().peek().to_vector() == std::vector<float>(24, 1.f));
  CHECK(lstm.recurrent_kernel().peek().to_vector() == std::vector<float>(36, 0.f));
  CHECK(lstm.bias().peek().to_vector() ==
        std::vector<float>{0.25, 0.25, 0.25, 1, 1, 1, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
  nn::lstm<3> no_forget{{.bias_initializer = init::constant(0.25), .unit_forget_bias = false}};
  no_forget.build(fx::shape{5, 2});
  CHECK(no_forget.bias().peek().to_vector() == std::vector<float>(12, 0.25f));
  nn::gru<3> gru{{.bias_initializer = init::constant(2)}};
  gru.build(fx::shape{5, 2});
  CHECK(gru.bias().peek().shape() == fx::shape{2, 9});
  CHECK(gru.bias().peek().to_vector() == std::vector<float>(18, 2.f));

  nn::multi_head_attention<2, 4> mha{{.kernel_initializer = init::constant(0.1), .bias_initializer = init::ones()}};
  mha.build(6, 6, 6);
  for (auto* v : mha.variables()) {
    CAPTURE(v->name());
    const bool bias = v->name().ends_with("bias");
    CHECK(v->peek().to_vector() == std::vector<float>(static_cast<std::size_t>(v->size()), bias ? 1.f : 0.1f));
  }
}

TEST_CASE("initializers: initialize() draws again into the same variables, the values a fresh build draws") {
  auto check = [](auto& layer, auto build) {
    CAPTURE(layer.name());
    fx::random::generator g1{31};
    build(layer, g1);
    std::vector<std::uint64_t> ids;
    for (auto* v : layer.variables()) ids.push_back(v->id());
    auto fresh = std::remove_cvref_t<decltype(layer)>{layer.options()};
    fx::random::generator g3{77}, g4{77};
    layer.initialize(g3);
    build(fresh, g4);  // a fresh layer built from the same generator state
    const auto a = layer.variables(), b = fresh.variables();
    REQUIRE(a.size() == ids.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CAPTURE(a[i]->name());
      CHECK(a[i]->id() == ids[i]);
      CHECK(a[i]->peek().to_vector() == b[i]->peek().to_vector());
    }
  };
  nn::dense<3> fc{{.bias_initializer = init::random_normal()}};
  check(fc, [](auto& l, fx::random::generator& g) { l.build(fx::shape{4}, g); });
  nn::conv2d<2, 3> conv{{.bias_initializer = init::ones()}};
  check(conv, [](auto& l, fx::random::generator& g) { l.build(fx::shape{5, 5, 2}, g); });
  nn::multi_head_attention<2, 4> mha{{.bias_initializer = init::random_uniform()}};
  check(mha, [](auto& l, fx::random::generator& g) { l.build(6, 6, 6, g); });
}

TEST_CASE("layer options: use_bias = false leaves no bias variable, and the output is x W") {
  fx::random::generator gen{4};
  nn::dense<3, double> fc{{.use_bias = false, .name = "proj"}};
  CHECK(fc.name() == "proj");
  const fx::tensor<double> x = fx::random::normal<double>({5, 4}, gen);
  const fx::tensor<double> y = fc(x);
  CHECK(y.to_vector() == fx::tensor<double>(fx::matmul(x, fc.kernel())).to_vector());
  REQUIRE(fc.variables().size() == 1);
  CHECK(fc.variables()[0]->name() == "proj/kernel");
  CHECK(fc.count_params() == 12);
  CHECK_THROWS_WITH_AS(fc.bias(), "dense 'proj': the layer has no bias (it was made with use_bias = false)",
                       fx::invalid_argument);
  // Under a tape the kernel and the input get their gradients; there is nothing else.
  fx::gradient_tape tape;
  tape.watch(x);
  const fx::tensor<double> loss = fx::reduce_sum(fx::square(fc(x)));
  auto [dx, dk] = tape.gradient(loss, {x, fc.kernel()});
  const fx::tensor<double> dy = 2.0 * fx::matmul(x, fc.kernel());
  CHECK(dk.to_vector() == fx::tensor<double>(fx::matmul(x, dy, fx::transpose_a)).to_vector());
  CHECK(dx.shape() == x.shape());

  // A convolution without bias before batch normalization, as in ResNets: one variable fewer.
  auto net = nn::sequential(nn::input<8, 8, 3>{}, nn::conv2d<4, 3, nn::same>{{.use_bias = false}},
                            nn::batch_norm{}, nn::relu{}, nn::flatten{}, nn::dense<2>{});
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"conv2d/kernel", "batch_normalization/gamma", "batch_normalization/beta", "dense/kernel",
                                          "dense/bias"});
  CHECK(net.summary().find("conv2d                     (batch, 8, 8, 4)      108") != std::string::npos);
}

TEST_CASE("layer options: a sequential model of double keeps each layer's options and name") {
  auto net = nn::sequential(nn::typed_input<double, 6>{},
                            nn::dense<4>{{.use_bias = false, .kernel_initializer = init::ones(), .name = "a"}},
                            nn::dense<2>{{.bias_initializer = init::constant(3)}});
  const auto vars = net.trainable_variables();
  REQUIRE(vars.size() == 3);
  CHECK(vars[0]->name() == "a/kernel");
  CHECK(vars[0]->peek().to_vector() == std::vector<double>(24, 1.0));
  CHECK(vars[2]->peek().to_vector() == std::vector<double>{3, 3});
}

TEST_CASE("initializers: Keras's string identifiers name the same initializers") {
  const std::vector<std::pair<const char*, nn::initializer>> cases = {
      {"glorot_uniform", init::glorot_uniform()}, {"HeNormal", init::he_normal()}, {"he_uniform", init::he_uniform()},
      {"lecun_normal", init::lecun_normal()},     {"zeros", init::zeros()},        {"RandomNormal", init::random_normal()},
      {"truncated_normal", init::truncated_normal()}, {"orthogonal", init::orthogonal()}};
  for (const auto& c : cases) {  // no structured binding: clang 14 cannot capture one (CAPTURE)
    CAPTURE(c.first);
    const nn::initializer got = c.first;
    fx::random::generator a{5}, b{5};
    CHECK(got.operator()<float>(fx::shape{6, 4}, a).to_vector() == c.second.operator()<float>(fx::shape{6, 4}, b).to_vector());
  }
  nn::dense<3> fc{{.kernel_initializer = "ones"}};
  fc.build(fx::shape{2});
  CHECK(fc.kernel().peek().to_vector() == std::vector<float>(6, 1.f));
  CHECK_THROWS_WITH_AS(nn::initializer("he"), doctest::Contains("initializer: unknown name 'he'; Keras's names are glorot_uniform, "),
                       fx::invalid_argument);
}

TEST_CASE("initializers and layer options: bad arguments are refused, naming the initializer or the layer") {
  CHECK_THROWS_WITH_AS(init::random_uniform(1, 1),
                       "initializers::random_uniform: minval = 1.000000 must be less than maxval = 1.000000, both finite",
                       fx::invalid_argument);
  CHECK_THROWS_AS(init::random_normal(0, 0), fx::invalid_argument);
  CHECK_THROWS_AS(init::truncated_normal(0, -1), fx::invalid_argument);
  CHECK_THROWS_WITH_AS(init::variance_scaling(0), "initializers::variance_scaling: scale = 0.000000 must be positive and finite",
                       fx::invalid_argument);
  CHECK_THROWS_AS(init::constant(std::nan("")), fx::invalid_argument);
  fx::random::generator gen{1};
  CHECK_THROWS_WITH_AS(init::identity().operator()<float>(fx::shape{2, 2, 2}, gen),
                       "initializers::identity: the shape must have two axes, got (2, 2, 2)", fx::invalid_argument);
  // A dense layer whose kernel the identity cannot draw says so when it is built.
  nn::dense<3> conv_like{{.kernel_initializer = init::identity()}};
  CHECK_NOTHROW(conv_like.build(fx::shape{3}));
  nn::conv2d<3, 2> conv{{.kernel_initializer = init::identity()}};
  CHECK_THROWS_AS(conv.build(fx::shape{4, 4, 3}), fx::invalid_argument);
  CHECK_FALSE(conv.built());
}

}  // namespace initializers_test
