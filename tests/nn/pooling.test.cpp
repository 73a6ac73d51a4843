// fx::nn::max_pool2d, avg_pool2d, flatten, reshape and dropout: gradients against finite
// differences, pooling against PyTorch, static shapes, dropout's statistics.
#define FLUXION_FORWARD_MODE 0
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "peer.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
const fx::testing::check_options reverse_only{.reverse = true, .forward = false};
}

TEST_CASE("pooling: static shapes follow Keras (stride = pool, valid)") {
  using S = nn::static_shape<28, 28, 32>;
  static_assert(std::is_same_v<decltype(nn::max_pool2d<2>::output_shape(S{})), nn::static_shape<14, 14, 32>>);
  static_assert(std::is_same_v<decltype(nn::avg_pool2d<3, 1>::output_shape(S{})), nn::static_shape<26, 26, 32>>);
  static_assert(
      std::is_same_v<decltype(nn::max_pool2d<3, 2, nn::same>::output_shape(S{})), nn::static_shape<14, 14, 32>>);
  static_assert(std::is_same_v<decltype(nn::flatten::output_shape(S{})), nn::static_shape<25088>>);
  static_assert(std::is_same_v<decltype(nn::reshape<28, 896>::output_shape(S{})), nn::static_shape<28, 896>>);
  static_assert(std::is_same_v<decltype(nn::permute<3, 1, 2>::output_shape(S{})), nn::static_shape<32, 28, 28>>);
  fx::tensor<float> y = nn::max_pool2d<3, 2, nn::same>{}(fx::zeros<float>({2, 28, 28, 32}));
  CHECK(y.shape() == fx::shape{2, 14, 14, 32});
}

TEST_CASE("pooling, flatten, reshape: gradients") {
  fx::random::generator gen{4};
  const fx::tensor<double> x = fx::random::normal<double>({2, 6, 6, 2}, gen);
  auto max = fx::testing::check_gradients([](const auto& a) { return nn::max_pool2d<2>{}(a); }, reverse_only, x);
  CHECK_MESSAGE(max.ok, max.report);
  auto avg = fx::testing::check_gradients([](const auto& a) { return nn::avg_pool2d<3, 1, nn::same>{}(a); },
                                          reverse_only, x);
  CHECK_MESSAGE(avg.ok, avg.report);
  auto flat = fx::testing::check_gradients([](const auto& a) { return fx::square(nn::flatten{}(a)); }, reverse_only, x);
  CHECK_MESSAGE(flat.ok, flat.report);
  auto re = fx::testing::check_gradients([](const auto& a) { return fx::sin(nn::reshape<12, 6>{}(a)); }, reverse_only, x);
  CHECK_MESSAGE(re.ok, re.report);
  CHECK(fx::tensor<double>(nn::reshape<12, 6>{}(x)).shape() == fx::shape{2, 12, 6});
  auto perm = fx::testing::check_gradients([](const auto& a) { return fx::exp(nn::permute<3, 1, 2>{}(a)); },
                                           reverse_only, x);
  CHECK_MESSAGE(perm.ok, perm.report);
  const fx::tensor<double> p = nn::permute<3, 1, 2>{}(x);
  CHECK(p.shape() == fx::shape{2, 2, 6, 6});
  CHECK(p(1, 1, 4, 3) == x(1, 4, 3, 1));
  const nn::reshape<5, 5> to_5x5;
  CHECK_THROWS_WITH_AS(to_5x5(x), "reshape 'reshape': cannot reshape input of shape (2, 6, 6, 2) into (batch, 5, 5)",
                       fx::shape_error);
}

TEST_CASE("pooling: forward and backward equal PyTorch's") {
  for (const char* prefix : {"max_pool", "avg_pool"}) {
    const fx::tensor<float> x = peer::load(std::string(prefix) + "_x");
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<float> y = std::string(prefix) == "max_pool" ? fx::tensor<float>(nn::max_pool2d<2>{}(x))
                                                            : fx::tensor<float>(nn::avg_pool2d<3, 1>{}(x));
    fx::tensor<float> s = fx::reduce_sum(y * peer::load(std::string(prefix) + "_w"));
    auto g = tape.gradient(s, x);
    peer::check_close(y, peer::load(std::string(prefix) + "_y"), std::string(prefix) + " y");
    peer::check_close(g, peer::load(std::string(prefix) + "_dx"), std::string(prefix) + " dx");
  }
}

TEST_CASE("dropout: identity in inference, Keras's scaling in training, deterministic per seed") {
  nn::dropout drop{0.25, 42};
  const fx::tensor<double> x = fx::ones<double>({100, 100});
  CHECK(fx::tensor<double>(drop(x)).to_vector() == x.to_vector());
  const auto y = fx::tensor<double>(drop(x, true)).to_vector();
  std::size_t zeros = 0;
  for (double v : y) {
    if (v == 0) ++zeros;
    else CHECK(v == doctest::Approx(1 / 0.75));
  }
  CHECK(static_cast<double>(zeros) / y.size() == doctest::Approx(0.25).epsilon(0.05));
  nn::dropout again{0.25, 42};
  CHECK(fx::tensor<double>(again(x, true)).to_vector() == y);
  // The gradient is the mask, scaled: x * mask / (1 - rate) is linear in x.
  fx::gradient_tape tape;
  tape.watch(x);
  nn::dropout third{0.25, 42};
  fx::tensor<double> z = third(x, true);
  auto g = tape.gradient(fx::reduce_sum(z), x);
  CHECK(g.to_vector() == y);
  CHECK_THROWS_WITH_AS(nn::dropout(1.0), "dropout: rate = 1.000000 is not in [0, 1)", fx::invalid_argument);
}
