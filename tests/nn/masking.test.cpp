// fx::nn::masking (Keras's Masking): the mask of a padded sequence of values, the output with its
// padding steps zeroed, the gradient (the mask itself), and in a sequential model the mask carried
// to the recurrent layer, against the layer called with the mask by hand and against each example
// run alone on its real steps; the error for a rank-2 input.
#include <fluxion/fluxion.hpp>

#include <doctest/doctest.h>

#include <vector>

#include "../test_util.hpp"

namespace fx = fluxion;
namespace nn = fluxion::nn;

namespace {

// (2, 4, 3): example 0 has steps 2 and 3 of padding; example 1 step 0 (one feature differs from
// the padding value at step 2, so that step is real).
fx::tensor<float> padded(float pad) {
  const float p = pad;
  return fx::from_vector(std::vector<float>{1, 2, 3, -4, 5, 6, p, p, p, p, p, p,  //
                                            p, p, p, .5f, -.5f, 2, p, 7, p, 1, 1, 1},
                         {2, 4, 3});
}

}  // namespace

TEST_CASE("masking: the mask is true where some feature differs from the mask value, and padding becomes zeros") {
  for (const float pad : {0.f, -1.f}) {
    CAPTURE(pad);
    const nn::masking layer{pad};
    const fx::tensor<float> x = padded(pad);
    const fx::tensor<bool> m = layer.compute_mask(x);
    CHECK(m.shape() == fx::shape{2, 4});
    const std::vector<bool> want{true, true, false, false, false, true, true, true};
    const auto got = m.to_vector();
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(bool(got[i]) == want[i]);
    const auto y = layer(x).to_vector(), xv = x.to_vector();
    for (std::size_t i = 0; i < xv.size(); ++i) CHECK(y[i] == (want[i / 3] ? xv[i] : 0.f));
    // The gradient is the mask: 1 on real steps, 0 on padding.
    fx::gradient_tape tape;
    tape.watch(x);
    const fx::tensor<float> loss = fx::reduce_sum(layer(x) * 3.f);
    const auto g = tape.gradient(loss, x).to_vector();
    for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == (want[i / 3] ? 3.f : 0.f));
  }
  CHECK_THROWS_WITH_AS(nn::masking{}(fx::zeros<float>({2, 3})),
                       "masking 'masking': expects input of shape (batch, time, features...), got (2, 3)",
                       fx::shape_error);
}

TEST_CASE("masking: in a sequential model the recurrent layer skips the padding steps") {
  fx::random::generator gen{61};
  auto net = nn::sequential(gen, nn::input<4, 3>{}, nn::masking{}, nn::dense<5>{}, nn::relu{}, nn::gru<4>{},
                            nn::dense<2>{});
  const fx::tensor<float> x = padded(0.f);
  auto& dense = net.layer<1>();
  auto& gru = net.layer<3>();
  auto& head = net.layer<4>();
  const fx::tensor<bool> m = nn::masking{}.compute_mask(x);
  fx::gradient_tape tape{fx::persistent};
  tape.watch(x);
  const fx::tensor<float> y = net(x, true);
  const fx::tensor<float> want = head(gru.call(fx::relu(dense(x)), {.mask = &m}));
  test::check_close(y.to_vector(), want.to_vector(), 1e-6);
  const auto g = tape.gradient(fx::reduce_sum(y), x).to_vector();
  for (std::size_t i = 6; i < 12; ++i) CHECK(g[i] == 0.f);  // example 0's padding steps
  // Example 0 alone on its two real steps.
  const fx::tensor<float> first = head(gru(fx::relu(dense(fx::tensor<float>(fx::slice(x, {0, 0, 0}, {1, 2, 3}))))));
  test::check_close(fx::tensor<float>(fx::slice(y, {0, 0}, {1, 2})).to_vector(), first.to_vector(), 1e-6);
}
