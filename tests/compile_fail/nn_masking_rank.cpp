// expect-error: fluxion::nn::masking: the input must be \(time, features...\) per example
// A model input of one axis per example has no steps to mask.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<8>{}, nn::masking{}, nn::dense<2>{});
  return static_cast<int>(net.variables().size());
}
