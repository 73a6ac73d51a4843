// expect-error: fluxion::fit / evaluate: the dataset gives \(x, y, sample_weight\) elements, or the model's mask reaches its output
// A tagger's mask reaches its output, but the loss function takes only (logits, labels): fit would
// count the padding steps, so it does not compile.
#include <cstdint>
#include <utility>
#include <vector>

#include <fluxion/fit.hpp>
#include <fluxion/fluxion.hpp>

namespace fx = fluxion;
namespace nn = fluxion::nn;

int main() {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 8>::mask_zero{}, nn::lstm<8, true>{},
                            nn::dense<3>{});
  fx::optim::adam opt{0.01};
  std::vector<std::pair<fx::tensor<std::int32_t>, fx::tensor<std::int32_t>>> data;
  auto loss = [](const auto& logits, const auto& labels) { return fx::losses::sparse_softmax_cross_entropy(logits, labels); };
  (void)fx::fit(net, opt, loss, data);
}
