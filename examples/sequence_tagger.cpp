// A sequence tagger, Keras style: padded sequences of token ids, embedding<...>::mask_zero, a
// bidirectional LSTM that returns every step, and a dense layer per step. The mask reaches the
// output, so fx::fit and fx::evaluate give it to the loss and the accuracy: the padding counts in
// neither. class_weight makes the rare tags count as much as the common one.
//
// The task (made up, so that the example needs no download): rows of 3 to 24 tokens in [1, 30],
// padded with 0; a token's tag is 1 where it is larger than both its neighbors (a peak), 2 where
// it is smaller than both (a valley), 0 otherwise. Both neighbors matter, hence the bidirectional
// layer.
//
//   build/examples/sequence_tagger [--epochs N]
#include <fluxion/data.hpp>
#include <fluxion/fluxion.hpp>

#include <cstdint>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace fx = fluxion;
namespace nn = fluxion::nn;

constexpr fx::index_t max_length = 24;

/// `rows` padded rows of random length and their tags.
std::pair<fx::tensor<std::int32_t>, fx::tensor<std::int32_t>> make_rows(fx::index_t rows, std::uint64_t seed) {
  fx::random::generator gen{seed};
  const auto lengths = fx::random::uniform<std::int32_t>({rows}, gen, 3, max_length + 1).to_vector();
  const auto draws = fx::random::uniform<std::int32_t>({rows, max_length}, gen, 1, 31).to_vector();
  std::vector<std::int32_t> ids(static_cast<std::size_t>(rows * max_length), 0), tags(ids.size(), 0);
  for (fx::index_t r = 0; r < rows; ++r) {
    const fx::index_t n = lengths[static_cast<std::size_t>(r)];
    const auto at = [&](fx::index_t t) { return static_cast<std::size_t>(r * max_length + t); };
    for (fx::index_t t = 0; t < n; ++t) ids[at(t)] = draws[at(t)];
    for (fx::index_t t = 0; t < n; ++t) {
      const bool above_left = t == 0 || ids[at(t)] > ids[at(t - 1)], above_right = t == n - 1 || ids[at(t)] > ids[at(t + 1)];
      const bool below_left = t == 0 || ids[at(t)] < ids[at(t - 1)], below_right = t == n - 1 || ids[at(t)] < ids[at(t + 1)];
      tags[at(t)] = above_left && above_right ? 1 : below_left && below_right ? 2 : 0;
    }
  }
  return {fx::from_vector(ids, {rows, max_length}), fx::from_vector(tags, {rows, max_length})};
}

int main(int argc, char** argv) {
  int epochs = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--epochs") {
      epochs = std::stoi(argv[++i]);
    } else {
      std::cerr << "usage: sequence_tagger [--epochs N]\n";
      return 2;
    }
  }
  try {
    const auto [x, y] = make_rows(4096, 1);
    const auto [test_x, test_y] = make_rows(512, 2);
    auto train = fx::data::tensors(x, y).shuffle(4096, /*seed=*/3).batch(64);
    auto test = fx::data::tensors(test_x, test_y).batch(256);

    fx::random::generator gen{4};
    auto net = nn::sequential(gen, nn::typed_input<std::int32_t, max_length>{}, nn::embedding<31, 16>::mask_zero{},
                              nn::bidirectional<nn::lstm<32, true>>{}, nn::dense<3>{});
    std::cout << net.summary();
    fx::optim::adam opt{5e-3};
    // The third argument is the mask (and any sample weights): the mean is over the real steps.
    auto loss = [](const auto& logits, const auto& tags, const auto& weights) {
      return fx::losses::sparse_softmax_cross_entropy(logits, tags, weights);
    };
    // About half the tokens are tagged 0 and a quarter each 1 and 2: weigh the rare tags up.
    fx::fit(net, opt, loss, train, {.epochs = epochs, .class_weight = {0.5, 1.0, 1.0}}, test);
    const fx::evaluation e = fx::evaluate(net, loss, test);
    std::cout << "test loss " << e.loss << ", per-step accuracy " << e.accuracy << " (padding left out)\n";

    // One row, its tags and the model's.
    const auto out = net.output_and_mask(fx::tensor<std::int32_t>(fx::slice(test_x, {0, 0}, {1, max_length})));
    const auto predicted = fx::tensor<std::int64_t>(fx::argmax(out.output, -1)).to_vector();
    const auto ids = test_x.to_vector(), tags = test_y.to_vector();
    const auto kept = out.mask.to_vector();
    std::cout << "tokens:    ";
    for (fx::index_t t = 0; t < max_length && kept[static_cast<std::size_t>(t)]; ++t) std::cout << ids[static_cast<std::size_t>(t)] << ' ';
    std::cout << "\ntags:      ";
    for (fx::index_t t = 0; t < max_length && kept[static_cast<std::size_t>(t)]; ++t) std::cout << tags[static_cast<std::size_t>(t)] << ' ';
    std::cout << "\npredicted: ";
    for (fx::index_t t = 0; t < max_length && kept[static_cast<std::size_t>(t)]; ++t) std::cout << predicted[static_cast<std::size_t>(t)] << ' ';
    std::cout << "\n";
    return 0;
  } catch (const fx::error& e) {
    std::cerr << "sequence_tagger: " << e.what() << "\n";
    return 1;
  }
}
