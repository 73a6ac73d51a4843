// expect-error: fluxion::nn::compiled_step: the input is on another device than the model
// A cpu model's compiled step called on a tensor of the cuda device.
#include <fluxion/losses.hpp>
#include <fluxion/nn.hpp>
#include <fluxion/optim.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<4>{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  auto step = nn::compile_step(net, opt, [](const auto& l, const auto& y) { return fx::losses::sparse_softmax_cross_entropy(l, y); });
  fx::tensor<float, fx::cuda> x;
  fx::tensor<std::int32_t, fx::cuda> y;
  (void)step(x, y);
}
