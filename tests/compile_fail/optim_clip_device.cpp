// expect-error: fluxion::optim::clip_by_global_norm: gradients on fluxion::cuda need the device backend
#include <fluxion/tensor.hpp>
#include <fluxion/optim/clip.hpp>
int main() { std::vector<fluxion::tensor<float, fluxion::cuda>> g; auto r = fluxion::optim::clip_by_global_norm(g, 1.0); (void)r; }
