// expect-error: fluxion::nn::sequential: the mask of an embedding<...>::mask_zero or masking reaches the model's output
// A mask that no recurrent layer consumes: the loss would count the padding steps.
#include <cstdint>

#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{},
                            nn::lstm<5, true>{}, nn::dense<2>{});
  return static_cast<int>(net(fx::zeros<std::int32_t>({1, 6})).size());
}
