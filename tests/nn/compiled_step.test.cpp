// fx::nn::compiled_step against the tape-based step it replaces (the same numbers, bitwise: the
// same statements, rules and order), against finite differences (double), with recomputed layers
// (batch norm, dropout), and its errors (nothing changes when a step throws).
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "compiled_check.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

auto cross_entropy = [](const auto& logits, const auto& labels) {
  return fx::losses::sparse_softmax_cross_entropy(logits, labels);
};

template <class A, class B>
void check_same_variables(A& a, B& b) {
  auto va = a.variables(), vb = b.variables();
  REQUIRE(va.size() == vb.size());
  for (std::size_t i = 0; i < va.size(); ++i) {
    CAPTURE(va[i]->name());
    CHECK(va[i]->peek().to_vector() == vb[i]->peek().to_vector());
  }
}

/// Runs `steps` steps of the tape-based step on one model and of the compiled step on its twin
/// (the same initial weights), and checks losses, variables and optimizer slots for equality.
template <class Make, class X>
void check_bitwise(Make make, const X& x, const fx::tensor<std::int32_t>& y, int steps) {
  auto a = make(), b = make();
  check_same_variables(a, b);
  fx::optim::adam opt_a{1e-2}, opt_b{1e-2};
  auto step = nn::compile_step(b, opt_b, cross_entropy);
  for (int s = 0; s < steps; ++s) {
    CAPTURE(s);
    const auto la = compiled_check::tape_step(a, opt_a, cross_entropy, x, y);
    const auto lb = step(x, y);
    CHECK(la.item() == lb.item());
  }
  check_same_variables(a, b);
  CHECK(opt_a.iterations() == opt_b.iterations());
  auto sa = opt_a.slot_variables<typename decltype(a)::value_type, fx::cpu>();
  auto sb = opt_b.slot_variables<typename decltype(a)::value_type, fx::cpu>();
  REQUIRE(sa.size() == sb.size());
  for (std::size_t i = 0; i < sa.size(); ++i) CHECK(sa[i].second->peek().to_vector() == sb[i].second->peek().to_vector());
}

fx::tensor<std::int32_t> labels(fx::index_t n, int classes) {
  std::vector<std::int32_t> v;
  for (fx::index_t i = 0; i < n; ++i) v.push_back(static_cast<std::int32_t>((i * 7 + 3) % classes));
  return fx::from_vector(v, {n});
}

}  // namespace

TEST_CASE("compiled_step: an MLP's steps equal the tape-based steps, bitwise") {
  auto make = [] {
    fx::random::generator gen{5};
    return nn::sequential(gen, nn::input<20>{}, nn::dense<16>{}, nn::relu{}, nn::dense<12>{}, nn::tanh{},
                          nn::dense<4>{});
  };
  fx::random::generator gen{9};
  const fx::tensor<float> x = fx::random::normal<float>({8, 20}, gen);
  check_bitwise(make, x, labels(8, 4), 4);
}

TEST_CASE("compiled_step: Keras's other activations, fused into their dense statements, equal the tape-based steps") {
  auto make = [] {
    fx::random::generator gen{5};
    return nn::sequential(gen, nn::input<20>{}, nn::dense<16>{}, nn::leaky_relu{}, nn::dense<16>{}, nn::elu{0.7},
                          nn::dense<16>{}, nn::selu{}, nn::dense<16>{}, nn::relu6{}, nn::dense<16>{}, nn::silu{},
                          nn::dense<16>{}, nn::softplus{}, nn::dense<16>{}, nn::softsign{}, nn::dense<16>{},
                          nn::mish{}, nn::dense<4>{});
  };
  fx::random::generator gen{9};
  const fx::tensor<float> x = fx::random::normal<float>({8, 20}, gen);
  check_bitwise(make, x, labels(8, 4), 3);
}

TEST_CASE("compiled_step: a CNN's steps (conv, pooling, flatten) equal the tape-based steps, bitwise") {
  auto make = [] {
    fx::random::generator gen{6};
    return nn::sequential(gen, nn::input<8, 8, 2>{}, nn::conv2d<4, 3, nn::same>{}, nn::relu{}, nn::max_pool2d<2>{},
                          nn::conv2d<6, 3>{}, nn::sigmoid{}, nn::avg_pool2d<2>{}, nn::flatten{}, nn::dense<5>{});
  };
  fx::random::generator gen{10};
  const fx::tensor<float> x = fx::random::normal<float>({6, 8, 8, 2}, gen);
  check_bitwise(make, x, labels(6, 5), 3);
}

TEST_CASE("compiled_step: global pooling (2-D and 1-D, kept dims) is one statement and equals the tape-based steps") {
  static_assert(nn::detail::has_statement<nn::global_avg_pool2d<>, float, nn::static_shape<8, 8, 4>>());
  static_assert(nn::detail::has_statement<nn::global_max_pool1d<true>, float, nn::static_shape<5, 6>>());
  auto make_cnn = [] {
    fx::random::generator gen{6};
    return nn::sequential(gen, nn::input<8, 8, 2>{}, nn::conv2d<4, 3, nn::same>{}, nn::relu{}, nn::global_avg_pool2d{},
                          nn::dense<5>{});
  };
  auto make_max = [] {
    fx::random::generator gen{7};
    return nn::sequential(gen, nn::input<8, 8, 2>{}, nn::conv2d<4, 3>{}, nn::tanh{},
                          nn::global_max_pool2d<fx::keepdims>{}, nn::flatten{}, nn::dense<5>{});
  };
  fx::random::generator gen{10};
  const fx::tensor<float> x = fx::random::normal<float>({6, 8, 8, 2}, gen);
  check_bitwise(make_cnn, x, labels(6, 5), 3);
  check_bitwise(make_max, x, labels(6, 5), 3);

  // Keras's text classifier: embedding, the mean over the steps, a dense head.
  auto make_text = [] {
    fx::random::generator gen{8};
    return nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<11, 6>{}, nn::global_avg_pool1d{},
                          nn::dense<8>{}, nn::relu{}, nn::dense<3>{});
  };
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4 * 5; ++i) ids.push_back((i * 5 + 2) % 11);
  check_bitwise(make_text, fx::from_vector(ids, {4, 5}), labels(4, 3), 3);
}

TEST_CASE("compiled_step: recomputed layers (batch norm, dropout) equal the tape-based steps, moving averages included") {
  auto make = [] {
    fx::random::generator gen{7};
    return nn::sequential(gen, nn::input<10>{}, nn::dense<12>{}, nn::batch_norm<>{}, nn::relu{},
                          nn::dropout{0.3, 42}, nn::dense<3>{});
  };
  fx::random::generator gen{11};
  const fx::tensor<float> x = fx::random::normal<float>({16, 10}, gen);
  check_bitwise(make, x, labels(16, 3), 3);  // variables() includes the moving averages
}

TEST_CASE("compiled_step: group and instance normalization after convolutions equal the tape-based steps, bitwise") {
  auto make = [] {
    fx::random::generator gen{9};
    return nn::sequential(gen, nn::input<6, 6, 2>{}, nn::conv2d<8, 3, nn::same>{}, nn::group_norm<4>{}, nn::relu{},
                          nn::conv2d<4, 3>{}, nn::instance_norm<>{}, nn::flatten{}, nn::dense<3>{});
  };
  fx::random::generator gen{12};
  const fx::tensor<float> x = fx::random::normal<float>({5, 6, 6, 2}, gen);
  check_bitwise(make, x, labels(5, 3), 3);
}

TEST_CASE("compiled_step: rescaling first and after a layer equals the tape-based steps, bitwise") {
  auto make = [] {
    fx::random::generator gen{10};
    return nn::sequential(gen, nn::input<6>{}, nn::rescaling{1.0 / 255, -0.5}, nn::dense<8>{}, nn::rescaling{2.0},
                          nn::relu{}, nn::dense<3>{});
  };
  fx::random::generator gen{13};
  const fx::tensor<float> x = fx::random::uniform<float>({7, 6}, gen, 0.f, 255.f);
  check_bitwise(make, x, labels(7, 3), 3);
}

TEST_CASE("compiled_step: the update is the finite-difference gradient of the loss (double, SGD)") {
  fx::random::generator gen{8};
  auto net = nn::sequential(gen, nn::typed_input<double, 3, 3, 1>{}, nn::conv2d<2, 2>{}, nn::tanh{}, nn::flatten{},
                            nn::dense<3>{});
  fx::random::generator data{12};
  const fx::tensor<double> x = fx::random::normal<double>({4, 3, 3, 1}, data);
  const auto y = labels(4, 3);
  auto loss_at = [&] { return cross_entropy(net(x), y).item(); };
  std::vector<std::vector<double>> fd;
  const double h = 1e-6;
  for (auto* v : net.trainable_variables()) {
    std::vector<double> g;
    const auto w0 = v->peek().to_vector();
    for (std::size_t i = 0; i < w0.size(); ++i) {
      auto w = w0;
      w[i] = w0[i] + h;
      v->assign(fx::from_vector(w, v->shape()));
      const double up = loss_at();
      w[i] = w0[i] - h;
      v->assign(fx::from_vector(w, v->shape()));
      const double down = loss_at();
      g.push_back((up - down) / (2 * h));
    }
    v->assign(fx::from_vector(w0, v->shape()));
    fd.push_back(g);
  }
  REQUIRE(fd.size() == 4);
  std::vector<std::vector<double>> before;
  for (auto* v : net.trainable_variables()) before.push_back(v->peek().to_vector());
  fx::optim::sgd opt{1.0};
  auto step = nn::compile_step(net, opt, cross_entropy);
  step(x, y, false);
  auto vars = net.trainable_variables();
  for (std::size_t k = 0; k < vars.size(); ++k) {
    const auto after = vars[k]->peek().to_vector();
    for (std::size_t i = 0; i < after.size(); ++i)
      CHECK(before[k][i] - after[i] == doctest::Approx(fd[k][i]).epsilon(1e-6).scale(1e-8));
  }
}

TEST_CASE("compiled_step: a step that throws changes nothing") {
  fx::random::generator gen{3};
  auto net = nn::sequential(gen, nn::input<4>{}, nn::dense<3>{});
  fx::optim::adam opt{1e-2};
  auto step = nn::compile_step(net, opt, cross_entropy);
  const auto w0 = net.layer<0>().kernel().peek().to_vector();
  const fx::tensor<float> x = fx::ones<float>({2, 4});
  SUBCASE("a NaN in the input makes the loss NaN") {
    fx::tensor<float> bad = fx::ones<float>({2, 4});
    bad.mutable_data()[1] = std::numeric_limits<float>::quiet_NaN();
    CHECK_THROWS_WITH_AS(step(bad, labels(2, 3)), doctest::Contains("compiled_step: the loss is nan at optimizer iteration 0"),
                         fx::error);
    CHECK_THROWS_WITH_AS(step(bad, labels(2, 3)),
                         doctest::Contains("the variables were not updated (sparse_softmax_cross_entropy: the loss is nan; "
                                           "logits[0, 0] = nan)"),
                         fx::numeric_error);
  }
  SUBCASE("the wrong input width") {
    CHECK_THROWS_AS(step(fx::ones<float>({2, 5}), labels(2, 3)), fx::shape_error);
  }
  SUBCASE("a label out of range") {
    CHECK_THROWS_AS(step(x, fx::from_vector(std::vector<std::int32_t>{0, 7}, {2})), fx::out_of_range);
  }
  SUBCASE("a loss that is not a scalar") {
    auto per_example = nn::compile_step(net, opt, [](const auto& l, const auto& t) {
      return fx::losses::sparse_softmax_cross_entropy(l, t, fx::losses::reduction::none);
    });
    CHECK_THROWS_WITH_AS(per_example(x, labels(2, 3)), doctest::Contains("it must return one value"), fx::error);
  }
  CHECK(net.layer<0>().kernel().peek().to_vector() == w0);
  CHECK(opt.iterations() == 0);
  CHECK(opt.slot_variables<float, fx::cpu>().empty());
  // And the step still works afterwards.
  const float first = step(x, labels(2, 3)).item();
  step(x, labels(2, 3));
  CHECK(step(x, labels(2, 3)).item() < first);
}

TEST_CASE("compiled_step: a model of indices (embedding, LSTM) equals the tape-based steps, bitwise, for int32 and int64") {
  // The embedding reads the indices it was given; its backward pass gives the table's gradient only.
  auto make = [] {
    fx::random::generator gen{8};
    return nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<11, 6>{}, nn::lstm<7>{},
                          nn::dense<3>{});
  };
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4 * 5; ++i) ids.push_back((i * 5 + 2) % 11);
  const fx::tensor<std::int32_t> x32 = fx::from_vector(ids, {4, 5});
  check_bitwise(make, x32, labels(4, 3), 3);
  check_bitwise(make, fx::tensor<std::int64_t>(fx::cast<std::int64_t>(x32)), labels(4, 3), 3);

  // A bad index fails as the layer's own call does, and the step changes nothing.
  auto net = make();
  fx::optim::sgd opt{0.1};
  auto step = nn::compile_step(net, opt, cross_entropy);
  const auto before = net.variables()[0]->peek().to_vector();
  std::vector<std::int32_t> bad = ids;
  bad[7] = 11;
  CHECK_THROWS_WITH_AS(step(fx::from_vector(bad, {4, 5}), labels(4, 3)),
                       "embedding 'embedding': indices[1, 2] = 11 is not in [0, 11) (indices of shape (4, 5))",
                       fx::out_of_range);
  CHECK(net.variables()[0]->peek().to_vector() == before);
  CHECK(opt.iterations() == 0);
  step(x32, labels(4, 3));  // and the next step runs
  CHECK(opt.iterations() == 1);
}

TEST_CASE("compiled_step: GRU and bidirectional text models equal the tape-based steps, bitwise") {
  // Each recurrent layer is a recomputed segment: its fused cells run again under a tape of their own.
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4 * 5; ++i) ids.push_back((i * 3 + 1) % 11);
  const fx::tensor<std::int32_t> x = fx::from_vector(ids, {4, 5});
  check_bitwise(
      [] {
        fx::random::generator gen{9};
        return nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<11, 6>{}, nn::gru<7, true>{},
                              nn::gru<5>{}, nn::dense<3>{});
      },
      x, labels(4, 3), 3);
  check_bitwise(
      [] {
        fx::random::generator gen{10};
        return nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<11, 6>{},
                              nn::bidirectional<nn::lstm<4, true>>{},
                              nn::bidirectional<nn::gru<3>, nn::merge_mode::ave>{}, nn::dense<3>{});
      },
      x, labels(4, 3), 3);
}

TEST_CASE("compiled_step: a decoder with transposed convolutions equals the tape-based steps, bitwise") {
  fx::random::generator data{12};
  const fx::tensor<float> x = fx::random::normal<float>({4, 6, 6, 2}, data);
  check_bitwise(
      [] {
        fx::random::generator gen{11};
        return nn::sequential(gen, nn::input<6, 6, 2>{}, nn::conv2d<4, 3, nn::same, 2>{}, nn::relu{},
                              nn::conv2d_transpose<3, 3, nn::same, 2>{}, nn::relu{}, nn::conv2d_transpose<2, 2>{},
                              nn::flatten{}, nn::dense<3>{});
      },
      x, labels(4, 3), 3);
}

TEST_CASE("compiled_step: depthwise and separable convolutions equal the tape-based steps, bitwise") {
  fx::random::generator data{13};
  const fx::tensor<float> x = fx::random::normal<float>({4, 8, 8, 3}, data);
  check_bitwise(
      [] {
        fx::random::generator gen{14};
        return nn::sequential(gen, nn::input<8, 8, 3>{}, nn::depthwise_conv2d<3, nn::same, 2, 1, 2>{}, nn::relu{},
                              nn::separable_conv2d<5, 3, nn::same>{}, nn::relu6{}, nn::flatten{}, nn::dense<3>{});
      },
      x, labels(4, 3), 3);
}

TEST_CASE("compiled_step: with gradient accumulation, equals the tape-based steps bitwise, and updates every k-th call") {
  auto make = [] {
    fx::random::generator gen{5};
    return nn::sequential(gen, nn::input<20>{}, nn::dense<16>{}, nn::relu{}, nn::dense<4>{});
  };
  fx::random::generator gen{9};
  const fx::tensor<float> x = fx::random::normal<float>({8, 20}, gen);
  const auto y = labels(8, 4);
  auto a = make(), b = make();
  fx::optim::adam opt_a{{.learning_rate = 1e-2, .gradient_accumulation_steps = 3}};
  fx::optim::adam opt_b{{.learning_rate = 1e-2, .gradient_accumulation_steps = 3}};
  auto step = nn::compile_step(b, opt_b, cross_entropy);
  const auto before = b.layer<0>().kernel().peek().to_vector();
  for (int s = 0; s < 7; ++s) {
    CAPTURE(s);
    const auto la = compiled_check::tape_step(a, opt_a, cross_entropy, x, y);
    const auto lb = step(x, y);
    CHECK(la.item() == lb.item());
    if (s < 2) CHECK(b.layer<0>().kernel().peek().to_vector() == before);  // the first cycle's first calls
  }
  check_same_variables(a, b);
  CHECK(opt_b.iterations() == 7);
  CHECK(opt_b.updates() == 2);
  CHECK(b.layer<0>().kernel().peek().to_vector() != before);
  CHECK(opt_a.get_slot(a.layer<0>().kernel(), "gradient_accumulator")->peek().to_vector() ==
        opt_b.get_slot(b.layer<0>().kernel(), "gradient_accumulator")->peek().to_vector());
}
