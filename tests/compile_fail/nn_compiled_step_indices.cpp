// expect-error: fluxion::nn::compiled_step: the model's first layer reads indices \(an embedding\): the input must be int32 or int64
// A compiled step of a model that starts with an embedding, called on float input.
#include <fluxion/fluxion.hpp>
namespace fx = fluxion;
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::typed_input<std::int32_t, 4>{}, nn::embedding<10, 3>{}, nn::flatten{}, nn::dense<2>{});
  fx::optim::sgd opt{0.1};
  auto step = nn::compile_step(net, opt, [](const auto& y, const auto& l) { return fx::losses::sparse_softmax_cross_entropy(y, l); });
  (void)step(fx::zeros<float>({2, 4}), fx::zeros<std::int32_t>({2}));
}
