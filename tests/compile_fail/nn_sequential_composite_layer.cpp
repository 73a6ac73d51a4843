// expect-error: fluxion::nn::sequential: every layer must be a fluxion::nn layer \(or a sequential model\); a composite nn::model has no static output shape
// A composite model as a layer of a sequential one.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
struct block : nn::model<block> {
  nn::dense<4> inner;
  FLUXION_LAYERS(inner)
  fx::tensor<float> call(const fx::tensor<float>& x, bool = false) { return inner(x); }
};
int main() {
  auto net = nn::sequential(nn::input<3>{}, block{});
  return static_cast<int>(net.variables().size());
}
