// expect-error: fluxion::nn::compile_step: the model must be a fluxion::nn::sequential model
// A compiled step for a single layer, not a sequential model.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  nn::dense<2> layer;
  fx::optim::sgd opt{0.1};
  auto step = nn::compile_step(layer, opt, [](const auto& y, const auto& l) { return fx::losses::sparse_softmax_cross_entropy(y, l); });
  (void)step;
}
