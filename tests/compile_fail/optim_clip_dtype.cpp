// expect-error: fluxion::optim::clip_by_global_norm: gradients must be float or double
#include <fluxion/tensor.hpp>
#include <fluxion/optim/clip.hpp>
int main() { std::vector<fluxion::tensor<std::int32_t>> g; auto r = fluxion::optim::clip_by_global_norm(g, 1.0); (void)r; }
