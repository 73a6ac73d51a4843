// The program a newcomer writes with a GRU from the README alone (stop 53): padded token rows,
// embedding<...>::mask_zero, a bidirectional GRU, fit, evaluate, a checkpoint round trip and an
// encoder-decoder through call_with_state. Its build, by the README's "Your own program" lines
// (bench/RESULTS-compile.md, "A newcomer's GRU program (stop 53)"): 77-84 s header-only, 44-46 s per
// edit with prebuilt kernels before the GRU's set was in the library by default (NO_GRU), 24 s after.
#include <fluxion/checkpoint.hpp>
#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>

#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  // Label 1 when token 7 appears; rows padded with 0 on the right.
  const int n = 512, len = 20;
  std::vector<std::int32_t> ids(n * len, 0), labels(n);
  std::mt19937 rng(1);
  for (int i = 0; i < n; ++i) {
    const int l = 3 + static_cast<int>(rng() % (len - 3));
    bool positive = false;
    for (int t = 0; t < l; ++t) {
      ids[i * len + t] = 1 + static_cast<std::int32_t>(rng() % 49);
      positive |= ids[i * len + t] == 7;
    }
    labels[i] = positive;
  }
  const auto x = fx::from_vector(ids, {n, len});
  const auto y = fx::from_vector(labels, {n});
  auto train = fx::data::tensors(x, y).shuffle(n, 3).batch(32);

  auto net = nn::sequential(nn::typed_input<std::int32_t, 20>{}, nn::embedding<50, 16>::mask_zero{},
                            nn::bidirectional<nn::gru<16>>{}, nn::dense<2>{});
  fx::optim::adam opt{1e-2};
  auto loss = [](const auto& logits, const auto& labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
  fx::fit(net, opt, loss, train, {.epochs = 5});
  const auto result = fx::evaluate(net, loss, fx::data::tensors(x, y).batch(128));
  std::cout << "accuracy " << result.accuracy << " loss " << result.loss << "\n" << net.summary();

  fx::checkpoint ckpt{{"model", net}, {"optimizer", opt}};
  ckpt.save("newcomer_gru.safetensors");
  auto restored = nn::sequential(nn::typed_input<std::int32_t, 20>{}, nn::embedding<50, 16>::mask_zero{},
                                 nn::bidirectional<nn::gru<16>>{}, nn::dense<2>{});
  fx::optim::adam opt2{1e-2};
  fx::checkpoint{{"model", restored}, {"optimizer", opt2}}.restore("newcomer_gru.safetensors");
  std::cout << "restored accuracy " << fx::evaluate(restored, loss, fx::data::tensors(x, y).batch(128)).accuracy << "\n";

  // An encoder's final state starts a decoder.
  nn::gru<8> encoder;
  nn::gru<8, true> decoder;
  const fx::tensor<float> a = fx::random::normal<float>({4, 5, 3});
  auto [out, h] = encoder.call_with_state(a);
  auto [seq, h2] = decoder.call_with_state(a, {h});
  std::cout << seq.shape() << "\n";
  return 0;
}
