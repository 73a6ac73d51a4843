// expect-error: fluxion::nn::sequential: this layer cannot take the mask of an embedding<...>::mask_zero
// A layer that drops the time axis (flatten) between a masked embedding and its recurrent layer.
#include <cstdint>

#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 6>{}, nn::embedding<10, 4>::mask_zero{}, nn::flatten{},
                            nn::dense<2>{});
  return static_cast<int>(net(fx::zeros<std::int32_t>({1, 6})).size());
}
