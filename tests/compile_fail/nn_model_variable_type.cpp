// expect-error: fluxion::nn::model: a variable listed in FLUXION_LAYERS must have the model's element type and device
// not-expected: error:.*error:|errors generated
// A double variable in a float model.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
struct mixed : nn::model<mixed> {
  nn::dense<2> head;
  fx::variable<double> scale{fx::tensor<double>(1.0)};
  FLUXION_LAYERS(head, scale)
  fx::tensor<float> call(const fx::tensor<float>& x, bool = false) { return head(x); }
};
int main() {
  mixed m;
  return static_cast<int>(m.variables().size());
}
