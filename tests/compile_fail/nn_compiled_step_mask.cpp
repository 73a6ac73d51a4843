// expect-error: fluxion::nn::compile_step: the model has an embedding<...>::mask_zero
// A compiled step does not carry Keras's mask; the tape does.
#include <cstdint>

#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{}, nn::lstm<5>{},
                            nn::dense<2>{});
  fx::optim::adam opt{1e-3};
  auto step = nn::compile_step(net, opt, [](const auto& logits, const auto& labels) {
    return fx::losses::sparse_softmax_cross_entropy(logits, labels);
  });
  return static_cast<int>(sizeof(step));
}
