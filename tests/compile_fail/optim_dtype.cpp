// expect-error: fluxion::optim::optimizer::apply_gradients: optimizers update float or double variables
// not-expected: error:.*error:|errors generated
#include <fluxion/tensor.hpp>
#include <fluxion/optim/adam.hpp>
int main() { fluxion::optim::adam opt{0.1}; std::vector<fluxion::tensor<int>> g; std::vector<fluxion::variable<int>*> v; opt.apply_gradients(g, v); }
