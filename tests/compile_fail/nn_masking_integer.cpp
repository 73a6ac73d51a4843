// expect-error: fluxion::nn::masking: the input must hold floating-point values
// Integer ids are masked by an embedding with mask_zero, not by nn::masking.
#include <cstdint>

#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  const fx::tensor<std::int32_t> ids = fx::zeros<std::int32_t>({2, 3, 1});
  (void)nn::masking{}(ids);
  return 0;
}
