// expect-error: fluxion::nn::sequential: the input's element type differs from the model's
// not-expected: error:.*error:|errors generated
// A float model called on double data.
#include <fluxion/fluxion.hpp>
namespace nn = fluxion::nn;
int main() {
  auto net = nn::sequential(nn::input<4>{}, nn::dense<2>{});
  net(fluxion::zeros<double>({1, 4}));
}
