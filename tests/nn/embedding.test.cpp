// fx::nn::embedding: the lookup against the table, the gradient with respect to the table against
// finite differences (double), Keras's initializer, a float model of integer input, errors.
#define FLUXION_FORWARD_MODE 0  // layers are checked through the tape; the ops' tests check forward mode
#include <fluxion/testing/check_gradients.hpp>
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

TEST_CASE("embedding: rows of the table at the indices, int32 and int64, any shape") {
  fx::random::generator gen{4};
  nn::embedding<7, 3> layer;
  layer.build({}, gen);
  CHECK(layer.embeddings().shape() == fx::shape{7, 3});
  const auto table = layer.embeddings().peek().to_vector();
  for (float v : table) CHECK((v >= -0.05f && v <= 0.05f));
  const std::vector<std::int32_t> ids{6, 0, 3, 3, 1, 5};
  auto check_lookup = [&](const auto& idx) {
    const fx::tensor<float> y = layer(idx);
    REQUIRE(y.shape() == fx::shape{2, 3, 3});
    const auto yv = y.to_vector();
    for (std::size_t k = 0; k < ids.size(); ++k)
      for (std::size_t j = 0; j < 3; ++j) CHECK(yv[k * 3 + j] == table[static_cast<std::size_t>(ids[k]) * 3 + j]);
  };
  check_lookup(fx::from_vector(ids, {2, 3}));
  check_lookup(fx::from_vector(std::vector<std::int64_t>(ids.begin(), ids.end()), {2, 3}));
  CHECK(layer(fx::from_vector(std::vector<std::int32_t>{2}, {1})).shape() == fx::shape{1, 3});
}

TEST_CASE("embedding: the gradient with respect to the table") {
  fx::random::generator gen{5};
  nn::embedding<5, 2, double> layer;
  layer.build({}, gen);
  const fx::tensor<std::int32_t> ids = fx::from_vector(std::vector<std::int32_t>{4, 1, 4, 0}, {2, 2});
  const fx::tensor<double> table = fx::random::normal<double>({5, 2}, gen);
  auto r = fx::testing::check_gradients(
      [&](const auto& t) {
        layer.embeddings().assign(t);
        return layer(ids) * layer(ids);  // squared, so the gradient depends on the looked-up values
      },
      fx::testing::check_options{.reverse = true, .forward = false}, table);
  CHECK_MESSAGE(r.ok, r.report);
  // Rows looked up twice get both gradients; rows never looked up get zeros.
  fx::gradient_tape tape;
  fx::tensor<double> loss = fx::reduce_sum(layer(ids));
  const fx::tensor<double> g = tape.gradient(loss, layer.embeddings());
  CHECK(g.to_vector() == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0, 2, 2});
}

TEST_CASE("embedding: first layer of a float model of int32 input") {
  fx::random::generator gen{6};
  auto net = nn::sequential(gen, nn::typed_input<std::int32_t, 4>{}, nn::embedding<10, 3>{}, nn::flatten{},
                            nn::dense<2>{});
  using N = decltype(net);
  static_assert(std::is_same_v<N::value_type, float>);
  static_assert(std::is_same_v<N::output_shape_t, nn::static_shape<2>>);
  static_assert(std::is_same_v<decltype(nn::embedding<10, 3>::output_shape(nn::static_shape<4, 2>{})),
                               nn::static_shape<4, 2, 3>>);
  const fx::tensor<std::int32_t> ids = fx::from_vector(std::vector<std::int32_t>{1, 2, 3, 4, 9, 8, 7, 6}, {2, 4});
  const fx::tensor<float> y = net(ids);
  CHECK(y.shape() == fx::shape{2, 2});
  // The same as the layers called one by one.
  const fx::tensor<float> e = net.layer<0>()(ids);
  const fx::tensor<float> want = net.layer<2>()(fx::reshape(e, {2, 12}));
  CHECK(y.to_vector() == want.to_vector());
  std::vector<std::string> names;
  for (auto* v : net.trainable_variables()) names.push_back(v->name());
  CHECK(names == std::vector<std::string>{"embedding/embeddings", "dense/kernel", "dense/bias"});
  // Every variable gets a gradient through the lookup.
  fx::gradient_tape tape;
  fx::tensor<float> loss = fx::reduce_sum(fx::square(net(ids)));
  auto grads = tape.gradient(loss, net.trainable_variables());
  REQUIRE(grads.size() == 3);
  CHECK(grads[0].shape() == fx::shape{10, 3});
  CHECK_THROWS_AS(net(fx::zeros<std::int32_t>({2, 5})), fx::shape_error);
}

TEST_CASE("embedding: an index out of range names the layer, the index and the range") {
  nn::embedding<4, 2> layer{"words"};
  CHECK_THROWS_WITH_AS(layer(fx::from_vector(std::vector<std::int32_t>{0, 4}, {1, 2})),
                       "embedding 'words': indices[0, 1] = 4 is not in [0, 4) (indices of shape (1, 2))",
                       fx::out_of_range);
  CHECK_THROWS_WITH_AS(layer(fx::from_vector(std::vector<std::int64_t>{-1}, {1})),
                       "embedding 'words': indices[0] = -1 is not in [0, 4) (indices of shape (1,))",
                       fx::out_of_range);
  CHECK_THROWS_AS(layer(fx::tensor<std::int32_t>(2)), fx::shape_error);
  CHECK_THROWS_AS((nn::embedding<4, 2>{}.embeddings()), fx::error);
}
