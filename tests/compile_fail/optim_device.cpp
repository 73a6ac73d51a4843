// expect-error: fluxion::optim::optimizer::apply_gradients: variables on fluxion::cuda need the device backend
#include <fluxion/tensor.hpp>
#include <fluxion/optim/sgd.hpp>
int main() { fluxion::optim::sgd opt{0.1}; std::vector<fluxion::tensor<float, fluxion::cuda>> g; std::vector<fluxion::variable<float, fluxion::cuda>*> v; opt.apply_gradients(g, v); }
