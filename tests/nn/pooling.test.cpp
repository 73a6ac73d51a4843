// fx::nn::max_pool2d, avg_pool2d, the global poolings, flatten, reshape and dropout: gradients
// against finite differences, pooling against PyTorch and naive loops, static shapes, dropout's
// statistics; global_avg_pool1d's masked mean (Keras's mask) against a naive loop.
#define FLUXION_FORWARD_MODE 0
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include "peer.hpp"
#include "reverse_only.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {
using test::reverse_only;
}  // namespace

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

TEST_CASE("global pooling: static shapes follow Keras (keepdims optional)") {
  using I = nn::static_shape<7, 7, 32>;
  using Q = nn::static_shape<20, 16>;
  static_assert(std::is_same_v<decltype(nn::global_avg_pool2d<>::output_shape(I{})), nn::static_shape<32>>);
  static_assert(std::is_same_v<decltype(nn::global_max_pool2d<>::output_shape(I{})), nn::static_shape<32>>);
  static_assert(
      std::is_same_v<decltype(nn::global_avg_pool2d<fx::keepdims>::output_shape(I{})), nn::static_shape<1, 1, 32>>);
  static_assert(std::is_same_v<decltype(nn::global_avg_pool1d<>::output_shape(Q{})), nn::static_shape<16>>);
  static_assert(std::is_same_v<decltype(nn::global_max_pool1d<true>::output_shape(Q{})), nn::static_shape<1, 16>>);
  CHECK(std::string(nn::global_avg_pool2d<>::base_name) == "global_avg_pool2d");
  CHECK(std::string(nn::global_max_pool1d<>::base_name) == "global_max_pool1d");
  auto net = nn::sequential(nn::input<7, 7, 32>{}, nn::global_avg_pool2d{}, nn::dense<10>{});
  const std::string summary = net.summary();
  CHECK_MESSAGE(summary.find("global_avg_pool2d          (batch, 32)           0\n") != std::string::npos, summary);
  fx::tensor<float> y = net(fx::ones<float>({3, 7, 7, 32}));
  CHECK(y.shape() == fx::shape{3, 10});
}

TEST_CASE("global pooling: values equal a naive loop, gradients equal finite differences") {
  fx::random::generator gen{9};
  const fx::tensor<double> x = fx::random::normal<double>({2, 3, 4, 5}, gen);  // (batch, h, w, c)
  const fx::tensor<double> avg = nn::global_avg_pool2d{}(x);
  const fx::tensor<double> max = nn::global_max_pool2d{}(x);
  const fx::tensor<double> avg_kept = nn::global_avg_pool2d<fx::keepdims>{}(x);
  REQUIRE(avg.shape() == fx::shape{2, 5});
  REQUIRE(max.shape() == fx::shape{2, 5});
  REQUIRE(avg_kept.shape() == fx::shape{2, 1, 1, 5});
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 5; ++c) {
      double sum = 0, best = -1e300;
      for (int h = 0; h < 3; ++h)
        for (int w = 0; w < 4; ++w) {
          sum += x(b, h, w, c);
          best = std::max(best, x(b, h, w, c));
        }
      CHECK(avg(b, c) == doctest::Approx(sum / 12).epsilon(1e-14));
      CHECK(avg_kept(b, 0, 0, c) == avg(b, c));
      CHECK(max(b, c) == best);
    }
  const fx::tensor<double> seq = fx::random::normal<double>({3, 6, 4}, gen);  // (batch, steps, features)
  const fx::tensor<double> avg1 = nn::global_avg_pool1d{}(seq);
  const fx::tensor<double> max1 = nn::global_max_pool1d<fx::keepdims>{}(seq);
  REQUIRE(avg1.shape() == fx::shape{3, 4});
  REQUIRE(max1.shape() == fx::shape{3, 1, 4});
  for (int b = 0; b < 3; ++b)
    for (int f = 0; f < 4; ++f) {
      double sum = 0, best = -1e300;
      for (int t = 0; t < 6; ++t) {
        sum += seq(b, t, f);
        best = std::max(best, seq(b, t, f));
      }
      CHECK(avg1(b, f) == doctest::Approx(sum / 6).epsilon(1e-14));
      CHECK(max1(b, 0, f) == best);
    }

  auto check = [](const char* what, auto&& f, const fx::tensor<double>& in) {
    auto r = fx::testing::check_gradients([&](const auto& a) { return fx::sin(f(a)); }, reverse_only, in);
    CHECK_MESSAGE(r.ok, what << ": " << r.report);
  };
  check("global_avg_pool2d", [](const auto& a) { return nn::global_avg_pool2d{}(a); }, x);
  check("global_max_pool2d", [](const auto& a) { return nn::global_max_pool2d{}(a); }, x);
  check("global_avg_pool2d<keepdims>", [](const auto& a) { return nn::global_avg_pool2d<true>{}(a); }, x);
  check("global_avg_pool1d", [](const auto& a) { return nn::global_avg_pool1d{}(a); }, seq);
  check("global_max_pool1d<keepdims>", [](const auto& a) { return nn::global_max_pool1d<true>{}(a); }, seq);
}

TEST_CASE("global pooling: forward and backward equal PyTorch's mean and amax over (h, w)") {
  for (const char* prefix : {"global_avg_pool", "global_max_pool"}) {
    const std::string p = prefix;
    const fx::tensor<float> x = peer::load(p + "_x");
    fx::gradient_tape tape;
    tape.watch(x);
    fx::tensor<float> y = p == "global_max_pool" ? fx::tensor<float>(nn::global_max_pool2d{}(x))
                                                 : fx::tensor<float>(nn::global_avg_pool2d{}(x));
    auto g = tape.gradient(fx::reduce_sum(y * peer::load(p + "_w")), x);
    peer::check_close(y, peer::load(p + "_y"), p + " y");
    peer::check_close(g, peer::load(p + "_dx"), p + " dx");
  }
}

TEST_CASE("global pooling: a NaN in a channel's positions gives NaN, and a wrong rank names the layer") {
  std::vector<float> v(12, 1.f);
  v[(1 * 2 + 0) * 3 + 2] = std::numeric_limits<float>::quiet_NaN();  // x(0, 1, 0, 2)
  const fx::tensor<float> x = fx::from_vector(v, {1, 2, 2, 3});
  const fx::tensor<float> max = nn::global_max_pool2d{}(x);
  const fx::tensor<float> avg = nn::global_avg_pool2d{}(x);
  CHECK(max(0, 0) == 1);
  CHECK(std::isnan(max(0, 2)));
  CHECK(std::isnan(avg(0, 2)));
  CHECK_THROWS_WITH_AS(nn::global_avg_pool2d{}(fx::ones<float>({2, 3, 4})),
                       "global_avg_pool2d 'global_avg_pool2d': expects input of rank 4 (batch, height, width, "
                       "channels), got (2, 3, 4)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(nn::global_max_pool1d{"pool"}(fx::ones<float>({2, 3, 4, 5})),
                       "global_max_pool1d 'pool': expects input of rank 3 (batch, steps, features), got (2, 3, 4, 5)",
                       fx::shape_error);
  CHECK_THROWS_WITH_AS(nn::global_max_pool1d{}(fx::ones<float>({2, 0, 4})),
                       "global_max_pool1d 'global_max_pool1d': input of shape (2, 0, 4) has no positions to pool",
                       fx::shape_error);
}

TEST_CASE("global_avg_pool1d with Keras's mask: the mean of the kept steps, zeros for none; in a sequential "
          "model after embedding<...>::mask_zero") {
  fx::random::generator gen{10};
  const fx::tensor<double> seq = fx::random::normal<double>({3, 5, 4}, gen);  // (batch, steps, features)
  const std::vector<std::vector<bool>> keep = {{1, 1, 0, 0, 0}, {0, 1, 0, 1, 1}, {0, 0, 0, 0, 0}};
  std::vector<std::int32_t> flat;
  for (const auto& row : keep)
    for (bool k : row) flat.push_back(k ? 1 : 0);
  const fx::tensor<bool> m(fx::from_vector(flat, {3, 5}) != 0);
  const fx::tensor<double> avg = nn::global_avg_pool1d{}.call(seq, {.mask = &m});
  const fx::tensor<double> kept = nn::global_avg_pool1d<fx::keepdims>{}.call(seq, {.mask = &m});
  REQUIRE(avg.shape() == fx::shape{3, 4});
  REQUIRE(kept.shape() == fx::shape{3, 1, 4});
  for (int b = 0; b < 3; ++b)
    for (int f = 0; f < 4; ++f) {
      double sum = 0;
      int count = 0;
      for (int t = 0; t < 5; ++t)
        if (keep[b][t]) sum += seq(b, t, f), ++count;
      CHECK(avg(b, f) == doctest::Approx(count ? sum / count : 0.0).epsilon(1e-14));
      CHECK(kept(b, 0, f) == avg(b, f));
    }
  auto r = fx::testing::check_gradients(
      [&](const auto& a) { return fx::sin(nn::global_avg_pool1d{}.call(a, {.mask = &m})); }, reverse_only, seq);
  CHECK_MESSAGE(r.ok, r.report);
  const fx::tensor<bool> wrong = fx::ones<bool>({3, 4});
  CHECK_THROWS_WITH_AS(nn::global_avg_pool1d{}.call(seq, {.mask = &wrong}),
                       "global_avg_pool1d 'global_avg_pool1d': the mask must be (batch, steps) = (3, 5) for input "
                       "(3, 5, 4), got (3, 4)",
                       fx::shape_error);

  // Keras's text classifier with mask_zero: the mean over each example's real tokens.
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 5>{}, nn::embedding<10, 4>::mask_zero{},
                            nn::global_avg_pool1d{}, nn::dense<2>{});
  const fx::tensor<std::int32_t> ids = fx::from_vector(std::vector<std::int32_t>{3, 1, 0, 0, 0, 4, 0, 0, 0, 0}, {2, 5});
  const fx::tensor<float> table = net.layer<0>().embeddings().peek();
  const fx::tensor<float> mean0 = (fx::slice(table, {3, 0}, {1, 4}) + fx::slice(table, {1, 0}, {1, 4})) * 0.5f;
  const fx::tensor<float> mean1 = fx::slice(table, {4, 0}, {1, 4});
  const fx::tensor<float> want = net.layer<2>()(fx::tensor<float>(fx::concat({mean0, mean1}, 0)));
  const auto got = net(ids).to_vector(), wanted = want.to_vector();
  REQUIRE(got.size() == wanted.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(wanted[i]).epsilon(1e-6));
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
  CHECK_THROWS_WITH_AS(nn::dropout(1.0), "dropout: rate = 1 is not in [0, 1)", fx::invalid_argument);
}
